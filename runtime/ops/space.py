"""Moving data between space, depth and batch: SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND,
DEPTH_TO_SPACE, SPACE_TO_DEPTH, CHANNEL_SHUFFLE (AOSP ``SpaceToBatch.cpp``,
``BatchToSpace.cpp``, ``DepthToSpace.cpp``, ``SpaceToDepth.cpp``, ``ChannelShuffle.cpp``).

The first four take a 4-D tensor and an optional BOOL layout (true = NCHW), as TensorFlow defines
them: SPACE_TO_BATCH_ND pads the spatial dimensions (with the zero point for quant8) and moves
``block_h x block_w`` tiles into the batch (new batch index ``(i * block_w + j) * N + n``);
BATCH_TO_SPACE_ND undoes that (no crops in NNAPI); DEPTH_TO_SPACE/SPACE_TO_DEPTH use TFLite's
depth order ``(i * block + j) * C + c``. CHANNEL_SHUFFLE splits one axis (negative counts from
the end) into ``num_groups`` groups and interleaves them. Values are only moved, so quant8
outputs keep the input's parameters.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> f = Operand(T.TENSOR_FLOAT32, (1, 1, 1, 4)); i = Operand(T.INT32)
    >>> ctx = OpContext(Operation(O.DEPTH_TO_SPACE, (0, 1), (2,)),
    ...                 [np.float32([[[[1, 2, 3, 4]]]]), 2], [f, i], [f])
    >>> execute_depth_to_space(ctx)[0].reshape(2, 2).tolist()
    [[1.0, 2.0], [3.0, 4.0]]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import OperandType as T, OperationType
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.budget import OutputPlan
from nnscope.runtime.ops.window import from_nhwc, to_nhwc
from nnscope.runtime.ops.registry import OpContext, register

_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def _validator(params, layout: bool):
    """Input 0 (4-D when ``layout``) then ``params``, then an optional BOOL layout."""
    def validate(inputs, outputs) -> None:
        counts = (len(params) + 1, len(params) + 2) if layout else len(params) + 1
        c.expect_count(inputs, counts, "inputs")
        c.expect_count(outputs, 1, "outputs")
        in_type = c.expect_type(inputs, 0, _TYPES)
        for index, param in enumerate(params, start=1):
            c.expect_type(inputs, index, param)
        if layout:
            c.expect_rank(inputs, 0, exact=4)
            if len(inputs) == len(params) + 2:
                c.expect_type(inputs, len(params) + 1, T.BOOL)
        c.expect_same_type(outputs, 0, in_type, "output")
    return validate


def _layout(ctx: OpContext, position: int) -> bool:
    """The NCHW flag at ``position`` (absent or omitted: NHWC); input 0 must be 4-D."""
    c.expect(ctx.inputs[0].ndim == 4, f"input 0: expected rank 4, got {ctx.inputs[0].ndim}")
    return len(ctx.inputs) > position and bool(ctx.inputs[position])


def _block(values, what: str) -> tuple[int, int]:
    block = [int(v) for v in np.asarray(values).ravel()]
    c.expect(len(block) == 2 and min(block) >= 1, f"{what}: expected 2 block sizes >= 1, got {block}")
    return block[0], block[1]


# ----------------------------------------------------------------------------- kernels (NHWC)
def space_to_batch(x: np.ndarray, block_h: int, block_w: int, pads, pad_value) -> np.ndarray:
    x = c.constant_pad(x, ((0, 0), tuple(pads[0]), tuple(pads[1]), (0, 0)), pad_value)
    n, h, w, ch = x.shape
    c.expect(h % block_h == 0 and w % block_w == 0,
             f"padded spatial size {h}x{w} is not a multiple of block {block_h}x{block_w}")
    tiles = x.reshape(n, h // block_h, block_h, w // block_w, block_w, ch)
    return tiles.transpose(2, 4, 0, 1, 3, 5).reshape(n * block_h * block_w, h // block_h,
                                                     w // block_w, ch)


def batch_to_space(x: np.ndarray, block_h: int, block_w: int) -> np.ndarray:
    n, h, w, ch = x.shape
    c.expect(n % (block_h * block_w) == 0,
             f"batch {n} is not a multiple of block {block_h}x{block_w}")
    batch = n // (block_h * block_w)
    tiles = x.reshape(block_h, block_w, batch, h, w, ch)
    return tiles.transpose(2, 3, 0, 4, 1, 5).reshape(batch, h * block_h, w * block_w, ch)


def depth_to_space(x: np.ndarray, block: int) -> np.ndarray:
    n, h, w, ch = x.shape
    c.expect(ch % (block * block) == 0, f"depth {ch} is not a multiple of block {block} squared")
    depth = ch // (block * block)
    tiles = x.reshape(n, h, w, block, block, depth)
    return tiles.transpose(0, 1, 3, 2, 4, 5).reshape(n, h * block, w * block, depth)


def space_to_depth(x: np.ndarray, block: int) -> np.ndarray:
    n, h, w, ch = x.shape
    c.expect(h % block == 0 and w % block == 0,
             f"spatial size {h}x{w} is not a multiple of block {block}")
    tiles = x.reshape(n, h // block, block, w // block, block, ch)
    return tiles.transpose(0, 1, 3, 2, 4, 5).reshape(n, h // block, w // block, ch * block * block)


def execute_space_to_batch(ctx: OpContext) -> list:
    x, block, paddings = ctx.inputs[:3]
    nchw = _layout(ctx, 3)
    block_h, block_w = _block(block, "input 1")
    pads = np.asarray(paddings).reshape(-1, 2)
    c.expect(pads.shape == (2, 2) and bool((pads >= 0).all()),
             f"input 2: expected non-negative paddings of shape [2, 2], got {pads.tolist()}")
    operand = ctx.input_operands[0]
    pad_value = operand.zero_point if c.is_quant8(operand.type) else 0
    out = space_to_batch(to_nhwc(x, nchw), block_h, block_w, pads.tolist(), pad_value)
    return [from_nhwc(out, nchw)]


def execute_batch_to_space(ctx: OpContext) -> list:
    x, block = ctx.inputs[:2]
    nchw = _layout(ctx, 2)
    out = batch_to_space(to_nhwc(x, nchw), *_block(block, "input 1"))
    return [from_nhwc(out, nchw)]


def _block_size_kernel(func):
    def execute(ctx: OpContext) -> list:
        x, block = ctx.inputs[:2]
        c.expect(block >= 1, f"input 1: block size must be >= 1, got {block}")
        nchw = _layout(ctx, 2)
        return [from_nhwc(func(to_nhwc(x, nchw), block), nchw)]
    return execute


def execute_channel_shuffle(ctx: OpContext) -> list:
    x, groups, axis = ctx.inputs
    axis = c.normalize_axis(axis, x.ndim, "input 2")
    channels = x.shape[axis]
    c.expect(groups >= 1 and channels % groups == 0,
             f"input 1: {channels} channels do not split into {groups} groups")
    split = x.shape[:axis] + (groups, channels // groups) + x.shape[axis + 1:]
    shuffled = np.swapaxes(x.reshape(split), axis, axis + 1)
    return [np.ascontiguousarray(shuffled).reshape(x.shape)]


execute_depth_to_space = _block_size_kernel(depth_to_space)
execute_space_to_depth = _block_size_kernel(space_to_depth)

_FAMILY = "space"
def _infer_space_to_batch(ctx: OpContext) -> OutputPlan:
    x, paddings = ctx.inputs[0], np.asarray(ctx.inputs[2]).reshape(-1).tolist()
    if len(paddings) != 4 or min(paddings) < 0:
        raise c.OpValidationError(f"input 2: paddings {paddings} must be 4 non-negative values")
    nchw = len(ctx.inputs) > 3 and bool(ctx.inputs[3])
    spatial = x.shape[2:4] if nchw else x.shape[1:3]
    padded = (spatial[0] + paddings[0] + paddings[1]) * (spatial[1] + paddings[2] + paddings[3])
    return OutputPlan([(x.size // max(spatial[0] * spatial[1], 1) * padded,)])


register(OperationType.SPACE_TO_BATCH_ND, _FAMILY,
         _validator((T.TENSOR_INT32, T.TENSOR_INT32), layout=True), execute_space_to_batch,
         infer_shapes=_infer_space_to_batch)
register(OperationType.BATCH_TO_SPACE_ND, _FAMILY, _validator((T.TENSOR_INT32,), layout=True),
         execute_batch_to_space)
register(OperationType.DEPTH_TO_SPACE, _FAMILY, _validator((T.INT32,), layout=True),
         execute_depth_to_space)
register(OperationType.SPACE_TO_DEPTH, _FAMILY, _validator((T.INT32,), layout=True),
         execute_space_to_depth)
register(OperationType.CHANNEL_SHUFFLE, _FAMILY, _validator((T.INT32, T.INT32), layout=False),
         execute_channel_shuffle)
