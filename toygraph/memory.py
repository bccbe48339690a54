"""A toy device with addressed memory: buffers, memory pools, syncs and a timeline.

Every buffer lives at an address. Capture allocates a graph's buffers from that graph's
private pool, and replay reads and writes exactly those addresses again: that is what
"tensor addresses are baked in" means. New data reaches a graph only by being copied
into its static input.

A :class:`Buffer` behaves as a CUDA tensor does towards host code:

* **A sync is host code that needs a Python value.** ``.item()``, ``.tolist()``, ``.cpu()``,
  ``float(buf)``, ``int(buf)``, ``bool(buf)`` (so ``if buf:`` and ``if buf[0] > 0:``: the sync
  is the ``bool``, not the ``[0]`` or the ``>``), printing it (``str``, ``repr``, f-strings),
  ``v in buf`` and ``device.synchronize()`` each make the CPU wait for the GPU: one sync each,
  counted in ``device.sync_count`` and drawn on the timeline, and a :class:`CaptureError`
  during capture.
* **Indexing and iterating give views, not values.** ``buf[i]`` is a one-element view (torch
  gives a 0-d tensor, ``select``); ``for v in buf``, ``list(buf)`` and unpacking yield one view
  per element (torch's ``__iter__`` is ``unbind(0)``). None of them reads device memory, so none
  is a sync, and they are legal during capture. ``list(out)`` is therefore *not* a copy: its
  elements alias the static output and read whatever the next replay writes there. Copy out
  with ``.tolist()`` (to the host: a sync) or ``.clone()`` (on the device: no sync).
* **Arithmetic and comparisons are kernels.** ``buf == 3``, ``buf > other``, ``buf + 1``,
  ``-buf``, ``sum(buf)`` (``0 + buf[0] + buf[1] ...``) each launch a small element-wise kernel
  (recorded during capture) and return a new buffer: no sync, as in torch. Only asking for its
  truth (``bool``, ``if``) syncs.
* **Kernels read buffers on the device**: what a kernel reads, inside :func:`launch` or a
  replay, is never a sync. Inside a kernel a buffer it names reads like a list of values.
* **A slice is a view**: ``buf[1:3]`` shares storage with ``buf`` (writes through either
  are seen by both) and reads nothing, so it is free, as a tensor slice is.
* ``len(buf)`` and ``buf.shape`` are shape, known on the host: free.

Where the toy simplifies, said plainly:

* Values are Python objects of 4 bytes each (a float32's size); there is one dimension, and
  ``buf[i]`` is a one-element view of shape ``(1,)`` where torch gives a 0-d tensor of shape
  ``()`` (so ``buf[i].tolist()`` is ``[v]`` here and ``v`` in torch).
* Element-wise ops broadcast only a Python number or a one-element buffer; there are no
  dtypes (``buf > 0`` holds Python bools).
* The toy has no op whose output *shape* depends on the data. In torch those sync too, because
  the host must learn the shape: ``x.nonzero()``, boolean-mask indexing ``x[mask]``,
  ``masked_select``, ``unique``, ``repeat_interleave`` without ``output_size``.
* Copies into a buffer (``copy_``, a replay's copy-in) cost nothing on the timeline; capacity
  is checked against the bytes buffers hold, not the 512-byte blocks they occupy.
* Graph memory: every buffer allocated during capture stays in the graph's pool for the
  graph's life, so a pool holds the *sum* of a step's intermediates. PyTorch's allocator
  accounts, allocates and frees during capture exactly as in an eager run, so an intermediate
  freed during capture is reused by a later one (a pool holds about the *peak* of live
  tensors); a private pool also holds whole segments (at least one 2 MiB segment for small
  blocks, ``kSmallBuffer``), so a real graph's footprint is far above the toy's bytes; and
  serving engines capture every bucket into *one shared pool*
  (``pool=torch.cuda.graph_pool_handle()``), largest first. Lessons 03 and 04 measure it.

Freeing, and what a graph that still reads the memory sees (the caching allocator's reuse):

* ``device.free(buf)`` stands for what PyTorch does when the last Python reference to a tensor
  goes: the caching allocator takes its block back, and hands it to the next allocation of a
  fitting size from the same pool (best fit). The values stay where they were until the new
  owner writes over them, so a graph that still holds the old address reads the *new owner's*
  values: a wrong answer and no error. ``device.empty_cache()`` (``torch.cuda.empty_cache()``;
  entering ``graph(g)`` calls it, as ``torch.cuda.graph`` does) gives cached free blocks back to
  the driver; a kernel that touches one then raises :class:`IllegalMemoryAccessError`.
* Simplified, said plainly: the toy frees only on ``device.free``. A captured node keeps a Python
  reference to the buffers it reads (a CUDA graph keeps only the raw address), so ``del x`` alone
  could never free a captured input here; and a buffer dropped without ``free`` gives its bytes
  back but its address is never handed out again. Reuse takes a whole freed block (the real
  allocator splits a larger one); only eager memory is reused (a graph's pool keeps every block for
  the graph's life, so freeing a buffer in it only drops the Python name); a block given back to
  the driver never comes back at the same address; a fault is raised at once and names the node,
  where a GPU reports it at the next sync, names no kernel and leaves the CUDA context unusable.
"""

from __future__ import annotations

import copy
import operator
import weakref
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from ._guard import Guarded, Record
from .errors import CaptureError, IllegalMemoryAccessError, InvalidArgumentError, OutOfMemoryError, ShapeMismatchError
from .timeline import Clock, CostModel, Timeline

if TYPE_CHECKING:
    from .capture import ToyGraph

WORD_BYTES = 4
"""Every value in a toy buffer takes 4 bytes, as a float32 would."""

BLOCK_BYTES = 512
"""Every buffer starts on a 512-byte boundary and occupies a whole number of 512-byte blocks,
as in PyTorch's CUDA caching allocator (``kMinBlockSize = 512``: "all sizes are rounded to at
least 512 bytes"). ``cudaMalloc`` itself only promises 256-byte alignment."""

_SYNC_IN_CAPTURE = (
    "operation not permitted when stream is capturing: {what} makes the CPU wait for the GPU, "
    "but during capture the GPU runs nothing, it only records. The capture is invalidated. {advice}"
)
_SYNC_ADVICE = (
    "Keep the value on the device (e.g. pick the next token with an argmax kernel) and read it "
    "after replay(), outside the captured step."
)
_READ_ADVICE = (
    "Host code cannot look at device values while capturing. Keep the value on the device: decide "
    "with kernels (compute the condition as a mask, then select), and read values only after replay()."
)

_IN_KERNEL: ContextVar[bool] = ContextVar("toygraph_in_kernel", default=False)
_FREEZING: ContextVar[bool] = ContextVar("toygraph_freezing", default=False)


@contextmanager
def _set_true(flag: ContextVar[bool]) -> Iterator[None]:
    """`flag` is True inside the with-block (in this thread or task only), then what it was before."""
    token = flag.set(True)
    try:
        yield
    finally:
        flag.reset(token)


def _kernel_running() -> AbstractContextManager[None]:
    """While a kernel runs, reading a buffer is the GPU reading its own memory: no sync."""
    return _set_true(_IN_KERNEL)


def _freezing() -> AbstractContextManager[None]:
    """While capture freezes a kernel's Python values, device objects are kept, never copied."""
    return _set_true(_FREEZING)


class _DeviceObject(Guarded):
    """Device-side objects (buffers, devices, pools, graphs) are kept by reference when capture freezes a kernel."""

    def __deepcopy__(self, memo: dict) -> object:
        if _FREEZING.get():
            return self
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            setattr(new, key, copy.deepcopy(value, memo))
        return new


def _check_values(values: object, what: str = "data") -> list:
    if isinstance(values, Buffer):  # a device-to-device copy: the GPU reads it, no sync
        values._check_not_freed(what)
        return values._read()
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgumentError(f"{what} must be a list of values such as [1, 2, 3], got {values!r} ({type(values).__name__}).")
    values = list(values)
    if any(isinstance(v, Buffer) for v in values):
        raise InvalidArgumentError(
            f"{what} holds device buffers (views such as buf[i], or the elements of list(buf)), not values. "
            f"Pass the buffer itself (a copy on the device, no sync), or host values from buf.tolist() "
            f"(a sync)."
        )
    return values


class MemoryPool(_DeviceObject):
    """A named pool of device memory; a graph's private pool only grows while the graph lives."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.used_bytes = 0
        """Bytes the pool's buffers hold (values x 4 bytes)."""
        self.allocated_bytes = 0
        """Bytes of the 512-byte blocks they occupy, as ``torch.cuda.memory_allocated()`` counts them."""
        self.peak_bytes = 0
        self.buffers = 0

    def __repr__(self) -> str:
        return f"MemoryPool({self.name!r}, used_bytes={self.used_bytes}, buffers={self.buffers})"


class _Block:
    """One block of device memory at an address: its values outlive each buffer that owns it in turn."""

    __slots__ = ("address", "size_bytes", "values", "pool", "state", "owner", "tenant")

    def __init__(self, address: int, size_bytes: int, values: list, pool: MemoryPool) -> None:
        self.address, self.size_bytes, self.values, self.pool = address, size_bytes, values, pool
        self.state = "allocated"
        """"allocated" (a buffer owns it), "cached" (freed, kept by the caching allocator) or "unmapped" (given back to the driver)."""
        self.owner: weakref.ref | None = None
        """The storage that owns the block now (or last did)."""
        self.tenant = ""
        """Who owns the block now (or last did), in words: for error messages."""


class _Storage:
    """The values of one allocation; a buffer and every view of it share one storage."""

    __slots__ = ("values", "block", "name", "serial", "step", "freed", "release", "__weakref__")

    def __init__(self, values: list, block: _Block | None = None, name: str | None = None, serial: int = 0,
                 step: int = 0) -> None:
        self.values = values  # the block's values: a later owner of the block writes into the same list
        self.block, self.name, self.serial, self.step = block, name, serial, step
        self.freed = False
        self.release: Callable[[], object] | None = None

    @property
    def taken_back(self) -> bool:
        """Freed, and the allocator has its block again (cached, re-used or unmapped); a graph pool's blocks never are."""
        block = self.block
        if not self.freed or block is None:
            return False
        return block.state != "allocated" or block.owner is None or block.owner() is not self

    def describe(self, length: int) -> str:
        """This allocation in words: its name (or its size), when it was made."""
        what = f"buffer {self.name!r}" if self.name else f"an unnamed buffer of {length} value(s)"
        return f"{what}, allocated at step {self.step} (allocation #{self.serial})"


def _by_element(op: Callable, symbol: str, reflected: bool = False) -> Callable:
    """A Buffer operator (``buf + 1``, ``1 + buf``, ``buf == other``): `op` element by element, as one small kernel
    on the device (Buffer._elementwise says what each kind of operand does)."""

    def method(self: "Buffer", other: object) -> "Buffer":
        return self._elementwise(other, op, symbol, reflected)

    method.__name__ = f"__{'r' if reflected else ''}{op.__name__}__"
    method.__qualname__ = f"Buffer.{method.__name__}"
    return method


class Buffer(_DeviceObject):
    """Values at an address of a toy device: a tensor's rules for host code (reads sync, slices are views)."""

    def __init__(self, storage: _Storage, offset: int, length: int, step: int, address: int,
                 device: "ToyDevice", pool: MemoryPool, base: "Buffer | None" = None) -> None:
        self._storage, self._offset, self._length, self._step = storage, offset, length, step
        self.address, self.device, self.pool = address, device, pool
        self.base = base
        """The buffer this one is a view of (None when it owns its allocation), like ``tensor._base``."""

    # device-side access: kernels, copies; never a sync ------------------------------------
    def _indices(self) -> range:
        return range(self._offset, self._offset + self._length * self._step, self._step)

    def _fault_if_unmapped(self) -> None:
        block = self._storage.block
        if block is not None and block.state == "unmapped":
            raise IllegalMemoryAccessError(
                f"CUDA error: an illegal memory access was encountered (the toy's stand-in for a fault): "
                f"{self.label} at {self.address:#x} was freed and its block given back to the driver "
                f"(empty_cache). Keep a reference to every tensor a graph reads."
            )

    def _read(self) -> list:
        self._fault_if_unmapped()
        values = self._storage.values
        if self._step == 1:
            return values[self._offset:self._offset + self._length]
        return [values[i] for i in self._indices()]

    def _write(self, new: list) -> None:
        if len(new) != self._length:
            raise ShapeMismatchError(self._length, len(new))
        self._fault_if_unmapped()
        values = self._storage.values
        if self._step == 1:
            values[self._offset:self._offset + self._length] = new
        else:
            for i, v in zip(self._indices(), new):
                values[i] = v

    # host-side reads: each one a sync (a Python value from device memory) ----------------------------------------------------
    @property
    def name(self) -> str | None:
        """The name given at allocation (``device.tensor(values, name="x")``), shared by its views; None if none."""
        return self._storage.name

    @property
    def label(self) -> str:
        """How messages name this buffer: ``buffer 'x'``, or its size when it has no name."""
        return f"buffer {self.name!r}" if self.name else f"an unnamed buffer of {self._length} value(s)"

    @property
    def freed(self) -> bool:
        """True once ``device.free`` was called on this buffer's allocation (in PyTorch: its last reference went)."""
        return self._storage.freed

    def _check_not_freed(self, what: str) -> None:
        if self._storage.taken_back:
            raise InvalidArgumentError(
                f"{what}: {self.label} was freed (device.free), so host code can no longer use it, as Python "
                f"cannot use a tensor whose last reference was deleted. Only a graph that captured its address "
                f"can still reach that memory. Allocate a new buffer."
            )

    def _host_read(self, what: str, explicit: bool = False) -> list:
        if not _IN_KERNEL.get():
            self._check_not_freed(what)
            implicit = not explicit and self.device.capturing is not None
            self.device.synchronize(what=what, advice=_READ_ADVICE if implicit else None)
        return self._read()

    def _one(self, what: str) -> object:
        if self._length != 1:
            raise InvalidArgumentError(
                f"{what} needs a buffer of one value, this one holds {self._length}: index it first "
                f"(buf[i]) or read them all with .tolist()."
            )
        return self._host_read(what, explicit=what == ".item()")[0]

    def item(self) -> object:
        """The single value of a one-element buffer; a sync: the CPU waits for the GPU."""
        return self._one(".item()")

    def tolist(self) -> list:
        """A plain-list copy of the values on the host; a sync, as `.tolist()` on a GPU tensor."""
        return self._host_read(".tolist()", explicit=True)

    def cpu(self) -> list:
        """The values copied to the host; a sync, as `.cpu()` on a GPU tensor.

        The toy has no host tensors, so this returns a plain list, as :meth:`tolist` does.
        """
        return self._host_read(".cpu()", explicit=True)

    def __iter__(self) -> Iterator:
        if _IN_KERNEL.get():  # a kernel naming a buffer reads its values on the device
            return iter(self._read())
        # one view per element, as torch's Tensor.__iter__ (unbind(0)): reads nothing, no sync
        return (self._view(slice(i, i + 1)) for i in range(self._length))

    def __contains__(self, value: object) -> bool:
        return value in self._host_read("`in` on a buffer")

    __hash__ = object.__hash__  # by identity, as a tensor's hash is

    def __bool__(self) -> bool:
        if self._length != 1:
            raise InvalidArgumentError(
                f"the truth value of a buffer of {self._length} values is ambiguous (as for a tensor): "
                f"decide on the device with a kernel, or read the values with .tolist() and use any() or all(). "
                f"(`buf == [...]` compares on the device and gives a buffer; to compare on the host: "
                f"buf.tolist() == [...], a sync.)"
            )
        return bool(self._host_read("bool(buf), an `if` on a device value")[0])

    def __float__(self) -> float:
        return float(self._one("float(buf)"))  # type: ignore[arg-type]

    def __int__(self) -> int:
        return int(self._one("int(buf)"))  # type: ignore[call-overload]

    def __index__(self) -> int:
        value = self._one("using a buffer as an index (operator.index)")
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"only a buffer holding a whole number can be an index, got {value!r}.")
        return value

    def __str__(self) -> str:
        return str(self._host_read("printing a buffer"))

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        if not spec:
            return str(self)
        return format(self._one(f"formatting a buffer (f'{{buf:{spec}}}')"), spec)

    # element-wise arithmetic and comparisons: small kernels on the device, no sync ------------
    def _elementwise(self, other: object, op: Callable, symbol: str, reflected: bool = False) -> "Buffer":
        if _IN_KERNEL.get():
            raise InvalidArgumentError(
                f"`{symbol}` on a buffer inside a kernel: a kernel works on values. If the buffer came "
                f"from buf[i] on the host, that is a view, not a number: read the number with .item() "
                f"(a sync, outside capture) before launching, or pass the buffer as an input of launch() "
                f"(read live at every replay), or index it inside the kernel (buf[i] there is a value)."
            )
        from .capture import launch
        name = f"{'r' if reflected else ''}{symbol}"
        if isinstance(other, Buffer):
            n, m = self._length, other._length
            if n != m and 1 not in (n, m):
                raise ShapeMismatchError(n, m, what=f"operand of `{symbol}`")
            size = max(n, m)

            def pairwise(a: list, b: list) -> list:
                a, b = (a * size if len(a) == 1 else a), (b * size if len(b) == 1 else b)
                return [op(y, x) if reflected else op(x, y) for x, y in zip(a, b)]
            return launch(pairwise, self, other, name=name)
        if isinstance(other, (bool, int, float, complex)):
            scalar = other  # a kernel argument: baked at capture

            def with_scalar(a: list) -> list:
                return [op(scalar, x) if reflected else op(x, scalar) for x in a]
            return launch(with_scalar, self, name=name)
        if isinstance(other, (list, tuple)) and not any(isinstance(v, Buffer) for v in other):
            if len(other) not in (1, self._length):
                raise ShapeMismatchError(self._length, len(other), what=f"operand of `{symbol}`")
            constant = list(other) * (self._length if len(other) == 1 else 1)  # host values: baked

            def with_constant(a: list) -> list:
                return [op(y, x) if reflected else op(x, y) for x, y in zip(a, constant)]
            return launch(with_constant, self, name=name)
        return NotImplemented

    __eq__ = _by_element(operator.eq, "==")  # type: ignore[assignment]
    __ne__ = _by_element(operator.ne, "!=")  # type: ignore[assignment]
    __lt__ = _by_element(operator.lt, "<")
    __le__ = _by_element(operator.le, "<=")
    __gt__ = _by_element(operator.gt, ">")
    __ge__ = _by_element(operator.ge, ">=")
    __add__ = _by_element(operator.add, "+")
    __radd__ = _by_element(operator.add, "+", reflected=True)
    __sub__ = _by_element(operator.sub, "-")
    __rsub__ = _by_element(operator.sub, "-", reflected=True)
    __mul__ = _by_element(operator.mul, "*")
    __rmul__ = _by_element(operator.mul, "*", reflected=True)
    __truediv__ = _by_element(operator.truediv, "/")
    __rtruediv__ = _by_element(operator.truediv, "/", reflected=True)
    __floordiv__ = _by_element(operator.floordiv, "//")
    __mod__ = _by_element(operator.mod, "%")

    def __neg__(self) -> "Buffer":
        return self._elementwise(-1, operator.mul, "neg")

    def __len__(self) -> int:
        return self._length

    @property
    def shape(self) -> tuple[int]:
        """(number of values,): shape is known on the host, reading it is no sync."""
        return (self._length,)

    @property
    def nbytes(self) -> int:
        """Bytes this buffer's values take on the device."""
        return self._length * WORD_BYTES

    @property
    def is_view(self) -> bool:
        """True when this buffer is a slice of another and shares its storage."""
        return self.base is not None

    # indexing: an int or a slice makes a view (no sync) --------------------------------------
    def _position(self, index: int) -> int:
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"index out of range for a buffer of {self._length} values")
        return index

    def _view(self, key: slice) -> "Buffer":
        start, stop, step = key.indices(self._length)
        if key.step is not None and key.step <= 0:
            raise InvalidArgumentError(f"a buffer slice needs a positive step, as a tensor slice does; got {key.step}.")
        length = len(range(start, stop, step))
        offset = self._offset + start * self._step
        base = self.base if self.base is not None else self
        return Buffer(self._storage, offset, length, self._step * step, base.address + offset * WORD_BYTES,
                      self.device, self.pool, base)

    def __getitem__(self, key: int | slice) -> "object | Buffer":
        """A view: `buf[1:3]` of those values, `buf[i]` of one value (a 0-d tensor in torch). No sync.

        Inside a kernel, `buf[i]` is the value itself: the GPU reading its own memory.
        """
        if isinstance(key, slice):
            return self._view(key)
        if isinstance(key, Buffer):
            raise InvalidArgumentError(
                "indexing a buffer with a buffer: the toy has no gather or mask indexing. In torch, "
                "x[mask] with a bool mask syncs (the host must learn the result's size); x[idx] with an "
                "integer tensor gathers on the device. Launch a kernel that does it instead."
            )
        if isinstance(key, bool) or not isinstance(key, int):
            raise InvalidArgumentError(f"a buffer is indexed by an int or a slice, got {key!r}.")
        position = self._position(key)
        if _IN_KERNEL.get():
            return self._storage.values[self._offset + position * self._step]
        return self._view(slice(position, position + 1))

    def __setitem__(self, key: int | slice, value: object) -> None:
        if isinstance(key, slice):
            self._view(key).copy_(value)
        elif isinstance(key, bool) or not isinstance(key, int):
            raise InvalidArgumentError(f"a buffer is indexed by an int or a slice, got {key!r}.")
        else:
            position = self._position(key)
            self._view(slice(position, position + 1)).copy_([value])

    # copies: device-side, no sync ---------------------------------------------------------
    def copy_(self, values: "Iterable | Buffer | object") -> "Buffer":
        """Copy new values into this buffer in place (same address, same size); a single number fills it."""
        if isinstance(values, Buffer) or (isinstance(values, Iterable) and not isinstance(values, (str, bytes))):
            new = _check_values(values, "the values to copy")
            if len(new) != self._length:
                raise ShapeMismatchError(self._length, len(new))
        else:
            new = [values] * self._length
        self._check_not_freed("copy_ into a freed buffer")
        graph = self.device.capturing
        if graph is None or graph._record_copy(self, values if isinstance(values, Buffer) else None, new):
            self._write(new)
        return self

    def clone(self) -> "Buffer":
        """A new buffer with the same values, copied on the device: one kernel launch, no sync."""
        from .capture import launch
        return launch(_same, self, name="clone")

    def __deepcopy__(self, memo: dict) -> "Buffer":
        return self if _FREEZING.get() else self.clone()


def _same(values: list) -> list:
    return values


class ToyDevice(_DeviceObject):
    """A toy GPU: addressed memory in pools, a capacity, a sync counter and a CPU/GPU clock."""

    def __init__(self, capacity_bytes: int = 64 * 2**20, cost: CostModel | None = None, name: str = "toy-gpu") -> None:
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int) or capacity_bytes <= 0:
            raise InvalidArgumentError(f"capacity_bytes must be a whole number of bytes > 0, got {capacity_bytes!r}.")
        self.name = name
        self.capacity_bytes = capacity_bytes
        self.clock = Clock(cost)
        self.eager_pool = MemoryPool("eager")
        self.graph_pools: list[MemoryPool] = Record()  # only the toy adds pools (see _guard)
        self.sync_count = 0
        self.capturing: "ToyGraph | None" = None
        self._next_address = 0x7F0000000000
        self.allocations = 0
        """How many buffers this device has allocated: allocation #n in messages."""
        self._cache: list[_Block] = Record()  # freed eager blocks, kept for reuse (the caching allocator's free list)

    # memory -----------------------------------------------------------------
    @property
    def memory_used_bytes(self) -> int:
        """Bytes in use: the eager run's live buffers plus every graph pool."""
        return self.eager_pool.used_bytes + sum(p.used_bytes for p in self.graph_pools)

    def memory_report(self) -> dict[str, int]:
        """Bytes used per pool, by name."""
        report = {self.eager_pool.name: self.eager_pool.used_bytes}
        report.update({p.name: p.used_bytes for p in self.graph_pools})
        return report

    def _alloc(self, values: list, pool: MemoryPool, name: str | None = None) -> Buffer:
        nbytes = max(len(values), 1) * WORD_BYTES
        if self.memory_used_bytes + nbytes > self.capacity_bytes:
            raise OutOfMemoryError(
                f"out of memory on {self.name}: {nbytes} bytes asked, {self.memory_used_bytes} of "
                f"{self.capacity_bytes} in use ({self.memory_report()}). A CUDA graph does not help here: "
                f"its private pool adds memory. Free buffers, use a smaller batch, or capture fewer buckets."
            )
        need = -(-nbytes // BLOCK_BYTES) * BLOCK_BYTES  # rounded up to 512 bytes, like PyTorch's caching allocator
        fits = [b for b in self._cache if b.pool is pool and b.size_bytes >= need]
        if fits:  # the caching allocator hands a freed block to the next allocation that fits (best fit)
            found = min(fits, key=lambda b: (b.size_bytes, b.address))
            self._cache.remove(found)
            found.values[:len(values)] = values  # written over the old owner's values; any tail keeps them
            found.state = "allocated"
        else:
            found = _Block(self._next_address, need, list(values), pool)
            self._next_address += need
        block = found.size_bytes
        self.allocations += 1
        storage = _Storage(found.values, found, name, self.allocations, self.clock.step)
        found.owner, found.tenant = weakref.ref(storage), storage.describe(len(values))
        buf = Buffer(storage, 0, len(values), 1, found.address, self, pool)
        pool.used_bytes += nbytes
        pool.allocated_bytes += block
        pool.peak_bytes = max(pool.peak_bytes, pool.used_bytes)
        pool.buffers += 1
        if pool is self.eager_pool:  # the caching allocator gets eager memory back when the last view dies
            storage.release = weakref.finalize(storage, _release, pool, nbytes, block)
        return buf

    def tensor(self, values: Iterable, *, name: str | None = None) -> Buffer:
        """A new device buffer holding these values (from a buffer: a device-side copy, no sync); `name` labels it in messages."""
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidArgumentError(f"name must be a non-empty string such as 'x', or None; got {name!r}.")
        if isinstance(values, Buffer):
            values._check_not_freed("device.tensor(a freed buffer)")
            copy = values.clone()
            if name is not None:
                copy._storage.name = name
                copy._storage.block.tenant = copy._storage.describe(len(copy))
            return copy
        pool = self.capturing.pool if self.capturing is not None else self.eager_pool
        return self._alloc(_check_values(values), pool, name)

    def empty(self, size: int, fill: object = 0, *, name: str | None = None) -> Buffer:
        """A new device buffer of `size` values, filled with `fill`."""
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise InvalidArgumentError(f"size must be a whole number >= 1, got {size!r}.")
        return self.tensor([fill] * size, name=name)

    def free(self, buf: Buffer) -> None:
        """Give buf's block back to the allocator, as PyTorch does when the last Python reference to a tensor goes.

        An eager block goes to the allocator's cache: the next allocation of a fitting size gets the
        same address, a graph that still reads it reads the new owner's values, and host code can no
        longer use buf. A buffer in a graph's pool keeps its block (the pool holds it for the graph's
        life), so freeing it changes nothing a replay or host code sees. The toy frees only here;
        dropping a buffer's last reference returns its bytes but never its address.
        """
        if not isinstance(buf, Buffer):
            raise InvalidArgumentError(f"free() takes a device buffer, got {type(buf).__name__}.")
        if buf.device is not self:
            raise InvalidArgumentError("free() on a buffer of another toy device: free it on its own device.")
        if buf.base is not None:
            raise InvalidArgumentError(
                f"{buf.label} is a view: it shares its base's block, which stays while the base lives. "
                f"Free the buffer that owns the allocation (view.base)."
            )
        storage = buf._storage
        if storage.freed:
            raise InvalidArgumentError(f"{buf.label} was already freed: a buffer is freed once.")
        storage.freed = True
        block = storage.block
        if block is None or block.pool is not self.eager_pool:
            return  # a graph's private pool holds its blocks for the graph's life
        if storage.release is not None:
            storage.release()  # its bytes back, once (a finalizer that has run does nothing later)
        block.state = "cached"
        block.tenant = f"{storage.describe(buf._length)}, since freed too"
        self._cache.append(block)

    def empty_cache(self) -> None:
        """Give every cached free block back to the driver, as ``torch.cuda.empty_cache()``: a kernel that touches one faults."""
        for block in self._cache:
            block.state = "unmapped"
        self._cache.clear()

    @property
    def cached_bytes(self) -> int:
        """Bytes of freed blocks the caching allocator keeps for reuse (``memory_reserved() - memory_allocated()``)."""
        return sum(b.size_bytes for b in self._cache)

    # syncs and time ----------------------------------------------------------
    def synchronize(self, what: str = "synchronize()", advice: str | None = None) -> None:
        """Make the CPU wait for the GPU; during capture this is an error, as on a real GPU.

        `what` names the sync in the error. `advice`, when given, replaces the error's last
        sentence (keep the value on the device and read it after replay), which is the wrong
        fix for some syncs: a library's one-time set-up on its first call, say, where the fix
        is a warm-up run before capture.
        """
        if advice is not None and (not isinstance(advice, str) or not advice.strip()):
            raise InvalidArgumentError(f"advice must be a sentence saying how to avoid this sync, or None; got {advice!r}.")
        if self.capturing is not None:
            graph = self.capturing
            graph._invalidate(what)
            raise CaptureError(_SYNC_IN_CAPTURE.format(what=what, advice=_SYNC_ADVICE if advice is None else advice.strip()))
        self.sync_count += 1
        self.clock.sync(what)

    @property
    def timeline(self) -> Timeline:
        """Everything this device's CPU and GPU lanes have done so far."""
        return self.clock.timeline

    def end_step(self) -> None:
        """Mark the end of a decode step on the timeline (for per-step times)."""
        self.clock.end_step()

    def reset_timeline(self) -> None:
        """Start a fresh timeline and sync count (memory is kept)."""
        self.clock = Clock(self.clock.cost)
        self.sync_count = 0

    def __repr__(self) -> str:
        return f"ToyDevice({self.name!r}, used {self.memory_used_bytes} of {self.capacity_bytes} bytes, syncs={self.sync_count})"


def _release(pool: MemoryPool, nbytes: int, block: int) -> None:
    pool.used_bytes -= nbytes
    pool.allocated_bytes -= block
    pool.buffers -= 1


_default: ToyDevice | None = None


def default_device() -> ToyDevice:
    """The device a ToyGraph uses when none is given (made on first use)."""
    global _default
    if _default is None:
        _default = ToyDevice()
    return _default
