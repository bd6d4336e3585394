"""Signed 8-bit tensors below feature level 30, passed to NNAPI as the TFLite delegate does.

NNAPI has a signed 8-bit asymmetric type only from 1.3 (Android 11, API 30:
TENSOR_QUANT8_ASYMM_SIGNED). Below it, the NNAPI delegate hands the int8 tensors of the
operators it lists (``NeedInt8Conversion`` in TensorFlow's ``nnapi_delegate.cc``) to NNAPI as
uint8, TENSOR_QUANT8_ASYMM: the same scale, the zero point plus 128 and every value plus 128
(a constant once, when the model is built; an input at each execution), and it turns the
outputs back (minus 128). A per-channel filter stays TENSOR_QUANT8_SYMM_PER_CHANNEL (NNAPI
1.2). DEQUANTIZE is not listed: its int8 input goes as TENSOR_QUANT8_SYMM (NNAPI 1.2, zero
point 0, which its rule checks). Any other operator's int8 tensors would reach NNAPI as
TENSOR_QUANT8_ASYMM_SIGNED, which a device below API 30 does not have.

``validate`` asks :func:`int8_operand_type` which type an operator's int8 tensors get;
``delegated`` rewrites a partition's NNAPI model with :func:`as_uint8_model` and converts the
values that cross it with :func:`int8_to_uint8` and :func:`uint8_to_int8_in_place`. The
rewrite turns every TENSOR_QUANT8_ASYMM_SIGNED operand of the partition into uint8, a
DEQUANTIZE's input too: the same real values as the delegate's zero-point-0 TENSOR_QUANT8_SYMM.

Example:
    >>> import numpy as np
    >>> int8_to_uint8(np.array([-128, -1, 0, 127], np.int8)).tolist()
    [0, 127, 128, 255]
    >>> uint8_to_int8_in_place(np.array([0, 127, 128, 255], np.uint8)).tolist()
    [-128, -1, 0, 127]
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from nnscope.runtime.hal.types import HalModel, Operand, OperandLifetime, OperandType, Subgraph
from nnscope.runtime.tflite._reader import TfliteGraph, TfliteOperator

#: The feature level (Android API level) from which NNAPI has TENSOR_QUANT8_ASYMM_SIGNED.
SIGNED_INT8_LEVEL = 30

#: Builtins whose int8 tensors the delegate passes to NNAPI as uint8 below API 30, when the
#: input it looks at (:data:`DECIDING_INPUT`, else the first) is int8.
INT8_AS_UINT8 = frozenset({
    "ADD", "ARG_MAX", "ARG_MIN", "AVERAGE_POOL_2D", "BATCH_TO_SPACE_ND", "CONCATENATION",
    "CONV_2D", "DEPTH_TO_SPACE", "DEPTHWISE_CONV_2D", "EQUAL", "EXPAND_DIMS", "FULLY_CONNECTED",
    "GATHER", "GREATER", "GREATER_EQUAL", "HARD_SWISH", "L2_NORMALIZATION", "LEAKY_RELU", "LESS",
    "LESS_EQUAL", "LOGISTIC", "MAX_POOL_2D", "MAXIMUM", "MEAN", "MINIMUM", "MUL", "NOT_EQUAL",
    "PAD", "PADV2", "PRELU", "REDUCE_MAX", "REDUCE_MIN", "RELU", "RELU6", "RELU_N1_TO_1",
    "RESHAPE", "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "SELECT", "SLICE", "SOFTMAX",
    "SPACE_TO_BATCH_ND", "SPACE_TO_DEPTH", "STRIDED_SLICE", "SUB", "TANH", "TILE", "TOPK_V2",
    "TRANSPOSE", "TRANSPOSE_CONV"})
#: The input the delegate looks at where it is not the first: TRANSPOSE_CONV's data (after
#: the output shape and the filter), SELECT's values (after the condition).
DECIDING_INPUT = {"TRANSPOSE_CONV": 2, "SELECT": 1}
#: Builtins converted only when their weights (input 1) are quantized too.
WEIGHTED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"})

_T = OperandType


def passes_int8_as_uint8(graph: TfliteGraph, op: TfliteOperator) -> bool:
    """Whether the delegate below API 30 hands this operator's int8 tensors to NNAPI as uint8."""
    if op.name not in INT8_AS_UINT8 or _input_type(graph, op, DECIDING_INPUT.get(op.name, 0)) != "INT8":
        return False
    if op.name in WEIGHTED:
        weights = graph.tensors[op.inputs[1]] if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
        return weights is not None and weights.type_name in ("INT8", "UINT8") and bool(weights.scales)
    return True


def int8_operand_type(graph: TfliteGraph, op: TfliteOperator, level: int) -> OperandType:
    """The NNAPI type the delegate gives the operator's (per-tensor) int8 tensors at ``level``:
    TENSOR_QUANT8_ASYMM_SIGNED from API 30 and for an operator it does not convert below;
    TENSOR_QUANT8_ASYMM for one it converts; TENSOR_QUANT8_SYMM for DEQUANTIZE's input."""
    if level >= SIGNED_INT8_LEVEL:
        return _T.TENSOR_QUANT8_ASYMM_SIGNED
    if passes_int8_as_uint8(graph, op):
        return _T.TENSOR_QUANT8_ASYMM
    return _T.TENSOR_QUANT8_SYMM if op.name == "DEQUANTIZE" else _T.TENSOR_QUANT8_ASYMM_SIGNED


def _input_type(graph: TfliteGraph, op: TfliteOperator, position: int) -> str | None:
    if position >= len(op.inputs) or op.inputs[position] < 0:
        return None
    return graph.tensors[op.inputs[position]].type_name


# --------------------------------------------------------------------------- the partition's model
def as_uint8_model(model: HalModel) -> HalModel:
    """``model`` with every TENSOR_QUANT8_ASYMM_SIGNED operand made TENSOR_QUANT8_ASYMM: zero
    point + 128, a constant's values + 128 (in ``operand_values``). Other operands are kept.

    Raises:
        ValueError: a signed constant stored in a memory pool (the loader stores none there).
    """
    values = bytearray(model.operand_values)
    flipped: set[tuple[int, int]] = set()
    main = _as_uint8_subgraph(model.main, values, flipped)
    referenced = tuple(_as_uint8_subgraph(s, values, flipped) for s in model.referenced)
    return replace(model, main=main, referenced=referenced, operand_values=bytes(values))


def _as_uint8_subgraph(subgraph: Subgraph, values: bytearray, flipped: set) -> Subgraph:
    operands = tuple(_as_uint8_operand(o, values, flipped)
                     if o.type == _T.TENSOR_QUANT8_ASYMM_SIGNED else o for o in subgraph.operands)
    return replace(subgraph, operands=operands)


def _as_uint8_operand(operand: Operand, values: bytearray, flipped: set) -> Operand:
    if operand.lifetime == OperandLifetime.CONSTANT_COPY:
        _flip_stored(operand, values, flipped)
    elif operand.lifetime == OperandLifetime.CONSTANT_REFERENCE:
        raise ValueError("a TENSOR_QUANT8_ASYMM_SIGNED constant in a memory pool: "
                         "its values cannot be made uint8 here")
    return replace(operand, type=_T.TENSOR_QUANT8_ASYMM, zero_point=operand.zero_point + 128)


def _flip_stored(operand: Operand, values: bytearray, flipped: set) -> None:
    """Add 128 to the stored bytes of a constant (once, should two operands share them)."""
    where = (operand.location.offset, operand.location.length)
    if where in flipped:
        return
    flipped.add(where)
    stored = np.frombuffer(values, np.uint8, where[1], where[0])
    values[where[0]:where[0] + where[1]] = (stored ^ np.uint8(0x80)).tobytes()


# --------------------------------------------------------------------------- values crossing it
def int8_to_uint8(values: np.ndarray) -> np.ndarray:
    """int8 ``values`` as NNAPI's uint8 ones (value + 128), in a new array."""
    return np.asarray(values, np.int8).view(np.uint8) ^ np.uint8(0x80)


def uint8_to_int8_in_place(values: np.ndarray) -> np.ndarray:
    """uint8 ``values`` (NNAPI wrote them) back as int8 (value - 128): rewritten in place and
    returned as an int8 view of the same memory, as the delegate converts its output pool."""
    np.bitwise_xor(values, np.uint8(0x80), out=values)
    return values.view(np.int8)
