"""Broadcasting binary arithmetic: ADD, MUL, SUB, DIV (AOSP ``common/operations/Broadcast.cpp``).

Inputs are (tensor a, tensor b, INT32 fused activation); shapes broadcast numpy-style up to
rank 4. Float16 is computed through float32 like AOSP; quant8 (asymm and signed) reproduces
TFLite's fixed-point reference kernels bit for bit; TENSOR_INT32 needs activation NONE and DIV on
int32 is floor division with x / 0 == 0.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> t = Operand(T.TENSOR_FLOAT32, (2,)); s = Operand(T.INT32)
    >>> ctx = OpContext(Operation(O.ADD, (0, 1, 2), (3,)),
    ...                 [np.float32([1, -5]), np.float32([2, 2]), 1], [t, t, s], [t])
    >>> execute_add(ctx)[0].tolist()
    [3.0, 0.0]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import FuseCode, Operand, OperandType as T, OperationType, numpy_dtype
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.registry import OpContext, register

_ARITH_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM,
                T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)
_DIV_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32)


def _validator(allowed):
    def validate(inputs, outputs) -> None:
        c.expect_count(inputs, 3, "inputs")
        c.expect_count(outputs, 1, "outputs")
        in_type = c.expect_type(inputs, 0, allowed)
        c.expect_same_type(inputs, 1, in_type)
        c.expect_type(inputs, 2, T.INT32)
        c.expect_same_type(outputs, 0, in_type, "output")
        c.expect_rank(inputs, 0, max_rank=4)
        c.expect_rank(inputs, 1, max_rank=4)
    return validate


def _float_binary(ufunc, a, b, fuse):
    with np.errstate(divide="ignore", invalid="ignore"):  # x / 0 gives inf/nan like C++
        if a.dtype == np.float16:
            out = ufunc(a.astype(np.float32), b.astype(np.float32))
            return c.apply_fused_activation(out, fuse).astype(np.float16)
        return c.apply_fused_activation(ufunc(a, b), fuse)


def _int32_binary(func, a, b, fuse):
    c.expect(fuse == FuseCode.NONE, "input 2: TENSOR_INT32 requires fused activation NONE")
    return func(a.astype(np.int64), b.astype(np.int64)).astype(np.int32)


def _floor_div(a, b):
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.floor_divide(a, safe))


def _f32(value: float) -> float:
    return float(np.float32(value))


def _quant_add(a, b, fuse, op_a: Operand, op_b: Operand, op_out: Operand, negate_b=False):
    """TFLite (Broadcast)Add/Sub for quant8: left shift 20, per-input and output multipliers."""
    s_a, s_b, s_out = _f32(op_a.scale), _f32(op_b.scale), _f32(op_out.scale)
    twice_max = _f32(2.0 * max(s_a, s_b))
    m_a, sh_a = c.quantize_multiplier_smaller_than_one(s_a / twice_max)
    m_b, sh_b = c.quantize_multiplier_smaller_than_one(s_b / twice_max)
    m_o, sh_o = c.quantize_multiplier_smaller_than_one(twice_max / _f32((1 << 20) * s_out))
    if negate_b:
        m_b = -m_b
    x_a = (a.astype(np.int64) - op_a.zero_point) * (1 << 20)
    x_b = (b.astype(np.int64) - op_b.zero_point) * (1 << 20)
    total = (c.multiply_by_quantized_multiplier(x_a, m_a, sh_a)
             + c.multiply_by_quantized_multiplier(x_b, m_b, sh_b))
    raw = c.multiply_by_quantized_multiplier(total, m_o, sh_o) + op_out.zero_point
    return _clamp_quant(raw, fuse, op_out)


def _quant_mul(a, b, fuse, op_a: Operand, op_b: Operand, op_out: Operand):
    """TFLite BroadcastMul4DSlow for quant8: product rescaled by one multiplier < 1."""
    product_scale = _f32(_f32(op_a.scale) * _f32(op_b.scale))
    m_o, sh_o = c.quantize_multiplier_smaller_than_one(product_scale / _f32(op_out.scale))
    prod = (a.astype(np.int64) - op_a.zero_point) * (b.astype(np.int64) - op_b.zero_point)
    raw = c.multiply_by_quantized_multiplier(prod, m_o, sh_o) + op_out.zero_point
    return _clamp_quant(raw, fuse, op_out)


def _clamp_quant(raw, fuse, op_out: Operand):
    dtype = numpy_dtype(op_out.type)
    lo, hi = c.quantized_activation_range(fuse, op_out.scale, op_out.zero_point, dtype)
    return c.saturate_cast(raw, dtype, lo, hi)


def _make_kernel(ufunc, int_func, quant_func):
    def execute(ctx: OpContext) -> list:
        a, b, fuse = ctx.inputs
        kind = a.dtype.kind
        if kind == "f":
            return [_float_binary(ufunc, a, b, fuse)]
        if kind == "i" and a.dtype.itemsize == 4:
            return [_int32_binary(int_func, a, b, fuse)]
        op_a, op_b = ctx.input_operands[0], ctx.input_operands[1]
        return [quant_func(a, b, fuse, op_a, op_b, ctx.output_operands[0])]
    return execute


def _no_quant(*_args):
    raise c.OpValidationError("quantized tensors are not supported by DIV")


def _quant_sub(a, b, fuse, op_a, op_b, op_out):
    return _quant_add(a, b, fuse, op_a, op_b, op_out, negate_b=True)


execute_add = _make_kernel(np.add, np.add, _quant_add)
execute_sub = _make_kernel(np.subtract, np.subtract, _quant_sub)
execute_mul = _make_kernel(np.multiply, np.multiply, _quant_mul)
execute_div = _make_kernel(np.divide, _floor_div, _no_quant)


_F32 = np.dtype(np.float32)


def _fast_add(ctx: OpContext) -> list:
    """ADD with the float32 path first: the common case costs one ufunc call."""
    a, b, fuse = ctx.inputs
    if fuse == 0 and a.dtype is _F32:  # identity: numpy's float32 dtype is a singleton
        return [np.add(a, b)]
    return execute_add(ctx)


def _validate_mul(inputs, outputs) -> None:
    _validator(_ARITH_TYPES)(inputs, outputs)
    if c.is_quant8(inputs[0].type):
        product = _f32(_f32(inputs[0].scale) * _f32(inputs[1].scale))
        c.expect(_f32(outputs[0].scale) > product,
                 "output 0: quantized MUL needs output scale > input0 scale * input1 scale")


register(OperationType.ADD, "elementwise", _validator(_ARITH_TYPES), _fast_add, infer_shapes=c.infer_broadcast)
register(OperationType.SUB, "elementwise", _validator(_ARITH_TYPES), execute_sub, infer_shapes=c.infer_broadcast)
register(OperationType.MUL, "elementwise", _validate_mul, execute_mul, infer_shapes=c.infer_broadcast)
register(OperationType.DIV, "elementwise", _validator(_DIV_TYPES), execute_div, infer_shapes=c.infer_broadcast)
