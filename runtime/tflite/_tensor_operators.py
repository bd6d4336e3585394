"""TFLite -> NNAPI converters for comparisons, logic, elementwise maths, reductions and the
slicing/rearranging builtins (merged into ``_operators.CONVERTERS``).

Most map one to one. TFLite passes some parameters as constant tensors where NNAPI wants
scalars (ARG_MAX's axis, EXPAND_DIMS's axis, TOPK_V2's k, SPLIT's axis, PADV2's value, FILL's
value): a non-constant one is an :class:`~runtime.tflite._builder.UnsupportedOperator`, as are
options NNAPI cannot express (GATHER batch_dims, float16 scalars); BATCH_TO_SPACE_ND's crops
become a SLICE.

Example:
    >>> sorted(TENSOR_CONVERTERS)[:3]
    ['ABS', 'ARG_MAX', 'ARG_MIN']
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnscope.runtime.hal.types import OperandType, OperationType as Op
from nnscope.runtime.tflite._builder import GraphBuilder, UnsupportedOperator
from nnscope.runtime.tflite._reader import TfliteOperator

_FLOAT16 = OperandType.TENSOR_FLOAT16


def _unsupported(message: str) -> Exception:
    return UnsupportedOperator(message)


def _not_float16(b: GraphBuilder, op: TfliteOperator) -> None:
    if b.operands[b.tensor(op.inputs[0])].type == _FLOAT16:
        raise _unsupported(f"{op.name} on float16 (its NNAPI scalar parameter would be FLOAT16)")


def _direct(nnapi_type: Op, n_inputs: int | None = None) -> Callable:
    """Same inputs (the first ``n_inputs``) and outputs, in the same order."""
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        inputs = op.inputs if n_inputs is None else op.inputs[:n_inputs]
        b.add(nnapi_type, [b.tensor(i) for i in inputs], [b.tensor(o) for o in op.outputs])
    return convert


def _with_scalars(nnapi_type: Op, *scalars) -> Callable:
    """Input 0 followed by fixed scalars (ELU's alpha, LOG_SOFTMAX's beta and axis)."""
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        _not_float16(b, op)
        inputs = [b.tensor(op.inputs[0])] + [b.scalar(value) for value in scalars]
        b.add(nnapi_type, inputs, [b.tensor(op.outputs[0])])
    return convert


def _reduce(nnapi_type: Op) -> Callable:
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        keep = bool(op.options.KeepDims()) if op.options is not None else False
        inputs = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), b.scalar(keep)]
        b.add(nnapi_type, inputs, [b.tensor(op.outputs[0])])
    return convert


def _axis_scalar(nnapi_type: Op) -> Callable:
    """(input, constant axis/k tensor) -> (input, INT32 scalar): ARG_MAX/MIN, EXPAND_DIMS, TOPK."""
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        value = int(b.constant_input(op, 1, "axis").reshape(-1)[0])
        inputs = [b.tensor(op.inputs[0]), b.scalar(value)]
        b.add(nnapi_type, inputs, [b.tensor(o) for o in op.outputs])
    return convert


def _gather(b: GraphBuilder, op: TfliteOperator) -> None:
    o = op.options
    if o is not None and o.BatchDims():
        raise _unsupported("GATHER with batch_dims")
    axis = int(o.Axis()) if o is not None else 0
    inputs = [b.tensor(op.inputs[0]), b.scalar(axis), b.tensor(op.inputs[1])]
    b.add(Op.GATHER, inputs, [b.tensor(op.outputs[0])])


def _split(b: GraphBuilder, op: TfliteOperator) -> None:
    axis = int(b.constant_input(op, 0, "axis").reshape(-1)[0])
    inputs = [b.tensor(op.inputs[1]), b.scalar(axis), b.scalar(len(op.outputs))]
    b.add(Op.SPLIT, inputs, [b.tensor(o) for o in op.outputs])


def _squeeze(b: GraphBuilder, op: TfliteOperator) -> None:
    o = op.options
    dims = [int(d) for d in o.SqueezeDimsAsNumpy()] if o is not None and o.SqueezeDimsLength() \
        else [a for a, d in enumerate(b.graph.tensors[op.inputs[0]].shape) if d == 1]
    axes = b.constant(np.array(dims, np.int32), OperandType.TENSOR_INT32)
    b.add(Op.SQUEEZE, [b.tensor(op.inputs[0]), axes], [b.tensor(op.outputs[0])])


def _pad_v2(b: GraphBuilder, op: TfliteOperator) -> None:
    _not_float16(b, op)
    value = b.constant_input(op, 2, "pad value").reshape(-1)[0]
    scalar = float(value) if value.dtype.kind == "f" else int(value)
    inputs = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), b.scalar(scalar)]
    b.add(Op.PAD_V2, inputs, [b.tensor(op.outputs[0])])


def _batch_to_space(b: GraphBuilder, op: TfliteOperator) -> None:
    """NNAPI has no crops: non-zero (constant) crops become a SLICE of the uncropped result."""
    out = b.tensor(op.outputs[0])
    crops = b.constant_input(op, 2, "crops").reshape(-1, 2) if len(op.inputs) > 2 else None
    inputs = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1])]
    if crops is None or not np.any(crops):
        b.add(Op.BATCH_TO_SPACE_ND, inputs, [out])
        return
    x_shape = b.graph.tensors[op.inputs[0]].shape
    block = b.constant_input(op, 1, "block shape").reshape(-1)
    if len(x_shape) != 4 or len(block) != 2:
        raise _unsupported("BATCH_TO_SPACE_ND with crops on other than NHWC")
    full = (x_shape[0] // int(block.prod()), x_shape[1] * int(block[0]),
            x_shape[2] * int(block[1]), x_shape[3])
    uncropped = b.temporary(out, full)
    b.add(Op.BATCH_TO_SPACE_ND, inputs, [uncropped])
    begin = [0, int(crops[0][0]), int(crops[1][0]), 0]
    size = list(b.graph.tensors[op.outputs[0]].shape)
    b.add(Op.SLICE, [uncropped, _int32(b, begin), _int32(b, size)], [out])


def _int32(b: GraphBuilder, values) -> int:
    return b.constant(np.asarray(values, np.int32), OperandType.TENSOR_INT32)


def _block_size(nnapi_type: Op) -> Callable:
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        inputs = [b.tensor(op.inputs[0]), b.scalar(int(op.options.BlockSize()))]
        b.add(nnapi_type, inputs, [b.tensor(op.outputs[0])])
    return convert


def _fill(b: GraphBuilder, op: TfliteOperator) -> None:
    value = b.constant_input(op, 1, "value").reshape(-1)[0]
    if value.dtype == np.float16:
        raise _unsupported("FILL with a float16 value")
    scalar = float(value) if value.dtype.kind == "f" else int(value)
    b.add(Op.FILL, [b.tensor(op.inputs[0]), b.scalar(scalar)], [b.tensor(op.outputs[0])])


def _select_v2(b: GraphBuilder, op: TfliteOperator) -> None:
    """NNAPI SELECT needs one shape: a smaller input is broadcast first, by LOGICAL_OR with
    false (the condition) or ADD of a zero of its own type and quantisation (the values)."""
    out_shape = b.graph.tensors[op.outputs[0]].shape
    inputs = [_broadcast(b, i, out_shape) for i in op.inputs]
    b.add(Op.SELECT, inputs, [b.tensor(op.outputs[0])])


def _broadcast(b: GraphBuilder, tensor_index: int, shape: tuple[int, ...]) -> int:
    x = b.tensor(tensor_index)
    if b.graph.tensors[tensor_index].shape == tuple(shape):
        return x
    operand, result = b.operands[x], b.temporary(x, shape)
    if operand.type == OperandType.TENSOR_BOOL8:
        b.add(Op.LOGICAL_OR, [x, b.constant(np.zeros(shape, bool), operand.type)], [result])
        return result
    zero = np.full(shape, operand.zero_point)
    zeros = b.constant(zero, operand.type, operand.scale, operand.zero_point)
    b.add(Op.ADD, [x, zeros, b.scalar(0)], [result])
    return result


def _local_response_normalization(b: GraphBuilder, op: TfliteOperator) -> None:
    _not_float16(b, op)
    o = op.options
    inputs = [b.tensor(op.inputs[0]), b.scalar(int(o.Radius())), b.scalar(float(o.Bias())),
              b.scalar(float(o.Alpha())), b.scalar(float(o.Beta()))]
    b.add(Op.LOCAL_RESPONSE_NORMALIZATION, inputs, [b.tensor(op.outputs[0])])


_LSH_TYPES = {1: 3, 2: 2}  # TFLite SPARSE/DENSE -> NNAPI SPARSE (bits + i * 2**bits)/DENSE


def _lsh_projection(b: GraphBuilder, op: TfliteOperator) -> None:
    """TFLite's optional weight is all ones when omitted (its kernel's unweighted sum)."""
    hashes, values = b.tensor(op.inputs[0]), b.tensor(op.inputs[1])
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        weight = b.tensor(op.inputs[2])
    else:
        rows = b.graph.tensors[op.inputs[1]].shape[0]
        weight = b.constant(np.ones(rows), b.operands[hashes].type)
    kind = _LSH_TYPES.get(int(op.options.Type()) if op.options is not None else 0)
    if kind is None:
        raise _unsupported("LSH_PROJECTION of UNKNOWN type")
    b.add(Op.LSH_PROJECTION, [hashes, values, weight, b.scalar(kind)], [b.tensor(op.outputs[0])])


_SAME_NAME = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
              "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "SELECT", "ABS", "NEG", "EXP", "LOG",
              "RSQRT", "SIN", "SQRT", "FLOOR", "POW", "MAXIMUM", "MINIMUM", "CAST", "PRELU",
              "SLICE", "TILE", "TRANSPOSE", "SPACE_TO_BATCH_ND")

#: TFLite builtin operator name -> converter(builder, operator).
TENSOR_CONVERTERS: dict[str, Callable[[GraphBuilder, TfliteOperator], None]] = {
    **{name: _direct(Op[name]) for name in _SAME_NAME},
    "SELECT_V2": _select_v2, "ELU": _with_scalars(Op.ELU, 1.0),
    "LOG_SOFTMAX": _with_scalars(Op.LOG_SOFTMAX, 1.0, -1), "FILL": _fill,
    "SUM": _reduce(Op.REDUCE_SUM), "REDUCE_PROD": _reduce(Op.REDUCE_PROD),
    "REDUCE_MAX": _reduce(Op.REDUCE_MAX), "REDUCE_MIN": _reduce(Op.REDUCE_MIN),
    "REDUCE_ANY": _reduce(Op.REDUCE_ANY), "REDUCE_ALL": _reduce(Op.REDUCE_ALL),
    "LOCAL_RESPONSE_NORMALIZATION": _local_response_normalization,
    "EMBEDDING_LOOKUP": _direct(Op.EMBEDDING_LOOKUP),
    "HASHTABLE_LOOKUP": _direct(Op.HASHTABLE_LOOKUP),
    "LSH_PROJECTION": _lsh_projection,
    "ARG_MAX": _axis_scalar(Op.ARGMAX), "ARG_MIN": _axis_scalar(Op.ARGMIN),
    "TOPK_V2": _axis_scalar(Op.TOPK_V2), "EXPAND_DIMS": _axis_scalar(Op.EXPAND_DIMS),
    "GATHER": _gather, "SPLIT": _split, "SQUEEZE": _squeeze,
    "PADV2": _pad_v2, "BATCH_TO_SPACE_ND": _batch_to_space,
    "DEPTH_TO_SPACE": _block_size(Op.DEPTH_TO_SPACE),
    "SPACE_TO_DEPTH": _block_size(Op.SPACE_TO_DEPTH),
}
