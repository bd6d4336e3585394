"""Compact, explicit, versioned binary codec for the HAL records that cross the socket.

:class:`Writer` and :class:`Reader` pack little-endian fixed-width fields; the HAL encoders
(:func:`encode_model`, :func:`encode_capabilities`, :func:`encode_timing`, ...) write one
structure each, led by :data:`CODEC_VERSION` where a structure is versioned. No pickle, no eval:
decoding only reads numbers and bytes and builds the frozen dataclasses, and every count and
length is checked against what is left so a hostile payload cannot allocate or read past the end.
Operand *values* never go through here when large: ``encode_model`` takes the operand-value blob
separately (the caller sends it inline or as a shared pool).

Example:
    >>> caps = Capabilities(operand_performance=((OperandType.TENSOR_FLOAT32, PerformanceInfo(0.8, 1.2)),))
    >>> decode_capabilities(Reader(encode_capabilities(caps))) == caps
    True
"""
from __future__ import annotations

import dataclasses
import struct

from nnscope.runtime.hal.device_types import Capabilities, PerformanceInfo
from nnscope.runtime.hal.extensions import (OPERAND, OPERATION, Extension, ExtensionOperandTypeInformation,
                                    is_extension, named, prefix_map_problem)
from nnscope.runtime.hal.types import (ChannelQuant, DataLocation, HalModel, Operand, OperandLifetime,
                               OperandType, Operation, OperationType, Subgraph)

CODEC_VERSION = 1
_LIMIT = 1 << 24  # most elements any one list may declare


class CodecError(ValueError):
    """A payload that does not decode (reported as INVALID_ARGUMENT)."""


_U8, _U16, _U32, _I32 = struct.Struct("<B"), struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<i")
_U64, _I64, _F64 = struct.Struct("<Q"), struct.Struct("<q"), struct.Struct("<d")
_PERF = struct.Struct("<dd")


class Writer:
    """Accumulates packed fields; :meth:`getvalue` returns the bytes."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list = []

    def u8(self, v: int) -> None: self.parts.append(_U8.pack(v))
    def u16(self, v: int) -> None: self.parts.append(_U16.pack(v))
    def u32(self, v: int) -> None: self.parts.append(_U32.pack(v))
    def i32(self, v: int) -> None: self.parts.append(_I32.pack(v))
    def u64(self, v: int) -> None: self.parts.append(_U64.pack(v))
    def i64(self, v: int) -> None: self.parts.append(_I64.pack(v))
    def f64(self, v: float) -> None: self.parts.append(_F64.pack(v))

    def blob(self, data) -> None:
        self.parts.append(_U32.pack(len(data)))
        self.parts.append(bytes(data))

    def text(self, value: str) -> None:
        self.blob(value.encode("utf-8"))

    def u32s(self, values) -> None:
        self.parts.append(struct.pack(f"<I{len(values)}I", len(values), *values))

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


class Reader:
    """Reads packed fields from a buffer; every read is bounds-checked (raises CodecError)."""

    __slots__ = ("view", "pos")

    def __init__(self, data, pos: int = 0) -> None:
        self.view = memoryview(data)
        self.pos = pos

    def take(self, fmt: struct.Struct):
        """The fields of ``fmt`` at the read position (a fixed-size record), then past them."""
        try:
            value = fmt.unpack_from(self.view, self.pos)
        except struct.error:
            raise CodecError(f"truncated payload at byte {self.pos}") from None
        self.pos += fmt.size
        return value

    def u8(self) -> int: return self.take(_U8)[0]
    def u16(self) -> int: return self.take(_U16)[0]
    def u32(self) -> int: return self.take(_U32)[0]
    def i32(self) -> int: return self.take(_I32)[0]
    def u64(self) -> int: return self.take(_U64)[0]
    def i64(self) -> int: return self.take(_I64)[0]
    def f64(self) -> float: return self.take(_F64)[0]

    def count(self, item_size: int = 1) -> int:
        """A u32 element count, checked against the bytes left."""
        n = self.u32()
        if n > _LIMIT or n * item_size > len(self.view) - self.pos:
            raise CodecError(f"count {n} at byte {self.pos - 4} exceeds the payload")
        return n

    def blob(self) -> bytes:
        n = self.count()
        data = bytes(self.view[self.pos:self.pos + n])
        self.pos += n
        return data

    def text(self) -> str:
        try:
            return self.blob().decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError("text field is not UTF-8") from None

    def u32s(self) -> tuple[int, ...]:
        n = self.count(4)
        values = struct.unpack_from(f"<{n}I", self.view, self.pos)
        self.pos += 4 * n
        return values

    def end(self) -> None:
        if self.pos != len(self.view):
            raise CodecError(f"{len(self.view) - self.pos} unexpected trailing bytes")


_MEMBERS: dict = {}  # enum class -> {value: member}: a dict lookup per decoded field


def enum_value(kind, value: int):
    members = _MEMBERS.get(kind)
    if members is None:
        members = _MEMBERS[kind] = {member.value: member for member in kind}
    member = members.get(value)
    if member is None:
        raise CodecError(f"{value} is not a valid {kind.__name__}")
    return member


def check_version(r: Reader, what: str) -> None:
    version = r.u8()
    if version != CODEC_VERSION:
        raise CodecError(f"{what} codec version {version}, expected {CODEC_VERSION}")


# ---------------------------------------------------------------- capabilities
def _perf(w: Writer, info: PerformanceInfo) -> None:
    w.parts.append(_PERF.pack(info.exec_time, info.power_usage))


def _read_perf(r: Reader) -> PerformanceInfo:
    return PerformanceInfo(*r.take(_PERF))


def encode_capabilities(caps: Capabilities) -> bytes:
    w = Writer()
    w.u8(CODEC_VERSION)
    for info in (caps.relaxed_float32_to_float16_performance_scalar,
                 caps.relaxed_float32_to_float16_performance_tensor, caps.if_performance,
                 caps.while_performance):
        _perf(w, info)
    w.u32(len(caps.operand_performance))
    for operand_type, info in caps.operand_performance:
        w.u32(operand_type)
        _perf(w, info)
    return w.getvalue()


def decode_capabilities(r: Reader) -> Capabilities:
    check_version(r, "capabilities")
    scalar, tensor, if_perf, while_perf = (_read_perf(r) for _ in range(4))
    listed = tuple((enum_value(OperandType, r.u32()), _read_perf(r)) for _ in range(r.count(20)))
    return Capabilities(scalar, tensor, listed, if_perf, while_perf)


# ---------------------------------------------------------------- model
_OPERAND = struct.Struct("<IdiBB")  # type, scale, zero point, lifetime, flags
_LOCATION = struct.Struct("<iII")
_HAS_LOCATION, _HAS_CHANNEL_QUANT, _HAS_EXTENSION_DATA = 1, 2, 4


def _write_operand(w: Writer, op: Operand) -> None:
    flags = (_HAS_LOCATION if op.location else 0) | (_HAS_CHANNEL_QUANT if op.channel_quant else 0) \
        | (_HAS_EXTENSION_DATA if op.extension_data is not None else 0)
    w.parts.append(_OPERAND.pack(op.type, op.scale, op.zero_point, op.lifetime, flags))
    w.u32s(op.dimensions)
    if op.location:
        w.parts.append(_LOCATION.pack(op.location.pool_index, op.location.offset, op.location.length))
    if op.channel_quant:
        q = op.channel_quant
        w.parts.append(struct.pack(f"<II{len(q.scales)}d", q.channel_dim, len(q.scales), *q.scales))
    if op.extension_data is not None:
        w.blob(op.extension_data)


def _read_operand(r: Reader) -> Operand:
    kind, scale, zero_point, lifetime, flags = r.take(_OPERAND)
    dims = r.u32s()
    location = DataLocation(*r.take(_LOCATION)) if flags & _HAS_LOCATION else None
    quant = None
    if flags & _HAS_CHANNEL_QUANT:
        channel_dim = r.u32()
        n = r.count(8)
        scales = struct.unpack_from(f"<{n}d", r.view, r.pos)
        r.pos += 8 * n
        quant = ChannelQuant(scales, channel_dim)
    extension_data = r.blob() if flags & _HAS_EXTENSION_DATA else None
    kind = kind if is_extension(kind) else enum_value(OperandType, kind)  # named by decode_model
    return Operand(kind, dims, scale, zero_point, enum_value(OperandLifetime, lifetime), location,
                   quant, extension_data)


def _write_subgraph(w: Writer, graph: Subgraph) -> None:
    w.u32(len(graph.operands))
    for operand in graph.operands:
        _write_operand(w, operand)
    w.u32(len(graph.operations))
    for operation in graph.operations:
        w.u32(operation.type)
        w.u32s(operation.inputs)
        w.u32s(operation.outputs)
    w.u32s(graph.input_indexes)
    w.u32s(graph.output_indexes)


def _read_subgraph(r: Reader) -> Subgraph:
    operands = tuple(_read_operand(r) for _ in range(r.count(_OPERAND.size + 4)))
    operations = tuple(_read_operation(r) for _ in range(r.count(12)))
    return Subgraph(operands, operations, r.u32s(), r.u32s())


def _read_operation(r: Reader) -> Operation:
    kind = r.take(_U32)[0]
    kind = kind if is_extension(kind) else enum_value(OperationType, kind)  # named by decode_model
    return Operation(kind, r.u32s(), r.u32s())


def encode_model(model: HalModel, values_inline: bool) -> bytes:
    """The model's structure; ``operand_values`` only when ``values_inline`` (else length only)."""
    w = Writer()
    w.u8(CODEC_VERSION)
    w.u8(1 if model.relax_float32_to_float16 else 0)
    _write_subgraph(w, model.main)
    w.u32(len(model.referenced))
    for graph in model.referenced:
        _write_subgraph(w, graph)
    w.u8(1 if values_inline else 0)
    if values_inline:
        w.blob(model.operand_values)
    else:
        w.u64(len(model.operand_values))
    w.u32(len(model.extension_name_to_prefix))
    for name, prefix in model.extension_name_to_prefix:
        w.text(name)
        w.u16(prefix)
    write_origins(w, model)
    return w.getvalue()


def write_origins(w: Writer, model: HalModel) -> None:
    """The model's step index (as i32, -1: a whole model) and operation origins (see HalModel)."""
    w.i32(model.step_index)
    w.u32s(model.operation_origins)


def read_origins(r: Reader, main: Subgraph) -> tuple[int, tuple[int, ...]]:
    """``(step index, operation origins)`` as :func:`write_origins` wrote them, checked: a step
    index of -1 or more, and no origins or one per operation of ``main``, each distinct."""
    step, origins = r.i32(), r.u32s()
    if step < -1:
        raise CodecError(f"step index {step} is negative")
    if origins and (len(origins) != len(main.operations) or len(set(origins)) != len(origins)
                    or max(origins) > _LIMIT):
        raise CodecError(f"{len(origins)} operation origins for {len(main.operations)} operations "
                         "(one distinct index per operation, or none)")
    return step, origins


def decode_model(r: Reader) -> tuple[HalModel, int | None]:
    """Returns the model (``pools`` and, when not inline, ``operand_values`` left empty) and
    the expected out-of-line operand-value length (None when the values were inline)."""
    check_version(r, "model")
    relax = bool(r.u8())
    main = _read_subgraph(r)
    referenced = tuple(_read_subgraph(r) for _ in range(r.count(16)))
    if r.u8():
        values, external = r.blob(), None
    else:
        values, external = b"", r.u64()
    pairs = tuple((r.text(), r.u16()) for _ in range(r.count(6)))
    problem = prefix_map_problem(pairs)
    if problem:
        raise CodecError(f"extensionNameToPrefix: {problem}")
    prefixes = {prefix: name for name, prefix in pairs}
    main, referenced = _named(main, prefixes), tuple(_named(g, prefixes) for g in referenced)
    step, origins = read_origins(r, main)
    return HalModel(main, referenced, values, (), relax, pairs, step, origins), external


def _named(graph: Subgraph, prefixes: dict) -> Subgraph:
    """``graph`` with its extension types named; CodecError for an unregistered prefix."""
    def name(value, kind):
        if not is_extension(value):
            return value
        extension = named(value, prefixes, kind)
        if extension is None:
            raise CodecError(f"{kind} type {value}: extension prefix {value >> 16} is not in "
                             f"extensionNameToPrefix")
        return extension
    if not prefixes and not any(is_extension(o.type) for o in graph.operands) \
            and not any(is_extension(o.type) for o in graph.operations):
        return graph
    operands = tuple(dataclasses.replace(o, type=name(o.type, OPERAND)) if is_extension(o.type) else o
                     for o in graph.operands)
    operations = tuple(dataclasses.replace(o, type=name(o.type, OPERATION)) if is_extension(o.type)
                       else o for o in graph.operations)
    return dataclasses.replace(graph, operands=operands, operations=operations)


# ---------------------------------------------------------------- extensions
def encode_extensions(extensions) -> bytes:
    """``IDevice.getSupportedExtensions`` answer: each Extension{name, operandTypes}."""
    w = Writer()
    w.u32(len(extensions))
    for extension in extensions:
        w.text(extension.name)
        w.u32(len(extension.operand_types))
        for info in extension.operand_types:
            w.parts.append(_TYPE_INFO.pack(info.type, info.is_tensor, info.byte_size))
    return w.getvalue()


_TYPE_INFO = struct.Struct("<HBI")


def decode_extensions(r: Reader) -> tuple[Extension, ...]:
    extensions = []
    for _ in range(r.count(8)):
        name = r.text()
        infos = []
        for _ in range(r.count(_TYPE_INFO.size)):
            kind, is_tensor, size = r.take(_TYPE_INFO)
            infos.append(ExtensionOperandTypeInformation(kind, bool(is_tensor), size))
        extensions.append(Extension(name, tuple(infos)))
    return tuple(extensions)
