"""A CPU stand-in for ``torch.cuda`` with several devices: where each stream lives, what a capture records.

Exercise ex15 (two GPUs, one side stream on the wrong one: pytorch/pytorch#87794) runs a learner's real
``torch.cuda`` code against this stand-in on any machine. It keeps the rules of PyTorch that the trap is made of:

* A stream belongs to one device. ``torch.cuda.Stream()`` with no ``device=`` is made on the *current* device
  (``torch/cuda/streams.py``: ``Stream.__new__`` uses ``torch.cuda.device(device)`` only when one is given).
* Each device has its own current stream. ``with torch.cuda.stream(s):`` makes ``s`` the current stream of
  *its* device and makes that device current; on exit both are restored (``torch/cuda/__init__.py``,
  ``StreamContext``; ``torch/csrc/cuda/Module.cpp``, ``THCPModule_setStream_wrap``, sets the stream's device
  current). ``with torch.cuda.device(d):`` changes the current device only.
* An op runs on the current stream of the device its tensors live on (a device guard switches to it).
* ``torch.cuda.graph(g, stream=s)`` enters ``torch.cuda.stream(s)`` and begins capture on the current stream.
  Without ``stream=``, it uses ``torch.cuda.graph.default_capture_stream``: a class attribute, made once, by the
  first ``torch.cuda.graph`` without a stream, on the device that was current *then*, and shared by every later
  capture (``torch/cuda/graphs.py``, ``graph.__init__``). A capture on the default stream is refused
  (``aten/src/ATen/cuda/CUDAGraph.cpp``, ``capture_begin``).
* During a capture, work for another device runs at once on that device's current stream, outside the capture.
  Launching it is allowed; what capture forbids is a call such as ``cudaMalloc`` made while the current stream is not
  the capturing one. PyTorch's caching allocator calls ``cudaMalloc`` only when it holds no cached memory for the
  request on that device and stream (``c10/cuda/CUDACachingAllocator.cpp``, ``cudaMallocMaybeCapturing``: a
  ``cudaMalloc`` for a capturing current stream is made in relaxed mode and allowed, any other one is not). So, in
  the default ``capture_error_mode`` ("global", and "thread_local" for one thread):

  - if the outside work needs new memory, that call fails with CUDA error 900, ``cudaErrorStreamCaptureUnsupported``,
    whose text PyTorch prints as ``CUDA error: operation not permitted when stream is capturing``
    (``c10/cuda/CUDAException.cpp``, ``c10_cuda_check_implementation``; the "Search for" line from
    ``c10/cuda/CUDAMiscFunctions.cpp``, ``get_cuda_error_help``): the message of pytorch/pytorch#87794;
  - if it needs none (its tensors fit memory the allocator already caches for that stream, as small tensors do after
    a warm-up), nothing is refused: the work runs eagerly, the graph ends with no node, ``capture_end`` warns
    :data:`EMPTY_GRAPH_WARNING` (``aten/src/ATen/cuda/CUDAGraph.cpp``, ``capture_end``; a ``UserWarning`` in Python),
    and every replay does nothing: the outputs keep what the eager run during the capture left in them.

  With ``capture_error_mode="relaxed"`` even the ``cudaMalloc`` is allowed: always that silent, empty graph
  (pytorch/pytorch#87894).
* A sync during a capture (``tolist()``, ``Stream.synchronize()``, ``torch.cuda.synchronize()``) is refused with the
  same error. The stand-in lets it through in relaxed mode; CUDA refuses a sync of the capturing stream itself in
  every mode ("It is invalid to synchronize or query the execution status of a stream which is being captured":
  CUDA C++ Programming Guide, stream capture, "Prohibited and Unhandled Operations"), which the stand-in does not
  model.

Where the stand-in simplifies, said plainly. Tensors hold lists of numbers (4 bytes each, float32), an op is a Python
function of them, and a replay reruns the captured ops in order. Its caching allocator keeps, per device and stream,
its segments and the bytes in use in each: a request (rounded up to 512 bytes) is served by a segment with that many
bytes free, or needs a new segment from ``cudaMalloc``: 2 MiB for requests up to 1 MiB, 20 MiB for requests under
10 MiB, the request rounded up to 2 MiB above (``kSmallBuffer``, ``kLargeBuffer``, ``kMinLargeAlloc``,
``kRoundLarge`` in ``CUDACachingAllocator.cpp``); small and large requests use separate segments. It ignores
fragmentation inside a segment (its free bytes count as one block); ``empty_cache()``, which ``torch.cuda.graph``
calls before each capture (``graph.__enter__``), gives back the segments with nothing in use; memory for the
capturing stream comes from the graph's private pool, which is never refused (and not modelled further). It raises at the first
op that needs new memory outside the capture; torch does the same at that op's ``cudaMalloc``, then also fails
``capture_end`` ("operation failed due to a previous error during capture").
"""

from __future__ import annotations

import types
import warnings
import weakref
from typing import Callable

__all__ = ["AcceleratorError", "CAPTURE_ERROR", "DEFAULT_STREAM_ERROR", "EMPTY_GRAPH_WARNING", "StandInCuda",
           "calling_with"]

CAPTURE_ERROR = (
    "CUDA error: operation not permitted when stream is capturing\n"
    "Search for `cudaErrorStreamCaptureUnsupported' in "
    "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information."
)
DEFAULT_STREAM_ERROR = ("CUDA graphs must be captured on a non-default stream. (However, after capture, it's ok to "
                        "replay them on the default stream.)")
EMPTY_GRAPH_WARNING = ("The CUDA Graph is empty. This usually means that the graph was attempted to be captured on "
                       "wrong device or stream.")
"""What ``CUDAGraph::capture_end`` warns when the graph holds no node (``aten/src/ATen/cuda/CUDAGraph.cpp``)."""
CAPTURE_MODES = ("global", "thread_local", "relaxed")

# PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp): kMinBlockSize, kSmallSize, kSmallBuffer,
# kLargeBuffer, kMinLargeAlloc, kRoundLarge.
ELEMENT_BYTES = 4
_MIN_BLOCK, _SMALL_SIZE, _SMALL_BUFFER = 512, 1 << 20, 2 << 20
_LARGE_BUFFER, _MIN_LARGE_ALLOC, _ROUND_LARGE = 20 << 20, 10 << 20, 2 << 20


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def block_bytes(n_values: int) -> int:
    """Bytes the caching allocator hands out for a float32 tensor of n_values (at least 512, a multiple of 512)."""
    return max(_MIN_BLOCK, _round_up(n_values * ELEMENT_BYTES, _MIN_BLOCK))


def segment_bytes(request: int) -> int:
    """Bytes of the segment the caching allocator asks cudaMalloc for when no cached memory fits the request."""
    if request <= _SMALL_SIZE:
        return _SMALL_BUFFER
    if request < _MIN_LARGE_ALLOC:
        return _LARGE_BUFFER
    return _round_up(request, _ROUND_LARGE)


# Which stand-in a stream or tensor belongs to, kept out of the objects themselves: an answer that is handed a tensor
# cannot reach the stand-in's log through it without names the grader's scan flags (graphcourse, dunders).
_OWNER: "weakref.WeakKeyDictionary[object, StandInCuda]" = weakref.WeakKeyDictionary()


class AcceleratorError(RuntimeError):
    """What recent PyTorch raises for a CUDA error (``torch.AcceleratorError``, a ``RuntimeError``)."""


class StandInDevice:
    """``torch.device('cuda:N')``."""

    type = "cuda"

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StandInDevice) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("cuda", self.index))

    def __str__(self) -> str:
        return f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"device(type='cuda', index={self.index})"


class StandInStream:
    """A stream of one device."""

    def __init__(self, cuda: "StandInCuda", device: int, name: str, default: bool = False) -> None:
        _OWNER[self] = cuda
        self.device_index, self.name, self.is_default = device, name, default

    @property
    def device(self) -> StandInDevice:
        return StandInDevice(self.device_index)

    def wait_stream(self, other: "StandInStream") -> None:
        _OWNER[self].log.append(("wait", self.name, getattr(other, "name", repr(other))))

    def wait_event(self, event: object) -> None:
        _OWNER[self].log.append(("wait", self.name, "event"))

    def record_event(self, event: object = None) -> object:
        return event

    def synchronize(self) -> None:
        _OWNER[self]._refuse_sync("Stream.synchronize()")

    def __repr__(self) -> str:
        return f"<stand-in stream {self.name!r} on cuda:{self.device_index}>"


class StandInTensor:
    """A tensor on one device: a list of numbers."""

    def __init__(self, cuda: "StandInCuda", values: list, device: int) -> None:
        _OWNER[self] = cuda
        self.values, self.device_index = list(values), device

    @property
    def device(self) -> StandInDevice:
        return StandInDevice(self.device_index)

    @property
    def is_cuda(self) -> bool:
        return True

    def clone(self) -> "StandInTensor":
        return _OWNER[self].op("clone", lambda v: list(v), self)

    def copy_(self, other: "StandInTensor") -> "StandInTensor":
        values = other.values if isinstance(other, StandInTensor) else list(other)
        if len(values) != len(self.values):
            raise RuntimeError(f"The size of tensor a ({len(self.values)}) must match the size of tensor b "
                               f"({len(values)})")
        _OWNER[self].op("copy_", lambda v, src=list(values): list(src), self, out=self,
                      source=other if isinstance(other, StandInTensor) else None)
        return self

    def tolist(self) -> list:
        _OWNER[self]._refuse_sync("tolist()")
        return list(self.values)

    def get_device(self) -> int:
        return self.device_index

    def __repr__(self) -> str:
        return f"stand-in tensor({self.values}, device='cuda:{self.device_index}')"


class StandInCuda:
    """The stand-in: ``torch_module()`` gives a ``torch`` whose ``.cuda`` is this machine of ``n_devices`` GPUs.

    ``log`` records what happened, as tuples: ``("stream", name, device)`` for each stream made,
    ``("op", name, stream, device)`` for eager work, ``("captured", name, stream, device)``, ``("capture begin",
    stream, device, mode)``, ``("capture end", stream, n_ops)``, ``("replay", graph id)``, ``("wait", a, b)``,
    ``("error", text)``, ``("outside capture", name, stream, device)`` (work another stream ran during a capture),
    ``("cudaMalloc", bytes, stream, device)`` for each new segment, ``("empty graph", graph id)``.
    """

    def __init__(self, n_devices: int = 2) -> None:
        self.n_devices = n_devices
        self.log: list[tuple] = []
        self.current = 0
        self._defaults = [StandInStream(self, d, f"default stream of cuda:{d}", default=True) for d in range(n_devices)]
        self._current_stream = list(self._defaults)
        self._made = 0
        self._capture: dict | None = None  # {"graph", "stream", "mode"} while a capture is under way
        self.graphs: list = []
        self._segments: dict[tuple, list[list[int]]] = {}  # (device, stream, small?) -> [[bytes, bytes in use], ...]
        self.torch = self._build()

    # --- what the checks read ---------------------------------------------------------------------------
    def tensor(self, values: list, device: int = 0) -> StandInTensor:
        """A tensor made on `device` (on its current stream, as torch.tensor(values, device=...) is)."""
        index = self._index(device)
        out = StandInTensor(self, values, index)
        self._allocate(out, self._current_stream[index], "tensor")
        return out

    def state(self) -> dict:
        """The current device and each device's current stream (what a helper should leave as it found it)."""
        return {"device": self.current, "streams": [s.name for s in self._current_stream]}

    def op(self, name: str, fn: Callable, *inputs: StandInTensor, out: StandInTensor | None = None,
           source: StandInTensor | None = None) -> StandInTensor:
        """Launch a kernel on the current stream of its tensors' device: run now, or record it when captured."""
        device = inputs[0].device_index
        stream = self._current_stream[device]
        target = out if out is not None else StandInTensor(self, [0.0] * len(inputs[0].values), device)
        if out is None:
            self._allocate(target, stream, name)
        reads = [source] if source is not None else list(inputs)

        def kernel() -> None:
            if source is not None:
                target.values = list(source.values)
            else:
                result = fn(*[list(t.values) for t in reads])
                target.values = list(result)

        cap = self._capture
        if cap is not None:
            if stream is cap["stream"]:
                cap["graph"]._nodes.append(kernel)
                self.log.append(("captured", name, stream.name, device))
                return target
            self.log.append(("outside capture", name, stream.name, device))
            kernel()
            return target
        self.log.append(("op", name, stream.name, device))
        kernel()
        return target

    # --- internals ----------------------------------------------------------------------------------------
    def _allocate(self, tensor: StandInTensor, stream: StandInStream, what: str) -> None:
        """The caching allocator: serve `tensor` from cached memory of its device and stream, or cudaMalloc."""
        cap = self._capture
        if cap is not None and stream is cap["stream"]:
            return  # the graph's private pool: a cudaMalloc for the capturing stream is allowed
        size = block_bytes(len(tensor.values))
        segments = self._segments.setdefault((tensor.device_index, stream.name, size <= _SMALL_SIZE), [])
        segment = next((seg for seg in segments if seg[0] - seg[1] >= size), None)
        if segment is None:  # no cached memory of this device and stream fits: a new segment from cudaMalloc
            if cap is not None and cap["mode"] != "relaxed":
                cap["invalid"] = True
                self.log.append(("error", "operation not permitted when stream is capturing"))
                raise AcceleratorError(CAPTURE_ERROR)
            segment = [segment_bytes(size), 0]
            segments.append(segment)
            self.log.append(("cudaMalloc", segment[0], stream.name, tensor.device_index))
        segment[1] += size
        weakref.finalize(tensor, _free, segment, size)

    def _empty_cache(self) -> None:
        """torch.cuda.empty_cache(): give back every segment with nothing in use."""
        for segments in self._segments.values():
            segments[:] = [seg for seg in segments if seg[1] > 0]

    def _index(self, device: object) -> int:
        if device is None:
            return self.current
        if isinstance(device, StandInDevice):
            index = device.index
        elif isinstance(device, bool):
            raise TypeError(f"invalid device {device!r}")
        elif isinstance(device, int):
            index = device
        elif isinstance(device, str) and device.startswith("cuda"):
            index = int(device.split(":", 1)[1]) if ":" in device else self.current
        else:
            raise TypeError(f"Expected a cuda device, but got: {device!r}")
        if not 0 <= index < self.n_devices:
            raise AcceleratorError("CUDA error: invalid device ordinal")
        return index

    def _refuse_sync(self, what: str) -> None:
        if self._capture is not None and self._capture["mode"] != "relaxed":
            self._capture["invalid"] = True
            raise AcceleratorError(CAPTURE_ERROR)

    def _new_stream(self, device: object = None, priority: int = 0, **kwargs: object) -> StandInStream:
        index = self._index(device)
        self._made += 1
        stream = StandInStream(self, index, f"side stream {self._made}")
        self.log.append(("stream", stream.name, index))
        return stream

    def _set_stream(self, stream: StandInStream) -> None:
        self.current = stream.device_index
        self._current_stream[stream.device_index] = stream

    def _build(self) -> types.ModuleType:
        cuda = self
        torch = types.ModuleType("torch")

        class device_ctx:
            def __init__(self, device: object) -> None:
                self.idx = cuda._index(device) if device is not None else None

            def __enter__(self) -> None:
                self.prev = cuda.current
                if self.idx is not None:
                    cuda.current = self.idx

            def __exit__(self, *exc: object) -> bool:
                cuda.current = self.prev
                return False

        class stream_ctx:
            def __init__(self, stream: StandInStream | None) -> None:
                self.stream = stream

            def __enter__(self) -> None:
                if self.stream is None:
                    return
                self.src_device = cuda.current
                self.src_prev = cuda._current_stream[cuda.current]
                self.dst_prev = cuda._current_stream[self.stream.device_index]
                cuda._set_stream(self.stream)

            def __exit__(self, *exc: object) -> bool:
                if self.stream is None:
                    return False
                cuda._current_stream[self.stream.device_index] = self.dst_prev
                cuda._current_stream[self.src_device] = self.src_prev
                cuda.current = self.src_device
                return False

        class CUDAGraph:
            def __init__(self, keep_graph: bool = False) -> None:
                self._nodes: list[Callable[[], None]] = []
                self._captured = False
                self.id = len(cuda.graphs)
                cuda.graphs.append(self)

            def replay(self) -> None:
                if not self._captured:
                    raise RuntimeError("Called CUDAGraph::replay without a preceding successful capture.")
                cuda.log.append(("replay", self.id))
                for node in self._nodes:
                    node()

            def pool(self) -> tuple:
                return ("pool", self.id)

        class graph:
            default_capture_stream: StandInStream | None = None

            def __init__(self, cuda_graph: CUDAGraph, pool: object = None, stream: StandInStream | None = None,
                         capture_error_mode: str = "global", **kwargs: object) -> None:
                if stream is None and type(self).default_capture_stream is None:  # once, on the device current now
                    type(self).default_capture_stream = cuda._new_stream()
                self.cuda_graph = cuda_graph
                self.capture_stream = stream if stream is not None else type(self).default_capture_stream
                self.ctx = stream_ctx(self.capture_stream)
                if capture_error_mode not in CAPTURE_MODES:
                    raise RuntimeError(f"Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, "
                                       f"got `{capture_error_mode}`")
                self.mode = capture_error_mode

            def __enter__(self) -> None:
                if cuda._capture is not None:
                    raise AcceleratorError(CAPTURE_ERROR)
                cuda._empty_cache()  # as torch.cuda.graph.__enter__ does, before it enters the stream
                self.ctx.__enter__()
                stream = cuda._current_stream[cuda.current]
                if stream.is_default:
                    self.ctx.__exit__(None, None, None)
                    raise RuntimeError(DEFAULT_STREAM_ERROR)
                cuda._capture = {"graph": self.cuda_graph, "stream": stream, "mode": self.mode, "invalid": False}
                cuda.log.append(("capture begin", stream.name, stream.device_index, self.mode))

            def __exit__(self, *exc: object) -> bool:
                cap, cuda._capture = cuda._capture, None
                self.ctx.__exit__(*exc)
                if cap is not None and not cap["invalid"] and exc[0] is None:
                    self.cuda_graph._captured = True
                    cuda.log.append(("capture end", cap["stream"].name, len(self.cuda_graph._nodes)))
                    if not self.cuda_graph._nodes:
                        cuda.log.append(("empty graph", self.cuda_graph.id))
                        warnings.warn(EMPTY_GRAPH_WARNING, UserWarning, stacklevel=2)
                return False

        def current_stream(device: object = None) -> StandInStream:
            return cuda._current_stream[cuda._index(device)]

        def default_stream(device: object = None) -> StandInStream:
            return cuda._defaults[cuda._index(device)]

        def set_device(device: object) -> None:
            cuda.current = cuda._index(device)

        def set_stream(stream: StandInStream) -> None:
            cuda._set_stream(stream)

        def synchronize(device: object = None) -> None:
            cuda._refuse_sync("torch.cuda.synchronize()")

        torch.cuda = types.SimpleNamespace(
            is_available=lambda: True, device_count=lambda: cuda.n_devices, current_device=lambda: cuda.current,
            set_device=set_device, device=device_ctx, Stream=cuda._new_stream, current_stream=current_stream,
            default_stream=default_stream, stream=stream_ctx, set_stream=set_stream, synchronize=synchronize,
            CUDAGraph=CUDAGraph, graph=graph, graph_pool_handle=lambda: ("pool", "handle"),
            is_current_stream_capturing=lambda: cuda._capture is not None, empty_cache=cuda._empty_cache,
            Event=lambda **kw: object(),
        )
        torch.device = lambda spec, index=None: StandInDevice(cuda._index(spec if index is None else index))
        torch.AcceleratorError = AcceleratorError
        torch.Tensor = StandInTensor
        return torch


def _free(segment: list, size: int) -> None:
    segment[1] -= size


def calling_with(torch_module: types.ModuleType, fn: Callable, *args: object, **kwargs: object) -> object:
    """Call fn with ``torch`` (imported inside it, or a global of its module) replaced by torch_module."""
    import sys

    saved = sys.modules.get("torch")
    glb = getattr(fn, "__globals__", {})
    had = "torch" in glb
    old = glb.get("torch")
    sys.modules["torch"] = torch_module
    if had:
        glb["torch"] = torch_module
    try:
        return fn(*args, **kwargs)
    finally:
        if saved is not None:
            sys.modules["torch"] = saved
        else:
            sys.modules.pop("torch", None)
        if had:
            glb["torch"] = old
