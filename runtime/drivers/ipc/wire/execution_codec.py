"""Execute messages on the wire: the request (model id, pool references, argument regions) and
its result. The runtime side encodes with ``runtime.drivers.ipc.client.encoder``, the driver
decodes with ``runtime.drivers.ipc.service.execute``; this module holds the format
and the result codec used by both sides.

Payload: ``model u32 | memo u32 | measure u8 | deadline i64 | free u32s | [loop timeout i64] |
pools | inputs | outputs`` where ``memo`` (0: none) names the decoded request for repeats (see
below), bit :data:`HAS_LOOP_TIMEOUT` of ``measure`` says a loop timeout (ns, the request's
``loop_timeout_ns``) follows the free list, and
each pool is ``kind u8`` + ``id u32`` (SHM), ``id u32, offset u64, size u64`` (NEW_SHM, fd
attached), ``size u32 + bytes`` (INLINE) or ``token u32`` (TOKEN: a driver-side IBuffer of a
memory domain, see ``service.buffers``; such a request is never memoized), and each argument is ``no_value u8, pool u16,
offset u32, length u32, dims u32s``. The result is ``status u32 | timed u8 | on_device u64 |
in_driver u64 | shape count u16 | shapes length u32 | shapes | inline outputs``.

Repeats (``EXECUTE_SYNC_MEMO``): once a full execute with a memo id has decoded, the driver keeps
its Request, inline buffers and inline output regions under that id (per connection, dropped when
any pool is freed or replaced, least recently used first beyond
``service.execute.MEMO_BYTES``). A repeat is ``model u32 | memo u32 | measure u8 |
deadline i64 | inline pool bytes`` (the memo's inline pools in order, exact sizes checked), answered by
``status u32 | form u8`` + for :data:`FORM_COMPACT` the inline output regions in order (status
NONE, untimed, output shapes as in the last full answer to this memo; only when bit 1 of
``measure`` says the client holds those shapes), for :data:`FORM_FULL` a full
result, and :data:`FORM_UNKNOWN` when the driver no longer has the memo (resend in full).

Example:
    >>> result = ExecutionResult(ErrorStatus.NONE, (OutputShape((2,), True),))
    >>> decoded, inline = decode_result(Reader(encode_result(result, None, [])))
    >>> decoded.status.name, decoded.output_shapes[0].dimensions, inline
    ('NONE', (2,), [])
"""
from __future__ import annotations

import struct

from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader, Writer
from nnscope.runtime.drivers.ipc.wire.status import status_of
from nnscope.runtime.hal.device_types import ExecutionResult, OutputShape, Request
from nnscope.runtime.hal.types import ErrorStatus

KIND_SHM, KIND_NEW_SHM, KIND_INLINE, KIND_TOKEN = 0, 1, 2, 3
HEAD = struct.Struct("<IIBq")
HEAD_FREE = struct.Struct("<IIBqI")
MEMO_HEAD = struct.Struct("<IIBq")  # model, memo, measure, deadline of a repeat
FORM_COMPACT, FORM_FULL, FORM_UNKNOWN = 0, 1, 2
KNOWS_SHAPES = 2  # repeat's measure flag: the client holds the shapes of the last full answer
HAS_LOOP_TIMEOUT = 4  # full execute's measure flag: a loop timeout i64 follows the free list
I64 = struct.Struct("<q")
#: Inline pool bytes one execute may carry in all (larger buffers travel as shared memory; the
#: runtime's encoder stages any pool beyond this total); more is INVALID_ARGUMENT.
MAX_INLINE_BYTES = 128 * 1024
ARG = struct.Struct("<BHII")
NEW = struct.Struct("<IQQ")
NEW_KIND = struct.Struct("<BIQQ")
SHM = struct.Struct("<BI")
INLINE = struct.Struct("<BI")
U16 = struct.Struct("<H")
_RESULT = struct.Struct("<IBQQHI")
_INLINE_OUT = struct.Struct("<HI")
_NO_TIMING = 2**64 - 1


def loop_timeout_bytes(request: Request) -> bytes:
    """The optional loop timeout section of ``request`` (empty when it has none)."""
    value = request.loop_timeout_ns
    return b"" if value is None else I64.pack(value)


def encode_result(result: ExecutionResult, request: Request | None, inline: list) -> bytes:
    """Status, timing, output shapes (length-prefixed), then the bytes of outputs in inline pools."""
    shapes = _encode_shapes(result.output_shapes)
    t = result.timing
    parts = [_RESULT.pack(result.status, t is not None,
                          t.time_on_device if t is not None else _NO_TIMING,
                          t.time_in_driver if t is not None else _NO_TIMING, len(result.output_shapes),
                          len(shapes)), shapes]
    if result.status == ErrorStatus.NONE and request is not None and inline:
        parts.append(U16.pack(len(inline)))
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
        (n_inline,) = U16.unpack_from(view, pos)
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
        from nnscope.timing import Timing  # noqa: PLC0415 - only when measured
        return ExecutionResult(status_of(status), shapes, Timing(on_device, in_driver)), outputs
    if status == 0:
        if _LAST_OK[0] is not shapes:
            _LAST_OK[:] = [shapes, ExecutionResult(ErrorStatus.NONE, shapes, None)]
        return _LAST_OK[1], outputs
    return ExecutionResult(status_of(status), shapes, None), outputs


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
