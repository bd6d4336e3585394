"""Slicing and rearranging: SLICE, STRIDED_SLICE, GATHER, SPLIT, TILE, TRANSPOSE, SQUEEZE,
EXPAND_DIMS, PAD_V2 (AOSP ``Slice.cpp``, ``StridedSlice.cpp``, ``Gather.cpp``, ``Split.cpp``,
``Tile.cpp``, ``Transpose.cpp``, ``Squeeze.cpp``, ``ExpandDims.cpp``, ``Pad.cpp``).

Values are moved, never changed, so quant8 outputs keep the input's parameters. Axes may be
negative (counting from the end). SLICE's size -1 means "to the end". STRIDED_SLICE follows
TFLite's clamping of begin/end with begin_mask, end_mask and shrink_axis_mask; a shrunk axis
must select exactly one element with a positive stride, as AOSP checks. A result of rank 0 (all
axes shrunk or squeezed) has shape [1], as in AOSP. TRANSPOSE's permutation
and SQUEEZE's axes are optional (omitted: reverse the axes; squeeze every size-1 axis). PAD_V2's
pad value is a FLOAT32/FLOAT16 scalar, or for quant8 an INT32 already in the quantized domain.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> f = Operand(T.TENSOR_FLOAT32, (2, 3)); i = Operand(T.TENSOR_INT32, (2,))
    >>> ctx = OpContext(Operation(O.SLICE, (0, 1, 2), (3,)),
    ...                 [np.arange(6, dtype=np.float32).reshape(2, 3), np.int32([0, 1]),
    ...                  np.int32([-1, 2])], [f, i, i], [f])
    >>> execute_slice(ctx)[0].tolist()
    [[1.0, 2.0], [4.0, 5.0]]
"""
from __future__ import annotations

import math

import numpy as np

from nnscope.runtime.hal.types import OperandType as T, OperationType
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.budget import OutputPlan
from nnscope.runtime.ops.registry import OpContext, register

_QUANT = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, *_QUANT)
_NO_INT_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, *_QUANT)
_PAD_VALUE = {T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_FLOAT16: T.FLOAT16,
              T.TENSOR_QUANT8_ASYMM: T.INT32, T.TENSOR_QUANT8_ASYMM_SIGNED: T.INT32}


def _validator(allowed, params, n_outputs=1, optional_last=False):
    """Input 0 of ``allowed`` then ``params`` (operand types); outputs like input 0."""
    def validate(inputs, outputs) -> None:
        counts = (len(params), len(params) + 1) if optional_last else len(params) + 1
        c.expect_count(inputs, counts, "inputs")
        if n_outputs is not None:
            c.expect_count(outputs, n_outputs, "outputs")
        in_type = c.expect_type(inputs, 0, allowed)
        for index, param in enumerate(params, start=1):
            if index < len(inputs):
                c.expect_type(inputs, index, param)
        for index in range(len(outputs)):
            c.expect_same_type(outputs, index, in_type, "output")
        c.expect_rank(inputs, 0, max_rank=4)
    return validate


def _ints(values) -> list[int]:
    return [int(v) for v in np.asarray(values).ravel()]


def _expect_length(values: list[int], rank: int, what: str) -> None:
    c.expect(len(values) == rank, f"{what}: expected {rank} values, got {len(values)}")


# ----------------------------------------------------------------------------- SLICE
def execute_slice(ctx: OpContext) -> list:
    x, begin, size = ctx.inputs
    begin, size = _ints(begin), _ints(size)
    _expect_length(begin, x.ndim, "input 1")
    _expect_length(size, x.ndim, "input 2")
    index = []
    for axis, (start, length, dim) in enumerate(zip(begin, size, x.shape)):
        length = dim - start if length == -1 else length
        c.expect(0 <= start and 0 <= length and start + length <= dim,
                 f"axis {axis}: slice [{start}, {start + length}) outside dimension {dim}")
        index.append(slice(start, start + length))
    return [x[tuple(index)].copy()]


# ----------------------------------------------------------------------------- STRIDED_SLICE
def _clamped_index(index: int, dim: int, positive: bool) -> int:
    """TFLite/AOSP ``ClampedIndex``."""
    if positive:
        return dim if index >= dim else min(max(index, -dim), dim) % dim if dim else 0
    return -1 if index < -dim else min(max(index, -dim), dim - 1) % dim if dim else -1


def _strided_axis(x, axis, begin, end, stride, masks):
    begin_mask, end_mask, shrink_mask = masks
    dim = x.shape[axis]
    c.expect(stride != 0, f"axis {axis}: stride must not be 0")
    positive = stride > 0
    start = (0 if positive else dim - 1) if begin_mask >> axis & 1 else \
        _clamped_index(begin, dim, positive)
    stop = (dim if positive else -1) if end_mask >> axis & 1 else _clamped_index(end, dim, positive)
    count = max(0, math.ceil((stop - start) / stride))
    if shrink_mask >> axis & 1:
        c.expect(positive, f"axis {axis}: a shrunk axis needs a positive stride")
        c.expect(count == 1, f"axis {axis}: a shrunk axis must select one element, got {count}")
    return np.take(x, start + stride * np.arange(count), axis=axis)


def execute_strided_slice(ctx: OpContext) -> list:
    x, begin, end, strides, *masks = ctx.inputs
    begin, end, strides = _ints(begin), _ints(end), _ints(strides)
    for what, values in (("input 1", begin), ("input 2", end), ("input 3", strides)):
        _expect_length(values, x.ndim, what)
    out = x
    for axis in range(x.ndim):
        out = _strided_axis(out, axis, begin[axis], end[axis], strides[axis], masks)
    shrunk = tuple(axis for axis in range(x.ndim) if masks[2] >> axis & 1)
    return [out.reshape([d for a, d in enumerate(out.shape) if a not in shrunk] or [1])]


# ----------------------------------------------------------------------------- GATHER, SPLIT
def execute_gather(ctx: OpContext) -> list:
    x, axis, indices = ctx.inputs
    axis = c.normalize_axis(axis, x.ndim, "input 1")
    dim = x.shape[axis]
    c.expect(bool(((indices >= 0) & (indices < dim)).all()),
             f"input 2: indices must be in [0, {dim})")
    return [np.take(x, indices, axis=axis)]


def execute_split(ctx: OpContext) -> list:
    x, axis, num_splits = ctx.inputs
    axis = c.normalize_axis(axis, x.ndim, "input 1")
    c.expect(num_splits == len(ctx.output_operands),
             f"input 2: num_splits {num_splits} but {len(ctx.output_operands)} outputs")
    c.expect(num_splits > 0 and x.shape[axis] % num_splits == 0,
             f"input 2: dimension {x.shape[axis]} does not split into {num_splits} parts")
    return [part.copy() for part in np.split(x, num_splits, axis=axis)]


# ----------------------------------------------------------------------------- TILE, TRANSPOSE
def execute_tile(ctx: OpContext) -> list:
    x, multiples = ctx.inputs
    multiples = _ints(multiples)
    _expect_length(multiples, x.ndim, "input 1")
    c.expect(all(m > 0 for m in multiples), f"input 1: multiples must be positive, got {multiples}")
    return [np.tile(x, multiples)]


def execute_transpose(ctx: OpContext) -> list:
    x = ctx.inputs[0]
    perm = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    if perm is None or np.asarray(perm).size == 0:
        return [np.ascontiguousarray(x.T)]
    perm = _ints(perm)
    c.expect(sorted(perm) == list(range(x.ndim)),
             f"input 1: {perm} is not a permutation of {x.ndim} axes")
    return [np.ascontiguousarray(x.transpose(perm))]


# ----------------------------------------------------------------------------- SQUEEZE, EXPAND_DIMS
def execute_squeeze(ctx: OpContext) -> list:
    x = ctx.inputs[0]
    dims = ctx.inputs[1] if len(ctx.inputs) > 1 else None
    if dims is None or np.asarray(dims).size == 0:
        axes = tuple(a for a, d in enumerate(x.shape) if d == 1)
    else:
        axes = tuple({c.normalize_axis(a, x.ndim, "input 1") for a in _ints(dims)})
        for axis in axes:
            c.expect(x.shape[axis] == 1, f"input 1: axis {axis} has size {x.shape[axis]}, not 1")
    return [x.reshape([d for a, d in enumerate(x.shape) if a not in axes] or [1])]


def execute_expand_dims(ctx: OpContext) -> list:
    x, axis = ctx.inputs
    axis = c.normalize_axis(axis, x.ndim + 1, "input 1")
    return [np.expand_dims(x, axis)]


# ----------------------------------------------------------------------------- PAD_V2
def _validate_pad_v2(inputs, outputs) -> None:
    c.expect_count(inputs, 3, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _NO_INT_TYPES)
    c.expect_type(inputs, 1, T.TENSOR_INT32)
    c.expect_rank(inputs, 1, exact=2)
    c.expect_type(inputs, 2, _PAD_VALUE[in_type])
    c.expect_same_type(outputs, 0, in_type, "output")
    c.expect_rank(inputs, 0, max_rank=4)


def execute_pad_v2(ctx: OpContext) -> list:
    x, paddings, value = ctx.inputs
    paddings = c.checked_paddings(x, paddings)
    if x.dtype.kind in "iu":
        lo, hi = c.dtype_range(x.dtype)
        c.expect(lo <= value <= hi, f"input 2: pad value {value} outside [{lo}, {hi}]")
    return [c.constant_pad(x, paddings.tolist(), value)]


_FAMILY = "shape"
_I, _TI = T.INT32, T.TENSOR_INT32
def _infer_gather(ctx: OpContext) -> OutputPlan:
    x, axis, indices = ctx.inputs[0], int(ctx.inputs[1]), np.asarray(ctx.inputs[2])
    if not -x.ndim <= axis < x.ndim:
        raise c.OpValidationError(f"input 1: axis {axis} out of range for rank {x.ndim}")
    return OutputPlan([(x.size // max(x.shape[axis], 1) * indices.size,)])


def _infer_tile(ctx: OpContext) -> OutputPlan:
    x, multiples = ctx.inputs[0], np.asarray(ctx.inputs[1]).ravel().tolist()
    if len(multiples) != x.ndim or any(m < 0 for m in multiples):
        raise c.OpValidationError(f"input 1: multiples {multiples} do not fit rank {x.ndim}")
    return OutputPlan([tuple(d * m for d, m in zip(x.shape, multiples))])


register(OperationType.SLICE, _FAMILY, _validator(_TYPES, (_TI, _TI)), execute_slice)
register(OperationType.STRIDED_SLICE, _FAMILY,
         _validator(_NO_INT_TYPES, (_TI, _TI, _TI, _I, _I, _I)), execute_strided_slice)
register(OperationType.GATHER, _FAMILY, _validator(_TYPES, (_I, _TI)), execute_gather,
         infer_shapes=_infer_gather)
register(OperationType.SPLIT, _FAMILY, _validator(_TYPES, (_I, _I), n_outputs=None), execute_split)
register(OperationType.TILE, _FAMILY, _validator(_TYPES, (_TI,)), execute_tile, infer_shapes=_infer_tile)
register(OperationType.TRANSPOSE, _FAMILY, _validator(_NO_INT_TYPES, (_TI,), optional_last=True),
         execute_transpose)
register(OperationType.SQUEEZE, _FAMILY, _validator(_NO_INT_TYPES, (_TI,), optional_last=True),
         execute_squeeze)
register(OperationType.EXPAND_DIMS, _FAMILY, _validator(_TYPES, (_I,)), execute_expand_dims)
register(OperationType.PAD_V2, _FAMILY, _validate_pad_v2, execute_pad_v2, infer_shapes=c.infer_pad)
