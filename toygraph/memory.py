"""A toy device with addressed memory: buffers, memory pools, syncs and a timeline.

Every buffer lives at an address. Capture allocates a graph's buffers from that graph's
private pool, and replay reads and writes exactly those addresses again: that is what
"tensor addresses are baked in" means. New data reaches a graph only by being copied
into its static input.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Iterable

from .errors import CaptureError, InvalidArgumentError, OutOfMemoryError, ShapeMismatchError
from .timeline import Clock, CostModel, Timeline

if TYPE_CHECKING:
    from .capture import ToyGraph

WORD_BYTES = 4
"""Every value in a toy buffer takes 4 bytes, as a float32 would."""

_SYNC_IN_CAPTURE = (
    "operation not permitted when stream is capturing: {what} makes the CPU wait for the GPU, "
    "but during capture the GPU runs nothing, it only records. The capture is invalidated. {advice}"
)
_SYNC_ADVICE = (
    "Keep the value on the device (e.g. pick the next token with an argmax kernel) and read it "
    "after replay(), outside the captured step."
)


def _check_values(values: object, what: str = "data") -> list:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgumentError(f"{what} must be a list of values such as [1, 2, 3], got {values!r} ({type(values).__name__}).")
    return list(values)


class MemoryPool:
    """A named pool of device memory; a graph's private pool only grows while the graph lives."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.used_bytes = 0
        self.peak_bytes = 0
        self.buffers = 0

    def __repr__(self) -> str:
        return f"MemoryPool({self.name!r}, used_bytes={self.used_bytes}, buffers={self.buffers})"


class Buffer(list):
    """A list that lives at an address of a toy device; printing it shows the values, as a list does."""

    address: int
    device: "ToyDevice"
    pool: MemoryPool

    @property
    def nbytes(self) -> int:
        """Bytes this buffer takes on the device."""
        return self.capacity * WORD_BYTES

    def item(self) -> object:
        """The single value of a one-element buffer; a sync: the CPU waits for the GPU."""
        self.device.synchronize(what=".item()")
        if len(self) != 1:
            raise InvalidArgumentError(f".item() needs a buffer of one value, this one holds {len(self)}: index it first.")
        return self[0]

    def tolist(self) -> list:
        """A plain-list copy of the values; a sync, like `.cpu()` or `print(tensor)` on a GPU."""
        self.device.synchronize(what=".tolist()")
        return list(self)

    def copy_(self, values: Iterable) -> "Buffer":
        """Copy new values into this buffer in place: same address, same size."""
        new = _check_values(values, "the values to copy")
        if len(new) != len(self):
            raise ShapeMismatchError(len(self), len(new))
        self[:] = new
        return self


class ToyDevice:
    """A toy GPU: addressed memory in pools, a capacity, a sync counter and a CPU/GPU clock."""

    def __init__(self, capacity_bytes: int = 64 * 2**20, cost: CostModel | None = None, name: str = "toy-gpu") -> None:
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int) or capacity_bytes <= 0:
            raise InvalidArgumentError(f"capacity_bytes must be a whole number of bytes > 0, got {capacity_bytes!r}.")
        self.name = name
        self.capacity_bytes = capacity_bytes
        self.clock = Clock(cost)
        self.eager_pool = MemoryPool("eager")
        self.graph_pools: list[MemoryPool] = []
        self.sync_count = 0
        self.capturing: "ToyGraph | None" = None
        self._next_address = 0x7F0000000000

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

    def _alloc(self, values: list, pool: MemoryPool) -> Buffer:
        nbytes = max(len(values), 1) * WORD_BYTES
        if self.memory_used_bytes + nbytes > self.capacity_bytes:
            raise OutOfMemoryError(
                f"out of memory on {self.name}: {nbytes} bytes asked, {self.memory_used_bytes} of "
                f"{self.capacity_bytes} in use ({self.memory_report()}). A CUDA graph does not help here: "
                f"its private pool adds memory. Free buffers, use a smaller batch, or capture fewer buckets."
            )
        buf = Buffer(values)
        buf.address, buf.device, buf.pool = self._next_address, self, pool
        buf.capacity = max(len(values), 1)
        self._next_address += (nbytes + 255) // 256 * 256  # 256-byte aligned, like cudaMalloc
        pool.used_bytes += nbytes
        pool.peak_bytes = max(pool.peak_bytes, pool.used_bytes)
        pool.buffers += 1
        if pool is self.eager_pool:  # the caching allocator gets eager memory back when the buffer dies
            weakref.finalize(buf, _release, pool, nbytes)
        return buf

    def tensor(self, values: Iterable) -> Buffer:
        """A new device buffer holding these values (an eager allocation, outside any graph pool)."""
        if self.capturing is not None:
            return self._alloc(_check_values(values), self.capturing.pool)
        return self._alloc(_check_values(values), self.eager_pool)

    def empty(self, size: int, fill: object = 0) -> Buffer:
        """A new device buffer of `size` values, filled with `fill`."""
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise InvalidArgumentError(f"size must be a whole number >= 1, got {size!r}.")
        return self.tensor([fill] * size)

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


def _release(pool: MemoryPool, nbytes: int) -> None:
    pool.used_bytes -= nbytes
    pool.buffers -= 1


_default: ToyDevice | None = None


def default_device() -> ToyDevice:
    """The device a ToyGraph uses when none is given (made on first use)."""
    global _default
    if _default is None:
        _default = ToyDevice()
    return _default
