"""The random graph's generators of image operations: convolutions, pooling, resizing, space
and depth moves, ROI operations (registered in ``random_graph_ops``'s table on import)."""
from __future__ import annotations

from tests.support.random_graph import FLOAT, INT, QUANT, Builder, OutSpec, Reject
from tests.support.random_graph_ops import FUSE, generator
from nnscope.runtime.hal.types import OperationType as Op


def _image(b: Builder, types=(FLOAT, QUANT), min_hw=1):
    x = b.tensor(types, ranks=(4,))
    if min(x.shape[1:3]) < min_hw:
        raise Reject(f"image smaller than {min_hw}")
    return x


def _weights(b: Builder, x, shape):
    """Filter and bias constants for input ``x`` (quantised bias scale = input x filter scale)."""
    if x.type == FLOAT:
        return b.const(FLOAT, shape), b.const(FLOAT, shape[:1] if shape[0] > 1 else shape[-1:])
    filt = b.const(QUANT, shape, scale=float(b.choice((0.01, 0.02, 0.05))), zero_point=b.int(100, 150))
    return filt, None


def _bias(b: Builder, x, filt, channels):
    if x.type == FLOAT:
        return b.const(FLOAT, [channels])
    return b.const(INT, [channels], -50, 50, scale=x.scale * filt.scale)


def _window(b: Builder):
    return [b.i32(b.int(1, 2)), b.i32(b.choice((1, 2))), b.i32(b.choice((1, 2)))]  # pad, sw, sh


@generator(Op.CONV_2D)
def _conv(b: Builder, op: Op):
    x = _image(b)
    out_c, kh, kw = b.int(1, 4), b.int(1, 3), b.int(1, 3)
    filt, _ = _weights(b, x, [out_c, kh, kw, x.shape[3]])
    b.emit(op, [x, filt, _bias(b, x, filt, out_c), *_window(b), b.i32(b.choice(FUSE))],
           [b.out(x.type)])


@generator(Op.DEPTHWISE_CONV_2D)
def _depthwise(b: Builder, op: Op):
    x = _image(b)
    multiplier = b.int(1, 2)
    channels = x.shape[3] * multiplier
    filt, _ = _weights(b, x, [1, b.int(1, 3), b.int(1, 3), channels])
    b.emit(op, [x, filt, _bias(b, x, filt, channels), *_window(b), b.i32(multiplier),
                b.i32(b.choice(FUSE))], [b.out(x.type)])


@generator(Op.GROUPED_CONV_2D)
def _grouped(b: Builder, op: Op):
    x = _image(b)
    groups = b.choice([g for g in (1, 2, 3, 4) if x.shape[3] % g == 0])
    out_c = groups * b.int(1, 2)
    filt, _ = _weights(b, x, [out_c, b.int(1, 3), b.int(1, 3), x.shape[3] // groups])
    b.emit(op, [x, filt, _bias(b, x, filt, out_c), *_window(b), b.i32(groups),
                b.i32(b.choice(FUSE)), b.flag(False)], [b.out(x.type)])


@generator(Op.TRANSPOSE_CONV_2D)
def _transpose_conv(b: Builder, op: Op):
    x = _image(b)
    out_c, kh, kw, stride = b.int(1, 3), b.int(1, 3), b.int(1, 3), b.int(1, 2)
    filt, _ = _weights(b, x, [out_c, kh, kw, x.shape[3]])
    shape = b.ints([x.shape[0], x.shape[1] * stride, x.shape[2] * stride, out_c])
    b.emit(op, [x, filt, _bias(b, x, filt, out_c), shape, b.i32(1), b.i32(stride), b.i32(stride),
                b.i32(b.choice(FUSE)), b.flag(False)], [b.out(x.type)])


@generator(Op.FULLY_CONNECTED)
def _fully_connected(b: Builder, op: Op):
    x = b.tensor(ranks=(2,))
    units = b.int(1, 4)
    filt, _ = _weights(b, x, [units, x.shape[1]])
    b.emit(op, [x, filt, _bias(b, x, filt, units), b.i32(b.choice(FUSE))], [b.out(x.type)])


@generator(Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D)
def _pool(b: Builder, op: Op):
    x = _image(b, (FLOAT,) if op == Op.L2_POOL_2D else (FLOAT, QUANT))
    filt = [b.i32(b.int(1, 3)), b.i32(b.int(1, 3))]
    b.emit(op, [x, *_window(b), *filt, b.i32(b.choice(FUSE))], [b.same(x)])


@generator(Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR)
def _resize(b: Builder, op: Op):
    x = _image(b)
    b.emit(op, [x, b.i32(b.int(1, 6)), b.i32(b.int(1, 6)), b.flag(False)], [b.same(x)])


@generator(Op.DEPTH_TO_SPACE)
def _depth_to_space(b: Builder, op: Op):
    x = _image(b)
    blocks = [k for k in (2, 3) if x.shape[3] % (k * k) == 0]
    if not blocks:
        raise Reject("depth not a multiple of block**2")
    b.emit(op, [x, b.i32(b.choice(blocks)), b.flag(False)], [b.same(x)])


@generator(Op.SPACE_TO_DEPTH)
def _space_to_depth(b: Builder, op: Op):
    x = _image(b)
    blocks = [k for k in (1, 2) if x.shape[1] % k == 0 and x.shape[2] % k == 0]
    b.emit(op, [x, b.i32(b.choice(blocks)), b.flag(False)], [b.same(x)])


@generator(Op.SPACE_TO_BATCH_ND)
def _space_to_batch(b: Builder, op: Op):
    x = _image(b)
    block = [b.int(1, 2), b.int(1, 2)]
    pads = [[0, (-x.shape[1]) % block[0]], [b.int(0, 1) * block[1], (-x.shape[2]) % block[1]]]
    b.emit(op, [x, b.ints(block), b.ints(pads), b.flag(False)], [b.same(x)])


@generator(Op.BATCH_TO_SPACE_ND)
def _batch_to_space(b: Builder, op: Op):
    x = _image(b)
    blocks = [(h, w) for h in (1, 2) for w in (1, 2) if x.shape[0] % (h * w) == 0]
    b.emit(op, [x, b.ints(b.choice(blocks)), b.flag(False)], [b.same(x)])


@generator(Op.EMBEDDING_LOOKUP)
def _embedding(b: Builder, op: Op):
    values = b.tensor(ranks=(2, 3))
    lookups = b.const(INT, [b.int(1, 4)], 0, values.shape[0] - 1)
    b.emit(op, [lookups, values], [b.same(values)])


def _rois(b: Builder, x, count):
    height, width = x.shape[1], x.shape[2]
    corners = [sorted(b.rng.uniform(0, width, 2)) + sorted(b.rng.uniform(0, height, 2))
               for _ in range(count)]
    boxes = [[x1, y1, x2, y2] for x1, x2, y1, y2 in corners]
    batches = b.const(INT, value=[b.int(0, x.shape[0] - 1) for _ in range(count)])
    return boxes, batches


@generator(Op.ROI_ALIGN, Op.ROI_POOLING)
def _roi(b: Builder, op: Op):
    x = _image(b, (FLOAT,))
    boxes, batches = _rois(b, x, b.int(1, 3))
    sizes = [b.i32(b.int(1, 3)), b.i32(b.int(1, 3)), b.f32(1.0), b.f32(1.0)]
    sampling = [b.i32(b.int(0, 2)), b.i32(b.int(0, 2))] if op == Op.ROI_ALIGN else []
    b.emit(op, [x, b.const(FLOAT, value=boxes), batches, *sizes, *sampling, b.flag(False)],
           [b.same(x)])


@generator(Op.AXIS_ALIGNED_BBOX_TRANSFORM)
def _bbox_transform(b: Builder, op: Op):
    if FLOAT not in b.types:
        raise Reject("float boxes")
    count, classes = b.int(1, 3), b.int(1, 2)
    image = b.new_input(FLOAT, [1, 8, 8, 1])
    boxes, batches = _rois(b, image, count)
    b.pending.clear()
    deltas = b.tensor((FLOAT,), shape=[count, 4 * classes], low=-0.5, high=0.5, fresh=0.5)
    info = b.const(FLOAT, value=[[8.0, 8.0]])
    b.emit(op, [b.const(FLOAT, value=boxes), deltas, batches, info], [OutSpec(FLOAT)])
