"""A model's graph as fixed-size tables, for the model cache: what a sample driver decodes on
``prepareModelFromCache_1_3`` instead of the wire codec's field-by-field records.

A subgraph is a count header, then arrays read whole with ``np.frombuffer`` (no pickle, no code):

    counts: operands, operations, dims, operation indexes, extras bytes (u32 x5)
    | operand table: type u32, scale f64, zero point i32, lifetime u32, flags u32, rank u32,
      location pool i32, offset u32, length u32
    | dims (u32 each, operand by operand) | operation table: type u32, inputs u32, outputs u32
    | operation indexes (u32: each operation's inputs then outputs)
    | extras: per operand with per-channel quantisation, channel dim u32, count u32, scales f64
    | model inputs, model outputs (u32 lists)

Extension types have no table form (``cache_payload`` does not cache such a model). Every type and lifetime is looked up in its enum and every
count checked against the bytes left, every operand index against the operands: a bad table
raises ``CodecError``/``KeyError``/``ValueError``.

Example:
    >>> from nnscope.runtime.builtin_models import mobilenet
    >>> graph = mobilenet(size=32, alpha=0.25, classes=10).to_hal().main
    >>> r = Reader(encode_subgraph(graph))
    >>> decode_subgraph(r) == graph
    True
"""
from __future__ import annotations

import struct

import numpy as np

from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader, Writer
from nnscope.runtime.hal.types import (ChannelQuant, DataLocation, Operand, OperandLifetime, OperandType,
                               Operation, OperationType, Subgraph)

_COUNTS = struct.Struct("<5I")
_OPERAND = np.dtype([("type", "<u4"), ("scale", "<f8"), ("zero_point", "<i4"), ("lifetime", "<u4"),
                     ("flags", "<u4"), ("rank", "<u4"), ("pool", "<i4"), ("offset", "<u4"),
                     ("length", "<u4")])
_OPERATION = np.dtype([("type", "<u4"), ("inputs", "<u4"), ("outputs", "<u4")])
_HAS_LOCATION, _HAS_CHANNEL_QUANT = 1, 2
_OPERAND_TYPES = {int(member): member for member in OperandType}
_OPERATION_TYPES = {int(member): member for member in OperationType}
_LIFETIMES = {int(member): member for member in OperandLifetime}


def encode_subgraph(graph: Subgraph) -> bytes:
    """The tables of ``graph`` (no extension operand or operation types)."""
    rows, extras = [], Writer()
    for op in graph.operands:
        location = op.location or DataLocation(0, 0, 0)
        flags = (_HAS_LOCATION if op.location else 0) | (_HAS_CHANNEL_QUANT if op.channel_quant else 0)
        rows.append((op.type, op.scale, op.zero_point, op.lifetime, flags, len(op.dimensions),
                     location.pool_index, location.offset, location.length))
        if op.channel_quant:
            quant = op.channel_quant
            extras.parts.append(struct.pack(f"<II{len(quant.scales)}d", quant.channel_dim,
                                            len(quant.scales), *quant.scales))
    operands = np.array(rows, _OPERAND)
    operations = np.array([(op.type, len(op.inputs), len(op.outputs)) for op in graph.operations],
                          _OPERATION)
    dims = [d for op in graph.operands for d in op.dimensions]
    indexes = [i for op in graph.operations for i in (*op.inputs, *op.outputs)]
    extra_bytes = extras.getvalue()
    w = Writer()
    w.parts += [_COUNTS.pack(len(operands), len(operations), len(dims), len(indexes), len(extra_bytes)),
                operands.tobytes(), np.array(dims, "<u4").tobytes(), operations.tobytes(),
                np.array(indexes, "<u4").tobytes(), extra_bytes]
    w.u32s(graph.input_indexes)
    w.u32s(graph.output_indexes)
    return w.getvalue()


def decode_subgraph(r: Reader) -> Subgraph:
    """The subgraph whose tables start at ``r``'s position."""
    n_operands, n_operations, n_dims, n_indexes, n_extras = r.take(_COUNTS)
    records = array(r, _OPERAND, n_operands).tolist()
    dims = array(r, np.dtype("<u4"), n_dims).tolist()
    kinds = array(r, _OPERATION, n_operations).tolist()
    index_table = array(r, np.dtype("<u4"), n_indexes)
    if n_indexes and int(index_table.max()) >= n_operands:
        raise CodecError("an operation refers to a missing operand")
    indexes = index_table.tolist()
    extras = Reader(array(r, np.dtype("u1"), n_extras))
    operands = _operands(records, dims, extras)
    extras.end()
    operations, at = [], 0
    for kind, n_in, n_out in kinds:
        operations.append(Operation(_OPERATION_TYPES[kind], tuple(indexes[at:at + n_in]),
                                    tuple(indexes[at + n_in:at + n_in + n_out])))
        at += n_in + n_out
    if at != n_indexes:
        raise CodecError(f"operations use {at} indexes, the table has {n_indexes}")
    inputs, outputs = r.u32s(), r.u32s()
    if max((*inputs, *outputs), default=-1) >= n_operands:
        raise CodecError("a subgraph input or output refers to a missing operand")
    return Subgraph(operands, tuple(operations), inputs, outputs)


def _operands(records: list, dims: list, extras: Reader) -> tuple[Operand, ...]:
    operands, at = [], 0
    for kind, scale, zero_point, lifetime, flags, rank, pool, offset, length in records:
        quant = None
        if flags & _HAS_CHANNEL_QUANT:
            channel_dim = extras.u32()
            scales = array(extras, np.dtype("<f8"), extras.count(8))
            quant = ChannelQuant(tuple(scales.tolist()), channel_dim)
        operands.append(Operand(_OPERAND_TYPES[kind], tuple(dims[at:at + rank]), scale, zero_point,
                                _LIFETIMES[lifetime],
                                DataLocation(pool, offset, length) if flags & _HAS_LOCATION else None,
                                quant))
        at += rank
    if at != len(dims):
        raise CodecError(f"operands use {at} dimensions, the table has {len(dims)}")
    return tuple(operands)


def array(r: Reader, dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` items of ``dtype`` at ``r``'s position (bounds-checked)."""
    size = dtype.itemsize * count
    if size > len(r.view) - r.pos:
        raise CodecError(f"table of {count} items at byte {r.pos} exceeds the payload")
    array = np.frombuffer(r.view, dtype, count, r.pos)
    r.pos += size
    return array
