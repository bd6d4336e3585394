"""Driver side of execute messages: :func:`decode_execute` turns an execute payload (format in
``runtime.drivers.ipc.wire.execution_codec``) into a ``Request``, with a per-connection
:class:`DecodeState` that maps new pools, names device buffers by token (``buffers``) and keeps
bounded caches (argument sections, inline buffers, memos of repeated requests).

Example:
    >>> from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
    >>> req = Request((RequestArgument(pool_index=0, offset=0, length=4),),
    ...               (RequestArgument(pool_index=0, offset=4, length=4),), (bytearray(8),))
    >>> payload, fds, inline, staged = encode_execute(7, req, True, None, PoolCache(), [])
    >>> decoded = decode_execute(Reader(payload), DecodeState(), fds)
    >>> decoded.model_id, decoded.measure, decoded.request.inputs[0].length, decoded.inline_outputs
    (7, True, 4, [0])
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from nnscope.runtime.drivers.ipc.service import buffers as ibuffers
from nnscope.runtime.drivers.ipc.service._bytelru import ByteLru
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader
from nnscope.runtime.drivers.ipc.wire.execution_codec import (_ARG, _HEAD_FREE, _I64, _NEW, _SHM, _U16, HAS_LOOP_TIMEOUT,
                                                      KIND_INLINE, KIND_NEW_SHM, KIND_SHM, KIND_TOKEN,
                                                      MAX_INLINE_BYTES)
from nnscope.runtime.hal.shared_memory import MappingError, map_fd
from nnscope.runtime.hal.device_types import ExecutionResult, Request, RequestArgument

#: Most dimensions one request argument may list.
MAX_ARGUMENT_RANK = 32
#: Bytes of decoded argument sections one connection keeps for reuse (each at most ARGS_ENTRY_BYTES).
ARGS_CACHE_BYTES = 64 * 1024
ARGS_ENTRY_BYTES = 8 * 1024
#: Bytes of reusable inline pool buffers one connection keeps (each at most INLINE_ENTRY_BYTES).
INLINE_CACHE_BYTES = 192 * 1024
INLINE_ENTRY_BYTES = 16 * 1024
#: Bytes of execute memos (their inline buffers and argument sections) one connection keeps.
MEMO_BYTES = 256 * 1024
_MEMO_OVERHEAD = 512  # bytes charged per memo besides its buffers


class DecodedExecute(NamedTuple):
    model_id: int
    measure: bool
    deadline_ns: int | None
    request: Request
    inline_outputs: list  # output positions whose pool is inline
    tokens: tuple = ()  # (pool position, buffers.DeviceBuffer) of pools named by token


class DecodeState:
    """Driver-side memory of one connection: mapped pools by id, decoded argument sections,
    reusable buffers for inline pools and the last Request. Repeated executions with the same
    regions therefore get the *same* Request object, so a prepared model's per-request binding
    (validation, numpy views) is reused. Every cache is bounded by bytes (:data:`ARGS_CACHE_BYTES`,
    :data:`INLINE_CACHE_BYTES`, :data:`MEMO_BYTES`), so a connection keeps well under a MiB
    whatever it sends; a request too large to cache is decoded afresh and not kept."""

    def __init__(self) -> None:
        self.pools: dict = {}    # pool id -> MappedRegion
        self.args = ByteLru(ARGS_CACHE_BYTES)      # encoded argument section -> (inputs, outputs)
        self.inline = ByteLru(INLINE_CACHE_BYTES)  # (pool position, size) -> bytearray refilled per execution
        self.last: tuple = (None, (), None)  # (args, buffers, Request); only of a fully cached request
        self.memos = ByteLru(MEMO_BYTES)     # memo id -> ExecuteMemo

    def cached_bytes(self) -> int:
        """Bytes the caches account for (argument sections, inline buffers, memos)."""
        return self.args.bytes + self.inline.bytes + self.memos.bytes

    def close(self) -> None:
        self.memos.clear()
        self.args.clear()
        self.inline.clear()
        self.last = (None, (), None)
        for region in self.pools.values():
            region.close()
        self.pools.clear()


def decode_execute(r: Reader, state: DecodeState, fds: list) -> DecodedExecute:
    """Driver side: decode an execute, mapping new pools into ``state.pools``.

    Received ``fds`` are consumed in order by NEW_SHM entries; the caller closes them all.

    Raises:
        CodecError: malformed payload, unknown pool id, fd/region that cannot be mapped.
    """
    try:
        model_id, memo_id, measure, deadline, free = _HEAD_FREE.unpack_from(r.view, r.pos)
        r.pos += _HEAD_FREE.size
        if free:
            r.pos -= 4
            _free(r.u32s(), state.pools)
            state.memos.clear()  # their buffers may be unmapped
        loop_timeout = _read_loop_timeout(r) if measure & HAS_LOOP_TIMEOUT else None
        buffers, inline_pools, cached, tokens = _decode_pools(r, state, fds)
    except struct.error:
        raise CodecError(f"truncated execute payload at byte {r.pos}") from None
    args_size = len(r.view) - r.pos
    key = bytes(r.view[r.pos:]) if args_size <= ARGS_ENTRY_BYTES else None
    args = state.args.get(key) if key is not None else None
    if args is None:
        args = (_read_args(r), _read_args(r))
        r.end()
        cached = key is not None and state.args.put(key, args, args_size) and cached
    last_args, last_buffers, request = state.last
    if args is not last_args or len(buffers) != len(last_buffers) or \
            any(a is not b for a, b in zip(buffers, last_buffers)) or request.loop_timeout_ns != loop_timeout:
        request = Request(args[0], args[1], tuple(buffers), loop_timeout)
        # only a request whose parts are all cached can come again as the same object
        state.last = (args, buffers, request) if cached else (None, (), None)
    outputs = args[1]
    inline = [i for i, a in enumerate(outputs) if a.pool_index in inline_pools] if inline_pools else []
    if memo_id and not tokens:  # a repeat would bypass the buffers' checks
        memo = ExecuteMemo(model_id, request, [buffers[p] for p in sorted(inline_pools)], inline)
        state.memos.put(memo_id, memo, memo.inline_size + args_size + _MEMO_OVERHEAD)
    return DecodedExecute(model_id, bool(measure & 1), None if deadline < 0 else deadline, request, inline,
                          tokens)


def _read_loop_timeout(r: Reader) -> int:
    (value,) = _I64.unpack_from(r.view, r.pos)
    r.pos += _I64.size
    if value < 0:
        raise CodecError(f"negative loop timeout {value}")
    return value


class ExecuteMemo:
    """Driver side of one memo: the decoded Request of a full execute, its inline pool buffers
    (refilled by each repeat), the positions and regions of outputs in inline pools and the shapes
    of the last full answer (None: none yet, answer in full), and the prepared model's bound run
    of the request once an untimed run succeeded (outputs written in place, see ``bound_run``)."""

    __slots__ = ("model_id", "request", "inline", "inline_size", "outputs", "out_views", "shapes", "bound",
                 "bound_result", "fenced")

    def __init__(self, model_id: int, request: Request, inline: list, outputs: list) -> None:
        self.model_id = model_id
        self.request = request
        self.inline = [(buffer, len(buffer)) for buffer in inline]
        self.inline_size = sum(size for _, size in self.inline)
        self.outputs = outputs
        args, pools = request.outputs, request.pools
        self.out_views = [memoryview(pools[a.pool_index])[a.offset:a.offset + a.length]
                          for a in (args[i] for i in outputs)]
        self.shapes = None
        self.bound = None
        self.bound_result = None  # the result a successful bound run stands for
        self.fenced = False  # launched by an executeFenced that has not finished (service.fenced)

    def rerun(self, prepared, deadline_ns: int | None, logging: bool) -> ExecutionResult:
        """Run the request again, untimed: through the prepared model's bound run while it holds
        (no deadline, no ``cpuexe`` vlog), else through ``execute``, whose untimed success binds
        it. The driver's one repeat path (memo repeats and fenced steps)."""
        bound = self.bound
        if bound is not None and deadline_ns is None and not logging:
            if bound():
                return self.bound_result
            self.bound = None  # not valid any more: the ordinary path reports, and binds again
        result = prepared.execute(self.request, False, deadline_ns)
        if deadline_ns is None and not result.status and result.timing is None:
            self.bound, self.bound_result = prepared.bound_run(self.request, result), result
        return result

    def refill(self, view, pos: int) -> None:
        """Copy a repeat's inline pool bytes (``view[pos:]``, size already checked) in."""
        for buffer, size in self.inline:
            end = pos + size
            buffer[:] = view[pos:end]
            pos = end


def _free(pool_ids, pools: dict) -> None:
    for pool_id in pool_ids:
        region = pools.pop(pool_id, None)
        if region is not None:
            region.close()


def _decode_pools(r: Reader, state: DecodeState, fds: list) -> tuple[list, set, bool, tuple]:
    """(pool buffers, inline pool positions, whether every inline buffer is a cached one,
    (position, DeviceBuffer) of token pools)."""
    view, pools = r.view, state.pools
    (count,) = _U16.unpack_from(view, r.pos)
    pos = r.pos + 2
    buffers, inline_pools, next_fd, inline_bytes, cached, tokens = [], set(), 0, 0, True, ()
    for position in range(count):
        kind, value = _SHM.unpack_from(view, pos)  # kind + pool id (or inline length)
        pos += 5
        if kind == KIND_SHM:
            region = pools.get(value)
            if region is None:
                raise CodecError(f"pool {position} refers to an unknown pool id")
            buffers.append(region.view)
        elif kind == KIND_INLINE:
            if pos + value > len(view):
                raise CodecError(f"inline pool {position} of {value} bytes exceeds the payload")
            inline_bytes += value
            if inline_bytes > MAX_INLINE_BYTES:
                raise CodecError(f"inline pools carry more than {MAX_INLINE_BYTES} bytes; "
                                 f"send larger buffers as shared memory")
            buffer, fresh = _inline_buffer(state.inline, position, value)
            cached = cached and not fresh
            buffer[:] = view[pos:pos + value]
            buffers.append(buffer)
            inline_pools.add(position)
            pos += value
        elif kind == KIND_NEW_SHM:
            r.pos = pos - 4
            buffers.append(_map_new(r, pools, fds[next_fd] if next_fd < len(fds) else None, position,
                                   state.memos))
            next_fd += 1
            pos = r.pos
        elif kind == KIND_TOKEN:  # the buffer's owner is the connection's client
            buffer = ibuffers.lookup(value, getattr(pools, "client", None))
            buffers.append(buffer.data)
            tokens += ((position, buffer),)
        else:
            raise CodecError(f"pool {position} has unknown kind {kind}")
    if next_fd != len(fds):
        raise CodecError(f"{len(fds)} file descriptors for {next_fd} new pools")
    r.pos = pos
    return buffers, inline_pools, cached, tokens


def _inline_buffer(cache: ByteLru, position: int, size: int) -> tuple[bytearray, bool]:
    """(buffer for an inline pool, True when it is not one the cache held already)."""
    buffer = cache.get((position, size))
    if buffer is not None:
        return buffer, False
    buffer = bytearray(size)
    if size <= INLINE_ENTRY_BYTES and cache.put((position, size), buffer, size):
        return buffer, False  # cached from now on: a repeat gets this very buffer
    return buffer, True


def _map_new(r: Reader, pools: dict, fd: int | None, position: int, memos: dict):
    pool_id, offset, size = r.take(_NEW)
    if fd is None:
        raise CodecError(f"pool {position} announces an fd that was not sent")
    try:
        region = map_fd(fd, offset, size)
    except MappingError as error:
        raise CodecError(f"pool {position}: {error}") from None
    old = pools.pop(pool_id, None)
    if old is not None:
        memos.clear()  # they may reference the old mapping
        old.close()
    pools[pool_id] = region
    return region.view


def _read_args(r: Reader) -> tuple[RequestArgument, ...]:
    args = []
    for position in range(r.u16()):
        no_value, pool, offset, length = r.take(_ARG)
        rank = r.count(4)
        if rank > MAX_ARGUMENT_RANK:
            raise CodecError(f"argument {position} lists {rank} dimensions, "
                             f"at most {MAX_ARGUMENT_RANK} are allowed")
        dims = struct.unpack_from(f"<{rank}I", r.view, r.pos)
        r.pos += 4 * rank
        args.append(RequestArgument(bool(no_value), pool, offset, length, dims))
    return tuple(args)
