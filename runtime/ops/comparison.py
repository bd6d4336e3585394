"""Comparisons and logic: EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL,
LOGICAL_AND, LOGICAL_OR, LOGICAL_NOT, SELECT (AOSP ``Comparisons.cpp``, ``Logical.cpp``,
``Select.cpp``).

Comparisons broadcast two tensors of one type (BOOL8, FLOAT16, FLOAT32, INT32, QUANT8_ASYMM,
QUANT8_ASYMM_SIGNED) into a TENSOR_BOOL8; quant8 operands are compared by their real values, so
the two inputs may have different scales and zero points. SELECT picks elementwise from input 1
where the BOOL8 condition is true and from input 2 elsewhere (all three of one shape); quant8
choices are requantized to the output's parameters.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> f = Operand(T.TENSOR_FLOAT32, (3,)); b = Operand(T.TENSOR_BOOL8, (3,))
    >>> ctx = OpContext(Operation(O.LESS, (0, 1), (2,)),
    ...                 [np.float32([1, 2, 3]), np.float32([2, 2, 2])], [f, f], [b])
    >>> execute_less(ctx)[0].tolist()
    [True, False, False]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import OperandType as T, OperationType
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.registry import OpContext, register

_COMPARE_TYPES = (T.TENSOR_BOOL8, T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32,
                  T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_SELECT_TYPES = _COMPARE_TYPES[1:]


# ----------------------------------------------------------------------------- validators
def _validate_compare(inputs, outputs) -> None:
    c.expect_count(inputs, 2, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _COMPARE_TYPES)
    c.expect_same_type(inputs, 1, in_type)
    c.expect_type(outputs, 0, T.TENSOR_BOOL8, "output")


def _validate_logical_binary(inputs, outputs) -> None:
    c.expect_count(inputs, 2, "inputs")
    c.expect_count(outputs, 1, "outputs")
    c.expect_type(inputs, 0, T.TENSOR_BOOL8)
    c.expect_type(inputs, 1, T.TENSOR_BOOL8)
    c.expect_type(outputs, 0, T.TENSOR_BOOL8, "output")


def _validate_logical_not(inputs, outputs) -> None:
    c.expect_count(inputs, 1, "inputs")
    c.expect_count(outputs, 1, "outputs")
    c.expect_type(inputs, 0, T.TENSOR_BOOL8)
    c.expect_type(outputs, 0, T.TENSOR_BOOL8, "output")


def _validate_select(inputs, outputs) -> None:
    c.expect_count(inputs, 3, "inputs")
    c.expect_count(outputs, 1, "outputs")
    c.expect_type(inputs, 0, T.TENSOR_BOOL8)
    value_type = c.expect_type(inputs, 1, _SELECT_TYPES)
    c.expect_same_type(inputs, 2, value_type)
    c.expect_same_type(outputs, 0, value_type, "output")
    shapes = [o.dimensions for o in (*inputs, outputs[0]) if o.dimensions]
    ranks = {len(shape) for shape in shapes}
    c.expect(len(ranks) <= 1, f"SELECT operands must have one shape, got {shapes}")


# ----------------------------------------------------------------------------- kernels
def _comparable(x: np.ndarray, operand) -> np.ndarray:
    """Values to compare: real values for quant8, float32 for float16, else the array."""
    if c.is_quant8(operand.type):
        return c.dequantize(x, operand)
    return x


def _compare_kernel(ufunc):
    def execute(ctx: OpContext) -> list:
        a, b = ctx.inputs
        c.broadcast_shape(a, b)
        op_a, op_b = ctx.input_operands
        return [ufunc(_comparable(a, op_a), _comparable(b, op_b))]
    return execute


def _logical_kernel(ufunc):
    def execute(ctx: OpContext) -> list:
        a, b = ctx.inputs
        c.broadcast_shape(a, b)
        return [ufunc(a, b)]
    return execute


def execute_logical_not(ctx: OpContext) -> list:
    return [np.logical_not(ctx.inputs[0])]


def execute_select(ctx: OpContext) -> list:
    condition, a, b = ctx.inputs
    c.expect(condition.shape == a.shape == b.shape,
             f"SELECT operands must have one shape, got {list(condition.shape)}, "
             f"{list(a.shape)} and {list(b.shape)}")
    out = ctx.output_operands[0]
    if c.is_quant8(out.type):
        a = c.requantize(a, ctx.input_operands[1], out)
        b = c.requantize(b, ctx.input_operands[2], out)
    return [np.where(condition, a, b)]


execute_equal = _compare_kernel(np.equal)
execute_not_equal = _compare_kernel(np.not_equal)
execute_less = _compare_kernel(np.less)
execute_less_equal = _compare_kernel(np.less_equal)
execute_greater = _compare_kernel(np.greater)
execute_greater_equal = _compare_kernel(np.greater_equal)

_FAMILY = "comparison"
for _type, _kernel in ((OperationType.EQUAL, execute_equal),
                       (OperationType.NOT_EQUAL, execute_not_equal),
                       (OperationType.LESS, execute_less),
                       (OperationType.LESS_EQUAL, execute_less_equal),
                       (OperationType.GREATER, execute_greater),
                       (OperationType.GREATER_EQUAL, execute_greater_equal)):
    register(_type, _FAMILY, _validate_compare, _kernel, infer_shapes=c.infer_broadcast)
register(OperationType.LOGICAL_AND, _FAMILY, _validate_logical_binary,
         _logical_kernel(np.logical_and), infer_shapes=c.infer_broadcast)
register(OperationType.LOGICAL_OR, _FAMILY, _validate_logical_binary, _logical_kernel(np.logical_or),
         infer_shapes=c.infer_broadcast)
register(OperationType.LOGICAL_NOT, _FAMILY, _validate_logical_not, execute_logical_not)
register(OperationType.SELECT, _FAMILY, _validate_select, execute_select, infer_shapes=c.infer_broadcast)
