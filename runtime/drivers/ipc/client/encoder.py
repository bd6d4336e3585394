"""Runtime-side encoding of execute messages, with the pool cache and the repeat fast path.

A :class:`PoolCache` per connection remembers which shared pools (objects with ``fd``/``offset``/
``size``: ``SharedPool``, ``runtime.memory.Memory``) the driver has mapped, so each fd crosses the
socket once; evicted ids ride along in the next execute as a free list. A small non-shared buffer
(<= ``INLINE_DATA_LIMIT``) travels inline and its output regions come back in the reply; a
large one is staged through a per-prepared-model ``SharedPool`` (the caller copies its input
regions in and output regions back). A device memory (a driver-side IBuffer, ``ibuffer_token``)
travels as its token alone. An :class:`EncodeMemo` re-renders the last encoding of the
same Request object, refreshing only inline bytes. The format is in ``execution_codec``.

Example:
    >>> cache = PoolCache()
    >>> req = Request((RequestArgument(pool_index=0, offset=0, length=4),),
    ...               (RequestArgument(pool_index=0, offset=4, length=4),), (bytearray(8),))
    >>> payload, fds, inline, staged = encode_execute(7, req, True, None, cache, [], EncodeMemo())
    >>> len(payload), fds, inline, staged
    (70, [], [0], [])
"""
from __future__ import annotations

import struct
from collections import OrderedDict

from nnscope.runtime.drivers.ipc.wire.codec import Writer, encode_model
from nnscope.runtime.drivers.ipc.wire.execution_codec import (ARG, HEAD, HEAD_FREE, INLINE, NEW_KIND, SHM,
                                                      U16, KIND_INLINE, KIND_NEW_SHM, KIND_SHM, KIND_TOKEN,
                                                      HAS_LOOP_TIMEOUT, MAX_INLINE_BYTES, loop_timeout_bytes)
from nnscope.runtime.drivers.ipc.wire.protocol import INLINE_DATA_LIMIT
from nnscope.runtime.hal.shared_memory import SharedPool, flat_bytes, ibuffer_token, is_shared
from nnscope.runtime.hal.device_types import Request, RequestArgument  # noqa: F401 - doctest
from nnscope.runtime.hal.types import HalModel
from nnscope.runtime.hal.validate import pool_buffer

#: Shared pools remembered per connection before the oldest is freed.
POOL_CACHE_SIZE = 128
#: Bytes of shared pools remembered per connection (the driver keeps each one mapped) before the
#: oldest is freed.
POOL_CACHE_BYTES = 1 << 30


class PoolCache:
    """Runtime-side ids of shared pools already sent on one connection (LRU).

    ``generation`` changes whenever an id stops being valid, which invalidates encode memos.
    """

    def __init__(self, capacity: int = POOL_CACHE_SIZE, byte_capacity: int = POOL_CACHE_BYTES):
        self.capacity = capacity
        self.byte_capacity = byte_capacity
        self.bytes = 0
        self._ids: OrderedDict[int, tuple[object, int]] = OrderedDict()
        self._next = 1
        self.pending_free: list[int] = []
        self.generation = 0
        self.memo_ids = 0  # last execute memo id handed out on this connection

    def lookup(self, pool) -> tuple[int, bool]:
        """(id, is_new) for ``pool``; evicts the least recently used pool when full."""
        key = id(pool)
        entry = self._ids.get(key)
        if entry is not None:
            self._ids.move_to_end(key)
            return entry[1], False
        pool_id = self._next
        self._next += 1
        self._ids[key] = (pool, pool_id)
        self.bytes += _size(pool)
        while len(self._ids) > 1 and (len(self._ids) > self.capacity or self.bytes > self.byte_capacity):
            _, (old_pool, old) = self._ids.popitem(last=False)
            self.bytes -= _size(old_pool)
            self.pending_free.append(old)
            self.generation += 1
        return pool_id, True

    def holds(self, pool) -> bool:
        """Whether ``pool`` was sent on this connection (the driver maps it by id)."""
        return id(pool) in self._ids

    def forget(self, pool) -> None:
        entry = self._ids.pop(id(pool), None)
        if entry is not None:
            self.bytes -= _size(pool)
            self.pending_free.append(entry[1])
            self.generation += 1


def _size(pool) -> int:
    return getattr(pool, "size", 0)


class EncodeMemo:
    """The last encoding of one Request object, re-rendered with fresh inline bytes while the
    request, the pool cache and its generation are unchanged (the fast path of repeated runs)."""

    __slots__ = ("request", "cache", "generation", "parts", "slots", "inline", "staged", "args",
                 "memo_id", "out_slots", "out_targets", "in_views", "ok_result")

    def __init__(self) -> None:
        self.memo_id = 0  # names the driver's decoded copy of the request (execution_codec)
        self.out_slots: list = []  # (pool position, offset, length) of outputs in inline pools
        self.out_targets: tuple | None = None  # (compact reply size, byte views of those regions)
        self.in_views: list | None = None  # byte views of the inline pools, in slot order
        self.ok_result = None  # untimed success with the shapes of the last full answer
        self.request = self.cache = None
        self.generation = -1
        self.parts: list = []
        self.slots: list = []  # (part index, pool position, size) of inline pool bytes
        self.inline: list = []
        self.staged: list = []
        self.args: tuple = (None, None, b"")  # (inputs, outputs, encoded argument section)

    def render(self, request: Request, head: bytes, cache: PoolCache) -> bytes | None:
        """The full execute payload for ``request`` with fresh inline bytes; None when the memo
        does not hold."""
        views = self._current_views(request, cache)
        if views is None:
            return None
        parts = self.parts
        parts[0] = head
        for (slot, _, _), view in zip(self.slots, views):
            parts[slot] = view
        return b"".join(parts)

    def repeat(self, request: Request, head: bytes, cache: PoolCache) -> bytes | None:
        """The ``EXECUTE_SYNC_MEMO`` payload for ``request``: ``head`` + the inline pools'
        bytes; None when the memo does not hold (encode in full)."""
        views = self._current_views(request, cache)
        return None if views is None else b"".join([head, *views])

    def _current_views(self, request: Request, cache: PoolCache) -> list | None:
        """The inline pools' byte views while the memo holds for ``request`` and ``cache``."""
        if request is not self.request or cache is not self.cache or cache.pending_free \
                or cache.generation != self.generation:
            return None
        return self.in_views or self._inline_views(request)

    def _inline_views(self, request: Request) -> list | None:
        """Flat byte views of the inline pools (made once per memo: a repeat reads the current
        bytes through them); None when a pool is not contiguous or changed size."""
        views = []
        for _, position, size in self.slots:
            view = memoryview(pool_buffer(request.pools[position]))
            if not view.c_contiguous:
                return None
            view = flat_bytes(view)
            if view.nbytes != size:
                return None
            views.append(view)
        self.in_views = views
        return views


def encode_execute(model_id: int, request: Request, measure: bool, deadline_ns: int | None,
                   cache: PoolCache, staging: list, memo: EncodeMemo | None = None):
    """Encode an execute; returns (payload, fds to attach, inline pool positions, staged pool
    positions).

    ``staging`` holds, per pool position, the ``SharedPool`` standing in for a large
    non-shared pool (created or grown here); the caller copies data in and out. ``memo``
    remembers the encoding for the next execute of the same Request object.
    """
    deadline = -1 if deadline_ns is None else deadline_ns
    loop_timeout = loop_timeout_bytes(request)
    measure = measure | (HAS_LOOP_TIMEOUT if loop_timeout else 0)
    memo_id = 0
    if memo is not None:
        payload = memo.render(request, HEAD_FREE.pack(model_id, memo.memo_id, measure, deadline, 0)
                              + loop_timeout, cache)
        if payload is not None:
            return payload, [], memo.inline, memo.staged
        memo.request = None  # the driver's memo is replaced (or lost) by this message
        cache.memo_ids = memo_id = (cache.memo_ids + 1) & 0xFFFFFFFF or 1
    free = cache.pending_free
    parts = [HEAD.pack(model_id, memo_id, measure, deadline) + struct.pack(f"<I{len(free)}I", len(free), *free)
             + loop_timeout]
    cache.pending_free = []
    fds, inline, staged, slots = _pool_section(request, cache, staging, parts)
    parts.append(_args_section(request, memo))
    if memo is not None and not fds and not any(ibuffer_token(pool) is not None for pool in request.pools):
        memo.request, memo.cache, memo.generation = request, cache, cache.generation
        memo.parts, memo.slots, memo.inline, memo.staged = parts, slots, inline, staged
        memo.memo_id, memo.ok_result, memo.out_targets, memo.in_views = memo_id, None, None, None
        memo.out_slots = [(a.pool_index, a.offset, a.length) for a in request.outputs
                          if a.pool_index in inline]
    return b"".join(parts), fds, inline, staged


def _pool_section(request: Request, cache: PoolCache, staging: list, parts: list):
    """Append one entry per request pool to ``parts``; returns (fds, inline positions, staged
    positions, inline byte slots)."""
    fds, inline, staged, slots = [], [], [], []
    parts.append(U16.pack(len(request.pools)))
    inline_bytes = 0  # the driver takes at most MAX_INLINE_BYTES inline per execute
    for position, pool in enumerate(request.pools):
        if not is_shared(pool):
            token = ibuffer_token(pool)
            if token is not None:  # a device memory: the data stays in the driver
                parts.append(SHM.pack(KIND_TOKEN, token))
                continue
            pool = pool_buffer(pool)
            size = memoryview(pool).nbytes
            if size <= INLINE_DATA_LIMIT and inline_bytes + size <= MAX_INLINE_BYTES:
                inline_bytes += size
                parts.append(INLINE.pack(KIND_INLINE, size))
                slots.append((len(parts), position, size))
                parts.append(memoryview(pool).tobytes())  # not bytes(): a 0-d array has __index__
                inline.append(position)
                continue
            pool = stage(staging, position, size, cache)
            staged.append(position)
        pool_id, new = cache.lookup(pool)
        if new:
            parts.append(NEW_KIND.pack(KIND_NEW_SHM, pool_id, pool.offset, pool.size))
            fds.append(pool.fd)
        else:
            parts.append(SHM.pack(KIND_SHM, pool_id))
    return fds, inline, staged, slots


def _args_section(request: Request, memo: EncodeMemo | None) -> bytes:
    if memo is not None and memo.args[0] is request.inputs and memo.args[1] is request.outputs:
        return memo.args[2]
    encoded = _encode_args(request)
    if memo is not None:
        memo.args = (request.inputs, request.outputs, encoded)
    return encoded


def stage(staging: list, position: int, size: int, cache: PoolCache) -> SharedPool:
    """The staging pool for ``position``, (re)created when missing or too small."""
    while len(staging) <= position:
        staging.append(None)
    pool = staging[position]
    if pool is None or pool.size < size:
        if pool is not None:
            cache.forget(pool)  # the driver unmaps it with the next message
            pool.close()
        pool = staging[position] = SharedPool(size, "nnscope-staging")
    return pool


def _encode_args(request: Request) -> bytes:
    w = Writer()
    for args in (request.inputs, request.outputs):
        w.u16(len(args))
        for a in args:
            w.parts.append(ARG.pack(a.has_no_value, a.pool_index, a.offset, a.length))
            w.u32s(a.dimensions)
    return w.getvalue()


def model_payload(model: HalModel) -> tuple[bytes, list, list]:
    """Encoded model, fds to send (operand values when large, then model pools) and the
    temporary pools to close once the call returns."""
    inline = len(model.operand_values) <= INLINE_DATA_LIMIT
    fds, keep = [], []
    if not inline:
        values = SharedPool.from_bytes(model.operand_values, "nnscope-operand-values")
        keep.append(values)
        fds.append(values.fd)
    w = Writer()
    w.u32(len(model.pools))
    for pool in model.pools:
        if not is_shared(pool):
            pool = SharedPool.from_bytes(memoryview(pool_buffer(pool)).cast("B"), "nnscope-model-pool")
            keep.append(pool)
        w.u64(pool.offset)
        w.u64(pool.size)
        fds.append(pool.fd)
    return encode_model(model, inline) + w.getvalue(), fds, keep
