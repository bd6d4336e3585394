"""Simple maths: ABS, NEG, EXP, LOG, RSQRT, SIN, SQRT, FLOOR, POW, MAXIMUM, MINIMUM, CAST, RANK,
FILL (AOSP ``Elementwise.cpp``, ``Neg.cpp``, ``Pow.cpp``, ``Maximum.cpp``, ``Cast.cpp``,
``Rank.cpp``, ``Fill.cpp``).

Unary functions take one FLOAT16/FLOAT32 tensor (ABS and NEG also TENSOR_INT32); float16 is
computed through float32. POW, MAXIMUM and MINIMUM broadcast two tensors; quant8 MAXIMUM/MINIMUM
requantize both inputs to the output's parameters. CAST converts element values (quantisation
parameters are ignored; float to integer truncates, and to quant8 saturates first) and keeps the
shape. RANK gives an INT32 scalar; FILL makes a tensor of the shape given by a TENSOR_INT32.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> f = Operand(T.TENSOR_FLOAT32, (2,)); i = Operand(T.TENSOR_INT32, (2,))
    >>> ctx = OpContext(Operation(O.CAST, (0,), (1,)), [np.float32([-1.7, 2.9])], [f], [i])
    >>> execute_cast(ctx)[0].tolist()
    [-1, 2]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import OperandType as T, OperationType, numpy_dtype
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.budget import OutputPlan
from nnscope.runtime.ops.registry import OpContext, register

_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_SIGNED_TYPES = (*_FLOATS, T.TENSOR_INT32)
_MINMAX_TYPES = (*_SIGNED_TYPES, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_CAST_CONVERTIBLE = (*_SIGNED_TYPES, T.TENSOR_QUANT8_ASYMM)
#: CAST between identical types only (a copy).
_CAST_IDENTITY = (T.TENSOR_BOOL8, T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM,
                  T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_RANK_TYPES = (*_MINMAX_TYPES, T.TENSOR_BOOL8, T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT16_ASYMM,
               T.TENSOR_QUANT16_SYMM, T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
_FILL_VALUE = {T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_FLOAT16: T.FLOAT16, T.TENSOR_INT32: T.INT32}


# ----------------------------------------------------------------------------- validators
def _validate_unary(allowed):
    def validate(inputs, outputs) -> None:
        c.expect_count(inputs, 1, "inputs")
        c.expect_count(outputs, 1, "outputs")
        in_type = c.expect_type(inputs, 0, allowed)
        c.expect_same_type(outputs, 0, in_type, "output")
    return validate


def _validate_cast(inputs, outputs) -> None:
    c.expect_count(inputs, 1, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _CAST_CONVERTIBLE + _CAST_IDENTITY)
    if in_type in _CAST_IDENTITY:
        c.expect_same_type(outputs, 0, in_type, "output")
    else:
        c.expect_type(outputs, 0, _CAST_CONVERTIBLE, "output")
    known = [o.dimensions for o in (inputs[0], outputs[0]) if o.dimensions and 0 not in o.dimensions]
    c.expect(len(known) < 2 or known[0] == known[1],
             f"output 0: shape {list(outputs[0].dimensions)} differs from input shape "
             f"{list(inputs[0].dimensions)}")


def _validate_rank(inputs, outputs) -> None:
    c.expect_count(inputs, 1, "inputs")
    c.expect_count(outputs, 1, "outputs")
    c.expect_type(inputs, 0, _RANK_TYPES)
    c.expect_type(outputs, 0, T.INT32, "output")


def _validate_fill(inputs, outputs) -> None:
    c.expect_count(inputs, 2, "inputs")
    c.expect_count(outputs, 1, "outputs")
    c.expect_type(inputs, 0, T.TENSOR_INT32)
    c.expect_rank(inputs, 0, exact=1)
    out_type = c.expect_type(outputs, 0, tuple(_FILL_VALUE), "output")
    c.expect_type(inputs, 1, _FILL_VALUE[out_type])


# ----------------------------------------------------------------------------- kernels
def _float_unary_kernel(func):
    def execute(ctx: OpContext) -> list:
        x = ctx.inputs[0]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [func(x.astype(np.float32)).astype(x.dtype)]
    return execute


def _rsqrt(x):
    return np.float32(1.0) / np.sqrt(x)


def _signed_unary_kernel(func):
    def execute(ctx: OpContext) -> list:
        x = ctx.inputs[0]
        if x.dtype == np.int32:  # wraps at INT32_MIN like C++
            return [func(x)]
        return [func(x.astype(np.float32)).astype(x.dtype)]
    return execute


def execute_pow(ctx: OpContext) -> list:
    base, exponent = ctx.inputs
    c.broadcast_shape(base, exponent)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = np.power(base.astype(np.float32), exponent.astype(np.float32))
    return [out.astype(base.dtype)]


def _minmax_kernel(ufunc):
    def execute(ctx: OpContext) -> list:
        a, b = ctx.inputs
        c.broadcast_shape(a, b)
        out = ctx.output_operands[0]
        if c.is_quant8(out.type):
            a = c.requantize(a, ctx.input_operands[0], out)
            b = c.requantize(b, ctx.input_operands[1], out)
        return [ufunc(a, b)]
    return execute


def execute_cast(ctx: OpContext) -> list:
    x = ctx.inputs[0]
    dtype = numpy_dtype(ctx.output_operands[0].type)
    if x.dtype == dtype:
        return [x.copy()]
    if dtype.kind in "iu" and x.dtype.kind == "f":
        x = np.trunc(x.astype(np.float64))
        if dtype.itemsize == 1:
            return [c.saturate_cast(x, dtype)]
        with np.errstate(invalid="ignore"):
            return [x.astype(dtype)]
    if dtype.kind in "iu" and dtype.itemsize == 1:
        return [c.saturate_cast(x, dtype)]
    return [x.astype(dtype)]


def execute_rank(ctx: OpContext) -> list:
    return [np.array(ctx.inputs[0].ndim, np.int32)]


def execute_fill(ctx: OpContext) -> list:
    dims, value = ctx.inputs
    shape = [int(d) for d in np.asarray(dims).ravel()]
    c.expect(all(d >= 0 for d in shape), f"input 0: negative dimension in {shape}")
    return [np.full(shape, value, dtype=numpy_dtype(ctx.output_operands[0].type))]


_FAMILY = "simple_math"
def _infer_fill(ctx: OpContext) -> OutputPlan:
    dims = np.asarray(ctx.inputs[0]).ravel().tolist()
    if any(d < 0 for d in dims):
        raise c.OpValidationError(f"input 0: negative dimensions {dims}")
    return OutputPlan([tuple(dims)])


for _type, _func in ((OperationType.EXP, np.exp), (OperationType.LOG, np.log),
                     (OperationType.RSQRT, _rsqrt), (OperationType.SIN, np.sin),
                     (OperationType.SQRT, np.sqrt), (OperationType.FLOOR, np.floor)):
    register(_type, _FAMILY, _validate_unary(_FLOATS), _float_unary_kernel(_func))
register(OperationType.ABS, _FAMILY, _validate_unary(_SIGNED_TYPES), _signed_unary_kernel(np.abs))
register(OperationType.NEG, _FAMILY, _validate_unary(_SIGNED_TYPES),
         _signed_unary_kernel(np.negative))
register(OperationType.POW, _FAMILY, c.same_type_binary(_FLOATS), execute_pow, infer_shapes=c.infer_broadcast)
register(OperationType.MAXIMUM, _FAMILY, c.same_type_binary(_MINMAX_TYPES), _minmax_kernel(np.maximum),
         infer_shapes=c.infer_broadcast)
register(OperationType.MINIMUM, _FAMILY, c.same_type_binary(_MINMAX_TYPES), _minmax_kernel(np.minimum),
         infer_shapes=c.infer_broadcast)
register(OperationType.CAST, _FAMILY, _validate_cast, execute_cast)
register(OperationType.RANK, _FAMILY, _validate_rank, execute_rank)
register(OperationType.FILL, _FAMILY, _validate_fill, execute_fill, infer_shapes=_infer_fill)
