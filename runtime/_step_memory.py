"""Internal: the shared memory of a compound plan's executions (AOSP ``ExecutionPlan``'s
``mTemporaries``: one ashmem region, each temporary at an offset).

A :class:`StepMemory` is one sealed memfd (:class:`~runtime.hal.shared_memory.SharedPool`) laid out
in *slots*, one per tensor that crosses a step boundary, and one per model input and output that
the steps read or write (copied in before the first step and out after the last, so that every
step's request names one pool). A driver maps the region once per connection (the pool cache of
``runtime.drivers.ipc.client.encoder``) and later requests name it by id. The region is kept with the
plan and reused by its next execution; it grows (a new region, the old slots' bytes copied) only
when a slot needs more bytes than it has: a dynamic shape. :class:`StepMemories` holds the idle
regions of one plan, so that executions running at the same time never share one.

Example:
    >>> memory = StepMemory()
    >>> memory.fit({("in", 0): 16, 7: 100})
    True
    >>> memory.slot(("in", 0)), memory.slot(7), memory.region.size
    ((0, 16), (64, 100), 192)
    >>> memory.fit({7: 80}), memory.slot(7)
    (False, (64, 100))
    >>> memory.close()
"""
from __future__ import annotations

import threading
from typing import Hashable, Iterable, Mapping

from nnscope.runtime.hal.shared_memory import SharedPool

_ALIGN = 64
#: Idle regions one plan keeps for its next executions (more run at once: the extra ones close).
KEEP_IDLE = 2


class StepMemory:
    """One region and its slot layout; ``requests`` caches step requests built against it."""

    def __init__(self) -> None:
        self.region: SharedPool | None = None
        self._slots: dict[Hashable, tuple[int, int]] = {}
        self.requests: dict = {}   # step index -> Request (valid while the layout holds)
        self.signature = None      # the model arguments ``requests`` were built for
        self.fenced_result = None  # (steps' output shapes, result) of the last fenced run
        self._retired: list[SharedPool] = []

    def slot(self, key: Hashable) -> tuple[int, int]:
        """(offset, size) of slot ``key``."""
        return self._slots[key]

    def fit(self, sizes: Mapping[Hashable, int]) -> bool:
        """Make every slot of ``sizes`` at least that large; True when the region changed (then
        the old slots' bytes are in the new region, and cached requests are gone)."""
        slots = self._slots
        if all(key in slots and size <= slots[key][1] for key, size in sizes.items()):
            return False
        wanted = {key: size for key, (_, size) in slots.items()}
        for key, size in sizes.items():
            wanted[key] = max(size, wanted.get(key, 0))
        self._relayout(wanted)
        return True

    def _relayout(self, sizes: Mapping[Hashable, int]) -> None:
        layout, end = {}, 0
        for key, size in sizes.items():
            layout[key] = (end, size)
            end += -(-max(size, 1) // _ALIGN) * _ALIGN
        region = SharedPool(end, "nnscope-step-memory")
        old = self.region
        if old is not None:
            for key, (offset, size) in self._slots.items():
                start = layout[key][0]
                region.view[start:start + size] = old.view[offset:offset + size]
            self._retired.append(old)
        self.region, self._slots = region, layout
        self.requests, self.signature = {}, None

    def retired(self) -> list[SharedPool]:
        """Regions replaced since the last call (the caller has drivers forget, then closes them)."""
        retired, self._retired = self._retired, []
        return retired

    def pools(self) -> Iterable[SharedPool]:
        """Every region this memory still holds open."""
        return [*self._retired, *([self.region] if self.region is not None else [])]

    def close(self) -> None:
        for pool in self.pools():
            pool.close()
        self.region, self._retired, self._slots, self.requests = None, [], {}, {}


class StepMemories:
    """The idle :class:`StepMemory` objects of one plan (at most :data:`KEEP_IDLE`)."""

    def __init__(self) -> None:
        self.temporary_sizes: dict | None = None  # operand -> bytes at first (the shape's, or a guess)
        self._idle: list[StepMemory] = []
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> StepMemory:
        with self._lock:
            return self._idle.pop() if self._idle else StepMemory()

    def give_back(self, memory: StepMemory, forget) -> None:
        """Keep ``memory`` for the next execution, or close it (``forget(pool)`` first tells the
        drivers to unmap each region closed)."""
        for pool in memory.retired():
            forget(pool)
            pool.close()
        with self._lock:
            if not self._closed and len(self._idle) < KEEP_IDLE:
                self._idle.append(memory)
                return
        release(memory, forget)

    def close(self, forget) -> None:
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for memory in idle:
            release(memory, forget)


def release(memory: StepMemory, forget) -> None:
    """Have the drivers forget every region of ``memory``, then close them."""
    for pool in memory.pools():
        forget(pool)
    memory.close()
