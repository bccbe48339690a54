"""What check cells share: the stand-ins, watchers and values they compute, so that a check cell is a few ``observe``
calls (issue 18).

A check cell imports what it needs from here and records its observations itself::

    from graphcourse.grading.checks import buffer_values, watched_device, filled_in_capture
    from graphcourse.grading.observe import inputs, observe

    dev, made = watched_device()
    outs = observe.call("collect(f, xs)", collect, f, xs)
    observe("buffers the graph fills itself", filled_in_capture(made()))

Nothing here records an observation: ``observe.call`` reads the calling check's own names (to see an answer that
rebinds them while the check runs), so the calls that record stay in the check cells. This module is the checks'
own copy of what they compare against: a learner's answer cannot change it (while grading, the tripwire seals every
``graphcourse`` module, and the classes here are sealed too; see docs/grading.md, "What the grader guarantees").

Standard library, toygraph and the course's stand-in CUDA (:mod:`graphcourse.lessons.standin_cuda`, standard
library only) at import time: every graded kernel imports it, and the browser (JupyterLite) build ships it. torch is
never imported: ``TorchCudaRecorder`` stands in for it.
"""

from __future__ import annotations

import types as _types

from toygraph import ToyDevice as _ToyDevice, launch as _launch
from toygraph.capture import kernel_nodes as _kernel_nodes
from toygraph.memory import Buffer as _Buffer

from ..lessons.standin_cuda import calling_with as _calling_with
from .tripwire import SealedType as _SealedType

__all__ = ["buffer_values", "pool_mib", "watched_device", "filled_in_capture", "counted", "LazyLayer",
           "TorchCudaRecorder", "with_fake_torch"]


# --- values -------------------------------------------------------------------------------------------------

def buffer_values(outs) -> list:
    """What the entries of outs hold now: a toy device buffer read with ``.tolist()``, anything else as it is
    (None or an empty result: [])."""
    return [o.tolist() if type(o) is _Buffer else o for o in (outs or [])]


def pool_mib(order) -> int:
    """The MiB a graph pool takes when graphs of these batch sizes are captured in this order (lesson 09's toy rule:
    a graph of size n needs a segment of 16 + n // 2 MiB, reused when a free one is large enough, plus 2 MiB of its
    own). The checks' own copy of the exercise's ``pool_mib``, so that an answer cannot change it."""
    free, total = [], 0
    for size in order:
        need = 16 + size // 2
        if not any(seg >= need for seg in free):
            free.append(need)
            total += need
        total += 2
    return total


# --- watching a toy device --------------------------------------------------------------------------------------

def watched_device():
    """(a toy device, a function giving the buffers made on it while a graph captured, with that graph).

    On a GPU, a tensor made inside a capture block is filled by a node of the graph. The note lives in this closure,
    out of reach of the answer."""
    made = []

    class _WatchedDevice(_ToyDevice):
        def tensor(self, values):
            buf = super().tensor(values)
            if self.capturing is not None:
                made.append((buf, self.capturing))
            return buf

    return _WatchedDevice(), lambda: list(made)


def filled_in_capture(made) -> int:
    """How many of the buffers made during a capture (``made``: pairs from ``watched_device``) its graph reads and
    none of its kernels writes: values a replay fills again, where the step meant to keep them."""
    root = lambda b: b if b.base is None else b.base  # noqa: E731
    count = 0
    for buf, g in made:
        nodes = _kernel_nodes(g.nodes)
        written = {id(root(n.output)) for n in nodes}
        read = {id(root(b)) for n in nodes for b in (*n.inputs, *n.live.values())
                if type(b) is _Buffer}
        count += id(root(buf)) in read and id(root(buf)) not in written
    return count


def counted(step, dev):
    """(step, and a function giving how many times it ran to the end eagerly on dev's buffers: the warm-up).

    The count lives in this closure, out of reach of the answer."""
    calls = [0]

    def counted(x):
        out = step(x)
        if type(x) is _Buffer and x.device is dev and dev.capturing is None:
            calls[0] += 1
        return out

    return counted, lambda: calls[0]


class LazyLayer(metaclass=_SealedType):
    """A toy layer that syncs on its first call (its set-up), then scales and shifts: the checks' own copy of the
    exercise's LazyLayer, so that an answer cannot change it."""

    def __init__(self, scale=2, shift=1):
        self.ready, self.scale, self.shift = False, scale, shift

    def __call__(self, x):
        if not self.ready:
            x.device.synchronize(what="the layer's first-call set-up",
                                 advice="Run the step once eagerly before capture (warm-up).")
            self.ready = True
        k, c = self.scale, self.shift
        h = _launch(lambda v: [k * a for a in v], x, name="scale")
        return _launch(lambda v: [a + c for a in v], h, name="shift")


# --- a stand-in for torch.cuda ------------------------------------------------------------------------------------

class TorchCudaRecorder(metaclass=_SealedType):
    """A stand-in for torch.cuda that records what is called, on which stream, with which tensor.

    ``log`` holds tuples: ``("step", input, stream)``, ``("wait", stream, other)``, ``("clone", source, stream,
    clone)``, ``("copy_", target, source)``, ``("capture begin", stream)``, ``("capture end",)``, ``("replay",)``.
    ``module()`` is a ``torch`` module whose ``cuda`` is the stand-in; ``step`` is a step that logs its call.

    The answer gets the module, ``step``, streams and tensors, and none of them leads back to the recorder: they are
    plain functions and slot-less objects whose names live in closures (reading a closure is tampering the tripwire
    records), and names in the log come from the recorder's own list of what it made (``name_of``), so an object of
    the answer's that calls itself "clone of output 3" is logged as "?"."""

    def __init__(self):
        self.log, self.n, self.clones = [], 0, 0
        self._names = {}  # id -> (object, its name): what this recorder made, kept alive so an id stays unique
        self.default = self.Stream("default")
        self.streams = [self.default]

    def name_of(self, obj) -> str:
        """The name of a stream or tensor this recorder made; "?" for anything else."""
        known = self._names.get(id(obj))
        return known[1] if known is not None and known[0] is obj else "?"

    def _made(self, obj, name):
        self._names[id(obj)] = (obj, name)
        return obj

    def Stream(self, name=None):
        rec = self
        rec.n += 1
        label = name or f"side {rec.n}"

        class _S(metaclass=_SealedType):
            __slots__ = ()
            name = property(lambda s: label)

            def wait_stream(s, other):
                rec.log.append(("wait", label, rec.name_of(other)))
        return rec._made(_S(), label)

    def tensor(self, name):
        rec, label = self, name

        class _T(metaclass=_SealedType):
            __slots__ = ()
            name = property(lambda t: label)

            def clone(t):
                rec.clones += 1
                out = rec.tensor(f"clone of {label} #{rec.clones}")
                rec.log.append(("clone", label, rec.name_of(rec.streams[-1]), rec.name_of(out)))
                return out

            def copy_(t, other):
                rec.log.append(("copy_", label, rec.name_of(other)))
                return t
        return rec._made(_T(), label)

    @property
    def step(self):
        """A step (a plain function, not a method of the recorder) that logs its call and returns a new tensor."""
        rec = self

        def step(x):
            rec.log.append(("step", rec.name_of(x), rec.name_of(rec.streams[-1])))
            return rec.tensor(f"output {len(rec.log)}")
        return step

    def module(self):
        rec = self

        class _StreamCtx:
            __slots__ = ("s",)

            def __init__(c, s):
                c.s = s

            def __enter__(c):
                rec.streams.append(c.s)

            def __exit__(c, *a):
                rec.streams.pop()

        class _Graph:
            __slots__ = ()

            def replay(g):
                rec.log.append(("replay",))

        class _GraphCtx:
            __slots__ = ("s",)

            def __init__(c, g, pool=None, stream=None, **kw):
                c.s = stream if stream is not None else rec.Stream("graph's own stream")

            def __enter__(c):
                rec.log.append(("capture begin", rec.name_of(c.s)))
                rec.streams.append(c.s)

            def __exit__(c, *a):
                rec.streams.pop()
                rec.log.append(("capture end",))

        def stream(name=None):
            return rec.Stream(name)

        cuda = _types.SimpleNamespace(Stream=stream, current_stream=lambda *a: rec.streams[-1],
                                      stream=_StreamCtx, CUDAGraph=_Graph, graph=_GraphCtx,
                                      synchronize=lambda *a: None, is_available=lambda: True,
                                      graph_pool_handle=lambda: "pool")
        torch = _types.ModuleType("torch")
        torch.cuda = cuda
        return torch


def with_fake_torch(rec, fn, *args):
    """Call fn with ``torch`` (imported inside it, or a global of its notebook) replaced by rec's stand-in
    (a TorchCudaRecorder); both are put back afterwards."""
    return _calling_with(rec.module(), fn, *args)
