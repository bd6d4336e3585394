"""AOSP's ``FmqRequestDatum`` / ``FmqResultDatum`` sequences as fixed-size packed records.

A burst request or result travels through an :class:`~runtime.drivers.ipc.wire.fmq.FmqChannel` as
one message: a sequence of 20-byte datums, each ``<B tag, B flag, 2 pad, 16 payload bytes>``,
in the order AOSP's ``ExecutionBurstUtils`` serializes them (HAL 1.2 ``types.hal``):

request: ``PACKET(size, inputs, outputs, pools)``, per input ``INPUT(has_no_value; pool index,
offset, length, rank)`` + ``rank`` x ``INPUT_DIM``, the same for outputs, ``pools`` x
``POOL(slot)``, ``MEASURE(flag)``;
result: ``PACKET(size, status, operands)``, per output ``OPERAND(is_sufficient; rank)`` +
``rank`` x ``DIM``, ``TIMING(on device, in driver)``. Not AOSP's: an echo request (``ECHO``
then zero datums) that the listener writes back unchanged, to time the channel alone, and two
optional ``TRACE`` datums before a request's PACKET: the trace context of the runtime's span
(:func:`encode_trace`, :func:`split_trace`).

No pickle: the decoders only unpack integers. They check every field against the bytes received
(whole datums, the declared packet size, counts against the datums left, tags in order, ranks,
pool indexes below the pool count, non-negative unique slots, regions inside u32, zero padding,
known status, consistent timing) and raise :class:`CodecError` for anything else, so a malformed
message is a failed request, never a read outside it.

Example:
    >>> request = BurstRequest((RequestArgument(False, 0, 0, 16, (1, 4)),),
    ...                        (RequestArgument(False, 1, 0, 16, (1, 4)),), (3, 7), True)
    >>> decode_request(encode_request(request)) == request
    True
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from nnscope.runtime.drivers.ipc.wire.codec import CodecError, enum_value
from nnscope.runtime.hal.device_types import ExecutionResult, OutputShape, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.timing import Timing
from nnscope.tracing import propagation

DATUM = struct.Struct("<BBHIIII")  # tag, flag, padding (zero), four fields
_TIMING = struct.Struct("<BBHQQ")
DATUM_SIZE = DATUM.size
MAX_RANK = 32  # as the driver's prepare-time limit (runtime.drivers.ipc.service._guard.MAX_RANK)
MAX_DATUMS = 1 << 20
_U32_MAX = (1 << 32) - 1
_I32_MAX = (1 << 31) - 1


class RequestTag(enum.IntEnum):
    PACKET = 0
    INPUT = 1
    INPUT_DIM = 2
    OUTPUT = 3
    OUTPUT_DIM = 4
    POOL = 5
    MEASURE = 6


class ResultTag(enum.IntEnum):
    PACKET = 0
    OPERAND = 1
    DIM = 2
    TIMING = 3


class CallbackTag(enum.IntEnum):
    """``IBurstCallback.getMemories(slots)`` asked on the result channel: a driver that lacks
    the pools of some slots asks for them before it answers the request."""

    GET_MEMORIES = 0x10
    SLOT = 0x11


#: Not AOSP's: a request whose first datum is this (tag 0x20 and a 16-byte magic, which no
#: request or bit flip of one can form) is an echo: the listener writes it back unchanged. Its
#: round trip is the floor of a burst execution, timed on the burst's own rings and thread.
ECHO_TAG = 0x20
ECHO = DATUM.pack(ECHO_TAG, 0, 0, *struct.unpack("<IIII", b"nnscope:echo\x00\x00\x00\x01"))
#: Longest echo message, in datums.
MAX_ECHO_DATUMS = 64


#: Not AOSP's: a request may start with two datums holding the trace context of the runtime's
#: executeBurst span (``tracing.propagation``): TRACE_ID (flag: context version; the trace id)
#: then TRACE_SPAN (flag: trace flags; the 8-byte span id, then 8 zero bytes).
TRACE_ID_TAG, TRACE_SPAN_TAG = 0x30, 0x31
_TRACE = struct.Struct("<BBH16sBBH8s8s")
TRACE_SIZE = _TRACE.size
_CONTEXT = struct.Struct("<B16s8sB")
_ZERO8, _ZERO16 = bytes(8), bytes(16)


@dataclass(frozen=True, slots=True)
class BurstRequest:
    """One burst execution: operand regions refer to ``slots`` by position (pool index)."""

    inputs: tuple[RequestArgument, ...]
    outputs: tuple[RequestArgument, ...]
    slots: tuple[int, ...]
    measure_timing: bool = False


# -- encoding ----------------------------------------------------------------------------

def encode_request(request: BurstRequest) -> bytes:
    """Serialize ``request`` (raises CodecError when it breaks a rule the decoder checks)."""
    body = [*_arguments(request.inputs, RequestTag.INPUT, RequestTag.INPUT_DIM),
            *_arguments(request.outputs, RequestTag.OUTPUT, RequestTag.OUTPUT_DIM),
            *(DATUM.pack(RequestTag.POOL, 0, 0, _u32(slot, _I32_MAX), 0, 0, 0) for slot in request.slots),
            DATUM.pack(RequestTag.MEASURE, int(bool(request.measure_timing)), 0, 0, 0, 0, 0)]
    packet = DATUM.pack(RequestTag.PACKET, 0, 0, len(body) + 1, len(request.inputs),
                        len(request.outputs), len(request.slots))
    data = packet + b"".join(body)
    decode_request(data)  # the encoder never emits what the reader would refuse
    return data


def _arguments(arguments, info_tag, dim_tag):
    for argument in arguments:
        yield DATUM.pack(info_tag, int(argument.has_no_value), 0, _u32(argument.pool_index),
                         _u32(argument.offset), _u32(argument.length), len(argument.dimensions))
        yield from (DATUM.pack(dim_tag, 0, 0, _u32(dim), 0, 0, 0) for dim in argument.dimensions)


def encode_result(result: ExecutionResult) -> bytes:
    """Serialize a burst execution's status, output shapes and timing (None: unknown; both
    durations unknown decode as None)."""
    timing = result.timing if result.timing is not None else Timing()
    body = []
    for shape in result.output_shapes:
        rank = len(shape.dimensions)
        body.append(DATUM.pack(ResultTag.OPERAND, int(shape.is_sufficient), 0, rank, 0, 0, 0))
        body.extend(DATUM.pack(ResultTag.DIM, 0, 0, _u32(dim), 0, 0, 0) for dim in shape.dimensions)
    body.append(_TIMING.pack(ResultTag.TIMING, 0, 0, timing.time_on_device, timing.time_in_driver))
    packet = DATUM.pack(ResultTag.PACKET, 0, 0, len(body) + 1, int(result.status),
                        len(result.output_shapes), 0)
    data = packet + b"".join(body)
    decode_result(data)
    return data


def _u32(value: int, limit: int = _U32_MAX) -> int:
    if not 0 <= value <= limit:
        raise CodecError(f"{value} does not fit the datum field [0, {limit}]")
    return value


# -- decoding ----------------------------------------------------------------------------

class _Datums:
    """Walks a message datum by datum; every read is checked against the datums present."""

    def __init__(self, data, tags) -> None:
        self.view = memoryview(data).cast("B")
        if len(self.view) % DATUM_SIZE or not self.view:
            raise CodecError(f"{len(self.view)} bytes is not a whole number of {DATUM_SIZE}-byte datums")
        self.count = len(self.view) // DATUM_SIZE
        if self.count > MAX_DATUMS:
            raise CodecError(f"{self.count} datums exceed {MAX_DATUMS}")
        self.tags, self.index = tags, 0

    def left(self) -> int:
        return self.count - self.index

    def take(self, tag, layout: struct.Struct = DATUM) -> tuple:
        if self.index >= self.count:
            raise CodecError(f"sequence ends before datum {self.index} ({tag.name})")
        found, flag, padding, *fields = layout.unpack_from(self.view, self.index * DATUM_SIZE)
        if found != tag:
            raise CodecError(f"datum {self.index}: tag {found} where {tag.name} belongs")
        _zero(padding, f"datum {self.index} padding")
        self.index += 1
        return (flag, *fields)

    def counted(self, n: int, what: str) -> int:
        if n > self.left():
            raise CodecError(f"{n} {what} declared, {self.left()} datums left")
        return n

    def end(self) -> None:
        if self.index != self.count:
            raise CodecError(f"{self.count - self.index} datums after the end of the packet")


def decode_request(data) -> BurstRequest:
    """Parse and validate a request message. Raises CodecError for malformed data."""
    datums = _Datums(data, RequestTag)
    flag, size, n_inputs, n_outputs, n_pools = datums.take(RequestTag.PACKET)
    _zero(flag, "packet flag")
    if size != datums.count:
        raise CodecError(f"packet size {size}, {datums.count} datums received")
    inputs = _read_arguments(datums, datums.counted(n_inputs, "inputs"), n_pools,
                             RequestTag.INPUT, RequestTag.INPUT_DIM)
    outputs = _read_arguments(datums, datums.counted(n_outputs, "outputs"), n_pools,
                              RequestTag.OUTPUT, RequestTag.OUTPUT_DIM)
    slots = tuple(_read_slot(datums) for _ in range(datums.counted(n_pools, "pools")))
    if len(set(slots)) != len(slots):
        raise CodecError("a memory slot appears twice in one request")
    measure, *rest = datums.take(RequestTag.MEASURE)
    if measure > 1:
        raise CodecError(f"measure timing flag {measure}")
    _zero(max(rest), "measure datum")
    datums.end()
    return BurstRequest(inputs, outputs, slots, bool(measure))


def _read_arguments(datums: _Datums, count: int, n_pools: int, info_tag, dim_tag) -> tuple:
    arguments = []
    for position in range(count):
        no_value, pool, offset, length, rank = datums.take(info_tag)
        where = f"{info_tag.name.lower()} {position}"
        if no_value > 1:
            raise CodecError(f"{where}: has_no_value flag {no_value}")
        if no_value:
            _zero(pool | offset | length, f"{where} location (no value)")
        elif pool >= n_pools:
            raise CodecError(f"{where}: pool index {pool} with {n_pools} pools")
        if offset + length > _U32_MAX:
            raise CodecError(f"{where}: region [{offset}, {offset + length}) overflows u32")
        if rank > MAX_RANK:
            raise CodecError(f"{where}: rank {rank} exceeds {MAX_RANK}")
        dims = tuple(_read_dim(datums, dim_tag) for _ in range(datums.counted(rank, "dimensions")))
        arguments.append(RequestArgument(bool(no_value), pool, offset, length, dims))
    return tuple(arguments)


def _read_dim(datums: _Datums, tag) -> int:
    flag, value, *rest = datums.take(tag)
    _zero(flag | max(rest), f"{tag.name} datum")
    return value


def _read_slot(datums: _Datums) -> int:
    flag, slot, *rest = datums.take(RequestTag.POOL)
    _zero(flag | max(rest), "pool datum")
    if slot > _I32_MAX:
        raise CodecError(f"memory slot {slot - (1 << 32)} is negative")
    return slot


def decode_result(data) -> ExecutionResult:
    """Parse and validate a result message. Raises CodecError for malformed data."""
    datums = _Datums(data, ResultTag)
    flag, size, status, n_operands, spare = datums.take(ResultTag.PACKET)
    _zero(flag | spare, "packet datum")
    if size != datums.count:
        raise CodecError(f"packet size {size}, {datums.count} datums received")
    status = enum_value(ErrorStatus, status)
    shapes = []
    for position in range(datums.counted(n_operands, "output shapes")):
        sufficient, rank, *rest = datums.take(ResultTag.OPERAND)
        if sufficient > 1 or rank > MAX_RANK:
            raise CodecError(f"output shape {position}: flag {sufficient}, rank {rank}")
        _zero(max(rest), "operand datum")
        dims = tuple(_read_dim(datums, ResultTag.DIM) for _ in range(datums.counted(rank, "dimensions")))
        shapes.append(OutputShape(dims, bool(sufficient)))
    flag, on_device, in_driver = datums.take(ResultTag.TIMING, _TIMING)
    _zero(flag, "timing flag")
    datums.end()
    try:
        timing = Timing(on_device, in_driver)
    except ValueError as error:
        raise CodecError(f"timing: {error}") from None
    return ExecutionResult(status, tuple(shapes), timing if timing != Timing() else None)


def encode_trace(context: bytes) -> bytes:
    """The two trace datums of a 26-byte binary context (prefixed to a request)."""
    version, trace_id, span_id, flags = _CONTEXT.unpack(context)
    return _TRACE.pack(TRACE_ID_TAG, version, 0, trace_id, TRACE_SPAN_TAG, flags, 0, span_id,
                       bytes(8))


def split_trace(data) -> tuple[bytes | None, object]:
    """``(context, request)``: the checked trace context a message starts with (None when it
    has none) and the request datums after it. Raises CodecError for malformed trace datums."""
    if not len(data) or data[0] != TRACE_ID_TAG:
        return None, data
    if len(data) < TRACE_SIZE:
        raise CodecError("trace datums cut short")
    _, version, pad, trace_id, tag, flags, pad2, span_id, spare = _TRACE.unpack_from(data)
    if tag != TRACE_SPAN_TAG or pad or pad2 or spare != _ZERO8 or version != propagation.VERSION \
            or flags & ~propagation.SAMPLED or trace_id == _ZERO16 or span_id == _ZERO8:
        raise CodecError("malformed trace datums")
    return _CONTEXT.pack(version, trace_id, span_id, flags), data[TRACE_SIZE:]


def encode_echo(datums: int) -> bytes:
    """An echo message of ``datums`` datums (1..MAX_ECHO_DATUMS): ECHO, then zero datums."""
    if not 1 <= datums <= MAX_ECHO_DATUMS:
        raise CodecError(f"an echo has 1 to {MAX_ECHO_DATUMS} datums, not {datums}")
    return ECHO + bytes(DATUM_SIZE * (datums - 1))


def max_request_bytes(model, max_slots: int) -> int:
    """The longest legal request for HAL ``model`` (every argument at :data:`MAX_RANK`, up to
    ``max_slots`` pools) or echo, with its trace context; without a model, the decoder's own
    bound :data:`MAX_DATUMS`."""
    if model is None:
        return DATUM_SIZE * MAX_DATUMS
    arguments = len(model.main.input_indexes) + len(model.main.output_indexes)
    return TRACE_SIZE + DATUM_SIZE * max(2 + arguments * (1 + MAX_RANK) + max_slots, MAX_ECHO_DATUMS)


def is_echo(data: bytes) -> bool:
    """Whether ``data`` is a well-formed echo message (see :data:`ECHO`)."""
    return data.startswith(ECHO) and len(data) % DATUM_SIZE == 0 and len(data) <= DATUM_SIZE * MAX_ECHO_DATUMS


def encode_memory_request(slots) -> bytes:
    """The driver's ``getMemories(slots)`` callback message (slots: distinct, non-negative)."""
    body = [DATUM.pack(CallbackTag.SLOT, 0, 0, _u32(slot, _I32_MAX), 0, 0, 0) for slot in slots]
    return DATUM.pack(CallbackTag.GET_MEMORIES, 0, 0, len(body), 0, 0, 0) + b"".join(body)


def decode_memory_request(data) -> tuple[int, ...] | None:
    """The slots of a ``getMemories`` message; None when ``data`` is not one (a result).
    Raises CodecError for a malformed one."""
    if len(data) < DATUM_SIZE or data[0] != CallbackTag.GET_MEMORIES:
        return None
    datums = _Datums(data, CallbackTag)
    flag, count, *rest = datums.take(CallbackTag.GET_MEMORIES)
    _zero(flag | max(rest), "getMemories datum")
    slots = []
    for _ in range(datums.counted(count, "slots")):
        flag, slot, *rest = datums.take(CallbackTag.SLOT)
        _zero(flag | max(rest), "slot datum")
        slots.append(slot)
    datums.end()
    if not slots or len(set(slots)) != len(slots) or max(slots) > _I32_MAX:
        raise CodecError(f"getMemories asks for slots {slots[:8]}")
    return tuple(slots)


def _zero(value: int, what: str) -> None:
    if value:
        raise CodecError(f"{what} has non-zero unused bits")
