"""Execute messages on the wire: the request (model id, pool references, argument regions) and
its result. The runtime side encodes with ``runtime.drivers.ipc.client.encoder``; this module holds the
format, the driver-side decoding (:func:`decode_execute`, with a per-connection
:class:`DecodeState`) and the result codec used by both sides.

Payload: ``model u32 | memo u32 | measure u8 | deadline i64 | free u32s | [loop timeout i64] |
pools | inputs | outputs`` where ``memo`` (0: none) names the decoded request for repeats (see
below), bit :data:`HAS_LOOP_TIMEOUT` of ``measure`` says a loop timeout (ns, the request's
``loop_timeout_ns``) follows the free list, and
each pool is ``kind u8`` + ``id u32`` (SHM), ``id u32, offset u64, size u64`` (NEW_SHM, fd
attached), ``size u32 + bytes`` (INLINE) or ``token u32`` (TOKEN: a driver-side IBuffer of a
memory domain, see ``buffers``; such a request is never memoized), and each argument is ``no_value u8, pool u16,
offset u32, length u32, dims u32s``. The result is ``status u32 | timed u8 | on_device u64 |
in_driver u64 | shape count u16 | shapes length u32 | shapes | inline outputs``.

Repeats (``EXECUTE_SYNC_MEMO``): once a full execute with a memo id has decoded, the driver keeps
its Request, inline buffers and inline output regions under that id (per connection, dropped when
any pool is freed or replaced, least recently used first beyond :data:`MEMO_BYTES`). A repeat is ``model u32 | memo u32 | measure u8 | deadline i64 |
inline pool bytes`` (the memo's inline pools in order, exact sizes checked), answered by
``status u32 | form u8`` + for :data:`FORM_COMPACT` the inline output regions in order (status
NONE, untimed, output shapes as in the last full answer to this memo; only when bit 1 of
``measure`` says the client holds those shapes), for :data:`FORM_FULL` a full
result, and :data:`FORM_UNKNOWN` when the driver no longer has the memo (resend in full).

Example:
    >>> from runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
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

from runtime.drivers.ipc.service import buffers as ibuffers
from runtime.drivers.ipc.service._bytelru import ByteLru
from runtime.drivers.ipc.wire.codec import CodecError, Reader, Writer
from runtime.drivers.ipc.wire.shm import MappingError, map_fd
from runtime.hal.device_types import ExecutionResult, OutputShape, Request, RequestArgument
from runtime.hal.types import ErrorStatus

KIND_SHM, KIND_NEW_SHM, KIND_INLINE, KIND_TOKEN = 0, 1, 2, 3
_HEAD = struct.Struct("<IIBq")
_HEAD_FREE = struct.Struct("<IIBqI")
_MEMO_HEAD = struct.Struct("<IIBq")  # model, memo, measure, deadline of a repeat
FORM_COMPACT, FORM_FULL, FORM_UNKNOWN = 0, 1, 2
KNOWS_SHAPES = 2  # repeat's measure flag: the client holds the shapes of the last full answer
HAS_LOOP_TIMEOUT = 4  # full execute's measure flag: a loop timeout i64 follows the free list
_I64 = struct.Struct("<q")
#: Inline pool bytes one execute may carry in all (larger buffers travel as shared memory; the
#: runtime's encoder stages any pool beyond this total); more is INVALID_ARGUMENT.
MAX_INLINE_BYTES = 128 * 1024
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
_ARG = struct.Struct("<BHII")
_NEW = struct.Struct("<IQQ")
_NEW_KIND = struct.Struct("<BIQQ")
_SHM = struct.Struct("<BI")
_INLINE = struct.Struct("<BI")
_U16 = struct.Struct("<H")
_RESULT = struct.Struct("<IBQQHI")
_INLINE_OUT = struct.Struct("<HI")
_NO_TIMING = 2**64 - 1


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


def loop_timeout_bytes(request: Request) -> bytes:
    """The optional loop timeout section of ``request`` (empty when it has none)."""
    value = request.loop_timeout_ns
    return b"" if value is None else _I64.pack(value)


class ExecuteMemo:
    """Driver side of one memo: the decoded Request of a full execute, its inline pool buffers
    (refilled by each repeat), the positions and regions of outputs in inline pools and the shapes
    of the last full answer (None: none yet, answer in full)."""

    __slots__ = ("model_id", "request", "inline", "inline_size", "outputs", "out_views", "shapes")

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
    pool_id, offset, size = r._take(_NEW)
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
        no_value, pool, offset, length = r._take(_ARG)
        rank = r.count(4)
        if rank > MAX_ARGUMENT_RANK:
            raise CodecError(f"argument {position} lists {rank} dimensions, "
                             f"at most {MAX_ARGUMENT_RANK} are allowed")
        dims = struct.unpack_from(f"<{rank}I", r.view, r.pos)
        r.pos += 4 * rank
        args.append(RequestArgument(bool(no_value), pool, offset, length, dims))
    return tuple(args)


def encode_result(result: ExecutionResult, request: Request | None, inline: list) -> bytes:
    """Status, timing, output shapes (length-prefixed), then the bytes of outputs in inline pools."""
    shapes = _encode_shapes(result.output_shapes)
    t = result.timing
    parts = [_RESULT.pack(result.status, t is not None,
                          t.time_on_device if t is not None else _NO_TIMING,
                          t.time_in_driver if t is not None else _NO_TIMING, len(result.output_shapes),
                          len(shapes)), shapes]
    if result.status == ErrorStatus.NONE and request is not None and inline:
        parts.append(_U16.pack(len(inline)))
        for position in inline:
            arg = request.outputs[position]
            parts.append(_INLINE_OUT.pack(position, arg.length))
            parts.append(request.pools[arg.pool_index][arg.offset:arg.offset + arg.length])
    else:
        parts.append(b"\0\0")
    return b"".join(parts)


_LAST_SHAPES: list = [None, b""]  # identity memo: drivers reuse OutputShape tuples


def _encode_shapes(shapes) -> bytes:
    if shapes is _LAST_SHAPES[0] or shapes == _LAST_SHAPES[0]:
        return _LAST_SHAPES[1]
    w = Writer()
    for shape in shapes:
        w.u8(shape.is_sufficient)
        w.u32s(shape.dimensions)
    _LAST_SHAPES[:] = [shapes, w.getvalue()]
    return _LAST_SHAPES[1]


_SHAPES_MEMO: dict = {}


_LAST_OK: list = [None, None]  # (shapes, ExecutionResult) reused for untimed successes


def decode_result(r: Reader) -> tuple[ExecutionResult, list]:
    """Returns the result and ``[(output position, bytes)]`` for inline outputs (memoryview
    slices of the payload: use them before the next receive)."""
    view = r.view
    try:
        status, has_timing, on_device, in_driver, count, length = _RESULT.unpack_from(view, r.pos)
        pos = r.pos + _RESULT.size
        shapes = _decode_shapes(bytes(view[pos:pos + length]), count)
        pos += length
        (n_inline,) = _U16.unpack_from(view, pos)
        pos += 2
        outputs = []
        for _ in range(n_inline):
            position, size = _INLINE_OUT.unpack_from(view, pos)
            pos += 6
            if pos + size > len(view):
                raise CodecError("inline output exceeds the payload")
            outputs.append((position, view[pos:pos + size]))
            pos += size
    except struct.error:
        raise CodecError("truncated execution result") from None
    r.pos = pos
    if has_timing:
        from timing import Timing  # noqa: PLC0415 - only when measured
        return ExecutionResult(_status(status), shapes, Timing(on_device, in_driver)), outputs
    if status == 0:
        if _LAST_OK[0] is not shapes:
            _LAST_OK[:] = [shapes, ExecutionResult(ErrorStatus.NONE, shapes, None)]
        return _LAST_OK[1], outputs
    return ExecutionResult(_status(status), shapes, None), outputs


def _decode_shapes(key: bytes, count: int) -> tuple:
    shapes = _SHAPES_MEMO.get(key)
    if shapes is None:
        sub = Reader(key)
        shapes = tuple(_shape(sub) for _ in range(count))
        sub.end()
        if len(_SHAPES_MEMO) < 256 and len(key) <= 1024:  # bounded by entries and their size
            _SHAPES_MEMO[key] = shapes
    return shapes


def _shape(r: Reader) -> OutputShape:
    sufficient = bool(r.u8())
    return OutputShape(r.u32s(), sufficient)


_STATUSES = {status.value: status for status in ErrorStatus}


def _status(value: int) -> ErrorStatus:
    return _STATUSES.get(value, ErrorStatus.GENERAL_FAILURE)
