"""Reductions: MEAN, REDUCE_SUM, REDUCE_PROD, REDUCE_MAX, REDUCE_MIN, REDUCE_ALL, REDUCE_ANY,
ARGMAX, ARGMIN, TOPK_V2 (AOSP ``Reduce.cpp``, ``Mean.cpp`` (in ``OperationsUtils``),
``ArgMinMax.cpp``, ``TopK_V2.cpp``).

The reductions take a tensor, a TENSOR_INT32 of axes (negative counts from the end, repeats
allowed) and keep_dims (INT32 for MEAN, BOOL for REDUCE_*). Reducing every dimension without
keep_dims gives shape [1], as NNAPI specifies. Float16 is accumulated in float32. Quant8 MEAN
averages the real values and requantizes to the output's parameters; quant8 REDUCE_MAX/MIN work
on the stored values (input and output share their parameters). ARGMAX/ARGMIN give TENSOR_INT32
indices of the first extreme value along one axis. TOPK_V2 gives the k largest values of the last
dimension and their indices, ties in index order.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> f = Operand(T.TENSOR_FLOAT32, (2, 2)); axes = Operand(T.TENSOR_INT32, (1,))
    >>> ctx = OpContext(Operation(O.REDUCE_SUM, (0, 1, 2), (3,)),
    ...                 [np.float32([[1, 2], [3, 4]]), np.int32([-1]), False],
    ...                 [f, axes, Operand(T.BOOL)], [Operand(T.TENSOR_FLOAT32, (2,))])
    >>> execute_reduce_sum(ctx)[0].tolist()
    [3.0, 7.0]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import OperandType as T, OperationType
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.registry import OpContext, register

_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_QUANT = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_ARG_TYPES = (*_FLOATS, T.TENSOR_INT32, *_QUANT)


# ----------------------------------------------------------------------------- validators
def _validate_reduce(allowed, keep_dims_type: T):
    def validate(inputs, outputs) -> None:
        c.expect_count(inputs, 3, "inputs")
        c.expect_count(outputs, 1, "outputs")
        in_type = c.expect_type(inputs, 0, allowed)
        c.expect_type(inputs, 1, T.TENSOR_INT32)
        c.expect_rank(inputs, 1, exact=1)
        c.expect_type(inputs, 2, keep_dims_type)
        c.expect_same_type(outputs, 0, in_type, "output")
        c.expect_rank(inputs, 0, max_rank=4)
    return validate


def _validate_arg(inputs, outputs) -> None:
    c.expect_count(inputs, 2, "inputs")
    c.expect_count(outputs, 1, "outputs")
    c.expect_type(inputs, 0, _ARG_TYPES)
    c.expect_type(inputs, 1, T.INT32)
    c.expect_type(outputs, 0, T.TENSOR_INT32, "output")


def _validate_topk(inputs, outputs) -> None:
    c.expect_count(inputs, 2, "inputs")
    c.expect_count(outputs, 2, "outputs")
    in_type = c.expect_type(inputs, 0, _ARG_TYPES)
    c.expect_type(inputs, 1, T.INT32)
    c.expect_same_type(outputs, 0, in_type, "output")
    c.expect_type(outputs, 1, T.TENSOR_INT32, "output")


# ----------------------------------------------------------------------------- kernels
def reduction_axes(axes: np.ndarray, rank: int) -> tuple[int, ...]:
    """Sorted distinct non-negative axes from NNAPI's axis list (negatives count from the end)."""
    values = [int(a) for a in np.asarray(axes).ravel()]
    return tuple(sorted({c.normalize_axis(a, rank, "input 1") for a in values}))


def _reduce(x: np.ndarray, axes, keep_dims, func) -> np.ndarray:
    axis = reduction_axes(axes, x.ndim)
    c.expect(all(x.shape[a] > 0 for a in axis), f"input 0: cannot reduce an empty axis of "
             f"shape {list(x.shape)}")
    out = np.asarray(func(x, axis=axis, keepdims=bool(keep_dims)))
    return out.reshape(1) if out.ndim == 0 else out


def _float_reduce_kernel(func):
    def execute(ctx: OpContext) -> list:
        x, axes, keep_dims = ctx.inputs
        with np.errstate(over="ignore"):
            return [_reduce(x.astype(np.float32), axes, keep_dims, func).astype(x.dtype)]
    return execute


def _stored_reduce_kernel(func):
    """Reductions on stored values: max/min (order-preserving on quant8), all/any."""
    def execute(ctx: OpContext) -> list:
        x, axes, keep_dims = ctx.inputs
        return [_reduce(x, axes, keep_dims, func).astype(x.dtype, copy=False)]
    return execute


def execute_mean(ctx: OpContext) -> list:
    x, axes, keep_dims = ctx.inputs
    if x.dtype.kind == "f":
        return [_reduce(x.astype(np.float32), axes, keep_dims, np.mean).astype(x.dtype)]
    real = c.dequantize(x, ctx.input_operands[0], np.float64)
    return [c.quantize(_reduce(real, axes, keep_dims, np.mean), ctx.output_operands[0])]


def _arg_kernel(func):
    def execute(ctx: OpContext) -> list:
        x, axis = ctx.inputs
        axis = c.normalize_axis(axis, x.ndim, "input 1")
        c.expect(x.shape[axis] > 0, f"input 0: axis {axis} of shape {list(x.shape)} is empty")
        out = func(x, axis=axis).astype(np.int32)
        return [out.reshape(1) if out.ndim == 0 else out]
    return execute


def execute_topk(ctx: OpContext) -> list:
    x, k = ctx.inputs
    c.expect(x.ndim >= 1, "input 0: TOPK_V2 needs a tensor of rank >= 1")
    c.expect(1 <= k <= x.shape[-1], f"input 1: k {k} not in [1, {x.shape[-1]}]")
    order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :k]
    return [np.take_along_axis(x, order, axis=-1), order.astype(np.int32)]


execute_reduce_sum = _float_reduce_kernel(np.sum)

_FAMILY = "reduction"
register(OperationType.MEAN, _FAMILY, _validate_reduce((*_FLOATS, *_QUANT), T.INT32), execute_mean)
register(OperationType.REDUCE_SUM, _FAMILY, _validate_reduce(_FLOATS, T.BOOL), execute_reduce_sum)
register(OperationType.REDUCE_PROD, _FAMILY, _validate_reduce(_FLOATS, T.BOOL),
         _float_reduce_kernel(np.prod))
register(OperationType.REDUCE_MAX, _FAMILY, _validate_reduce((*_FLOATS, *_QUANT), T.BOOL),
         _stored_reduce_kernel(np.max))
register(OperationType.REDUCE_MIN, _FAMILY, _validate_reduce((*_FLOATS, *_QUANT), T.BOOL),
         _stored_reduce_kernel(np.min))
register(OperationType.REDUCE_ALL, _FAMILY, _validate_reduce((T.TENSOR_BOOL8,), T.BOOL),
         _stored_reduce_kernel(np.all))
register(OperationType.REDUCE_ANY, _FAMILY, _validate_reduce((T.TENSOR_BOOL8,), T.BOOL),
         _stored_reduce_kernel(np.any))
register(OperationType.ARGMAX, _FAMILY, _validate_arg, _arg_kernel(np.argmax))
register(OperationType.ARGMIN, _FAMILY, _validate_arg, _arg_kernel(np.argmin))
register(OperationType.TOPK_V2, _FAMILY, _validate_topk, execute_topk)
