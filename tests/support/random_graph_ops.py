"""The random graph's generator table: one function per operation type (see ``random_graph``).

A generator draws inputs and parameters through the :class:`~tests.support.random_graph.Builder`
and calls ``emit``; it raises ``Reject`` when the graph offers nothing that fits. A new operation
type plugs in with ``@generator(Op.X)``; types of the registry without one are in
:data:`NOT_COVERED` with the reason.
"""
from __future__ import annotations

from tests.support.random_graph import BOOL, FLOAT, INT, QUANT, Builder, OutSpec, Reject
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op

GENERATORS: dict = {}

#: Registry operation types with no generator, and why.
NOT_COVERED = {
    Op.RANDOM_MULTINOMIAL: "random samples: devices agree only in distribution, not element-wise",
    Op.BOX_WITH_NMS_LIMIT: "output count depends on the data (needs dynamic output shapes)",
    Op.GENERATE_PROPOSALS: "output count depends on the data (needs dynamic output shapes)",
    Op.DETECTION_POSTPROCESSING: "needs anchors/box encodings of a detector; CTS vectors cover it",
    Op.HEATMAP_MAX_KEYPOINT: "needs ROI boxes plus heatmaps of matching sizes; CTS vectors cover it",
    Op.HASHTABLE_LOOKUP: "needs sorted unique keys and a QUANT8 hits output; CTS vectors cover it",
    Op.IF: "needs referenced subgraphs; the generator builds one main graph only",
    Op.WHILE: "needs referenced subgraphs; the generator builds one main graph only",
    **{op: "recurrent state operands and gate weights: no generator yet" for op in (
        Op.RNN, Op.LSTM, Op.SVDF, Op.BIDIRECTIONAL_SEQUENCE_LSTM, Op.BIDIRECTIONAL_SEQUENCE_RNN,
        Op.UNIDIRECTIONAL_SEQUENCE_LSTM, Op.UNIDIRECTIONAL_SEQUENCE_RNN, Op.QUANTIZED_LSTM,
        Op.QUANTIZED_16BIT_LSTM)},
    Op.LSH_PROJECTION: "no generator yet (hash projections of a weighted input)",
}


def generator(*op_types):
    def register(function):
        for op_type in op_types:
            GENERATORS[op_type] = lambda b, t=op_type: function(b, t)
        return function
    return register


FUSE = (0, 1, 2, 3)


@generator(Op.ABS, Op.EXP, Op.FLOOR, Op.NEG, Op.SIN)
def _float_unary(b: Builder, op: Op):
    x = b.tensor((FLOAT,), low=-2, high=2)
    b.emit(op, [x], [b.same(x)])


@generator(Op.LOG, Op.SQRT, Op.RSQRT)
def _positive_unary(b: Builder, op: Op):
    x = b.new_input(FLOAT, b.random_shape(b.int(1, 4)), 0.1, 3.0) if FLOAT in b.types \
        else b.tensor((FLOAT,), low=0.1, high=3.0)
    b.emit(op, [x], [b.same(x)])


@generator(Op.RELU, Op.RELU1, Op.RELU6)
def _relu(b: Builder, op: Op):
    x = b.tensor()
    b.emit(op, [x], [b.same(x)])


@generator(Op.LOGISTIC, Op.TANH)
def _squash(b: Builder, op: Op):
    x = b.tensor()
    quant = OutSpec(QUANT, 1 / 256, 0) if op == Op.LOGISTIC else OutSpec(QUANT, 1 / 128, 128)
    b.emit(op, [x], [quant if x.type == QUANT else b.same(x)])


@generator(Op.HARD_SWISH)
def _hard_swish(b: Builder, op: Op):
    x = b.tensor()
    b.emit(op, [x], [b.out(x.type)])


@generator(Op.ELU)
def _elu(b: Builder, op: Op):
    x = b.tensor((FLOAT,))
    b.emit(op, [x, b.f32(b.choice((0.5, 1.0, 2.0)))], [b.same(x)])


@generator(Op.ADD, Op.SUB, Op.MUL, Op.DIV)
def _arithmetic(b: Builder, op: Op):
    x = b.tensor((FLOAT,) if op == Op.DIV else (FLOAT, QUANT))
    y = _broadcast_partner(b, x, low=0.5 if op == Op.DIV else -2.0)
    b.emit(op, [x, y, b.i32(b.choice(FUSE))], [b.out(x.type)])


def _broadcast_partner(b: Builder, x, low=-2.0):
    """Another tensor of ``x``'s type whose shape broadcasts with it."""
    shape = [d if b.rng.random() < 0.7 else 1 for d in x.shape][b.int(0, x.value.ndim - 1):]
    if b.rng.random() < 0.3:
        return b.const(x.type, shape, low, 2.0, scale=x.scale or 0.0, zero_point=x.zero_point)
    return b.tensor((x.type,), shape=shape, low=low, high=2.0, fresh=0.5)


@generator(Op.MAXIMUM, Op.MINIMUM)
def _min_max(b: Builder, op: Op):
    x = b.tensor()
    b.emit(op, [x, _broadcast_partner(b, x)], [b.out(x.type)])


@generator(Op.POW)
def _pow(b: Builder, op: Op):
    x = b.new_input(FLOAT, b.random_shape(b.int(1, 4)), 0.1, 2.0) if FLOAT in b.types else None
    if x is None:
        raise Reject("POW needs float")
    b.emit(op, [x, b.const(FLOAT, [1], -2.0, 2.0)], [b.same(x)])


@generator(Op.PRELU)
def _prelu(b: Builder, op: Op):
    x = b.tensor()
    alpha = b.const(x.type, x.shape[-1:], -1.0, 1.0, scale=x.scale or 0.0, zero_point=x.zero_point)
    b.emit(op, [x, alpha], [b.out(x.type)])


@generator(Op.EQUAL, Op.NOT_EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.LESS, Op.LESS_EQUAL)
def _compare(b: Builder, op: Op):
    x = b.tensor()
    b.emit(op, [x, _broadcast_partner(b, x)], [OutSpec(BOOL)])


@generator(Op.LOGICAL_AND, Op.LOGICAL_OR)
def _logical(b: Builder, op: Op):
    x = b.tensor((BOOL,))
    b.emit(op, [x, b.tensor((BOOL,), shape=x.shape, fresh=0.4)], [OutSpec(BOOL)])


@generator(Op.LOGICAL_NOT)
def _not(b: Builder, op: Op):
    b.emit(op, [b.tensor((BOOL,))], [OutSpec(BOOL)])


@generator(Op.SELECT)
def _select(b: Builder, op: Op):
    x = b.tensor()
    cond = b.tensor((BOOL,), shape=x.shape, fresh=0.5)
    y = b.tensor((x.type,), shape=x.shape, fresh=0.5)
    b.emit(op, [cond, x, y], [b.out(x.type)])


@generator(Op.QUANTIZE)
def _quantize(b: Builder, op: Op):
    b.emit(op, [b.tensor((FLOAT,))], [OutSpec(QUANT, *b.quant_params())])


@generator(Op.DEQUANTIZE)
def _dequantize(b: Builder, op: Op):
    b.emit(op, [b.tensor((QUANT,))], [OutSpec(FLOAT)])


@generator(Op.CAST)
def _cast(b: Builder, op: Op):
    x = b.tensor((FLOAT, QUANT, INT))
    target = b.choice([t for t in (FLOAT, INT, QUANT) if t in b.types or t == INT])
    if QUANT in (x.type, target) and x.type != target:
        raise Reject("CAST between quant8 and another type keeps the raw values only in NNAPI 1.3")
    b.emit(op, [x], [b.same(x) if target == x.type else OutSpec(target)])


@generator(Op.SOFTMAX)
def _softmax(b: Builder, op: Op):
    x = b.tensor(ranks=(2, 4))
    out = OutSpec(QUANT, 1 / 256, 0) if x.type == QUANT else b.same(x)
    b.emit(op, [x, b.f32(b.choice((0.5, 1.0)))], [out])


@generator(Op.LOG_SOFTMAX)
def _log_softmax(b: Builder, op: Op):
    x = b.tensor((FLOAT,))
    b.emit(op, [x, b.f32(1.0), b.i32(b.int(-x.value.ndim, x.value.ndim - 1))], [b.same(x)])


@generator(Op.L2_NORMALIZATION)
def _l2_norm(b: Builder, op: Op):
    x = b.tensor(ranks=(1, 2, 3, 4))
    b.emit(op, [x], [OutSpec(QUANT, 1 / 128, 128) if x.type == QUANT else b.same(x)])


@generator(Op.LOCAL_RESPONSE_NORMALIZATION)
def _lrn(b: Builder, op: Op):
    x = b.tensor((FLOAT,), ranks=(4,))
    b.emit(op, [x, b.i32(b.int(0, 2)), b.f32(1.0), b.f32(0.5), b.f32(0.5)], [b.same(x)])


@generator(Op.INSTANCE_NORMALIZATION)
def _instance_norm(b: Builder, op: Op):
    x = b.tensor((FLOAT,), ranks=(4,))
    b.emit(op, [x, b.f32(1.0), b.f32(0.5), b.f32(1e-3), b.flag(False)], [b.same(x)])


# -- reductions -------------------------------------------------------------------------------
def _axes(b: Builder, x, unique=True):
    rank = x.value.ndim
    count = b.int(1, rank)
    return sorted(int(a) for a in b.rng.choice(rank, count, replace=False))


@generator(Op.REDUCE_SUM, Op.REDUCE_PROD, Op.REDUCE_MAX, Op.REDUCE_MIN)
def _reduce(b: Builder, op: Op):
    types = (FLOAT,) if op in (Op.REDUCE_SUM, Op.REDUCE_PROD) else (FLOAT, QUANT)
    x = b.tensor(types)
    b.emit(op, [x, b.ints(_axes(b, x)), b.flag(b.int(0, 1))], [b.same(x)])


@generator(Op.REDUCE_ALL, Op.REDUCE_ANY)
def _reduce_bool(b: Builder, op: Op):
    x = b.tensor((BOOL,))
    b.emit(op, [x, b.ints(_axes(b, x)), b.flag(b.int(0, 1))], [OutSpec(BOOL)])


@generator(Op.MEAN)
def _mean(b: Builder, op: Op):
    x = b.tensor()
    b.emit(op, [x, b.ints(_axes(b, x)), b.i32(b.int(0, 1))], [b.same(x)])


@generator(Op.ARGMAX, Op.ARGMIN)
def _arg(b: Builder, op: Op):
    x = b.tensor(ranks=(2, 3, 4))
    b.emit(op, [x, b.i32(b.int(0, x.value.ndim - 1))], [OutSpec(INT)])


# -- shapes -----------------------------------------------------------------------------------
@generator(Op.RESHAPE)
def _reshape(b: Builder, op: Op):
    x = b.tensor(types=(FLOAT, QUANT, INT))
    size = x.value.size
    dims = [d for d in range(1, size + 1) if size % d == 0]
    first = b.choice(dims)
    shape = [first, -1] if b.rng.random() < 0.5 else [size // first, first]
    b.emit(op, [x, b.ints(shape)], [b.same(x)])


@generator(Op.SQUEEZE)
def _squeeze(b: Builder, op: Op):
    x = b.tensor()
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if not ones or len(ones) == x.value.ndim:
        raise Reject("no size-1 dimension to squeeze")
    b.emit(op, [x, b.ints(ones)], [b.same(x)])


@generator(Op.EXPAND_DIMS)
def _expand_dims(b: Builder, op: Op):
    x = b.tensor(ranks=(1, 2, 3))
    b.emit(op, [x, b.i32(b.int(-x.value.ndim - 1, x.value.ndim))], [b.same(x)])


@generator(Op.TRANSPOSE)
def _transpose(b: Builder, op: Op):
    x = b.tensor(ranks=(2, 3, 4))
    b.emit(op, [x, b.ints(b.rng.permutation(x.value.ndim))], [b.same(x)])


@generator(Op.CONCATENATION)
def _concat(b: Builder, op: Op):
    x = b.tensor()
    axis = b.int(0, x.value.ndim - 1)
    parts = [x]
    for _ in range(b.int(1, 2)):
        shape = list(x.shape)
        shape[axis] = b.int(1, 3)
        parts.append(b.tensor((x.type,), shape=shape, fresh=0.6))
    out = b.out(x.type) if x.type == QUANT and b.rng.random() < 0.5 else b.same(x)
    b.emit(op, [*parts, b.i32(axis)], [out])


@generator(Op.SPLIT)
def _split(b: Builder, op: Op):
    x = b.tensor()
    axis = b.int(0, x.value.ndim - 1)
    splits = b.choice([n for n in range(1, x.shape[axis] + 1) if x.shape[axis] % n == 0])
    b.emit(op, [x, b.i32(axis), b.i32(splits)], [b.same(x)] * splits)


@generator(Op.SLICE)
def _slice(b: Builder, op: Op):
    x = b.tensor()
    begin = [b.int(0, d - 1) for d in x.shape]
    size = [b.choice((-1, b.int(1, d - s))) for d, s in zip(x.shape, begin)]
    b.emit(op, [x, b.ints(begin), b.ints(size)], [b.same(x)])


@generator(Op.STRIDED_SLICE)
def _strided_slice(b: Builder, op: Op):
    x = b.tensor()
    begin = [b.int(0, d - 1) for d in x.shape]
    end = [b.int(s + 1, d) for d, s in zip(x.shape, begin)]
    strides = [b.int(1, 2) for _ in x.shape]
    masks = [b.i32(b.int(0, (1 << x.value.ndim) - 1)) for _ in range(2)]
    b.emit(op, [x, b.ints(begin), b.ints(end), b.ints(strides), *masks, b.i32(0)], [b.same(x)])


@generator(Op.TILE)
def _tile(b: Builder, op: Op):
    x = b.tensor(ranks=(1, 2, 3))
    b.emit(op, [x, b.ints([b.int(1, 2) for _ in x.shape])], [b.same(x)])


@generator(Op.PAD, Op.PAD_V2)
def _pad(b: Builder, op: Op):
    x = b.tensor()
    pads = b.ints([[b.int(0, 2), b.int(0, 2)] for _ in x.shape])
    extra = []
    if op == Op.PAD_V2:
        extra = [b.i32(b.int(0, 255)) if x.type == QUANT else b.f32(b.rng.uniform(-1, 1))]
    b.emit(op, [x, pads, *extra], [b.same(x)])


@generator(Op.GATHER)
def _gather(b: Builder, op: Op):
    x = b.tensor(types=(FLOAT, QUANT, INT))
    axis = b.int(0, x.value.ndim - 1)
    indices = b.const(INT, [b.int(1, 3)], 0, x.shape[axis] - 1)
    b.emit(op, [x, b.i32(axis), indices], [b.same(x)])


@generator(Op.RANK)
def _rank(b: Builder, op: Op):
    b.emit(op, [b.tensor(types=(FLOAT, QUANT, INT, BOOL))], [OutSpec(T.INT32)])


@generator(Op.FILL)
def _fill(b: Builder, op: Op):
    dims = b.ints(b.random_shape(b.int(1, 3)))
    if FLOAT in b.types and b.rng.random() < 0.7:
        b.emit(op, [dims, b.f32(b.rng.uniform(-1, 1))], [OutSpec(FLOAT)])
    else:
        b.emit(op, [dims, b.i32(b.int(-3, 3))], [OutSpec(INT)])


@generator(Op.TOPK_V2)
def _topk(b: Builder, op: Op):
    x = b.tensor(types=(FLOAT, QUANT, INT))
    b.emit(op, [x, b.i32(b.int(1, x.shape[-1]))], [b.same(x), OutSpec(INT)])


@generator(Op.CHANNEL_SHUFFLE)
def _channel_shuffle(b: Builder, op: Op):
    x = b.tensor()
    axis = b.int(0, x.value.ndim - 1)
    groups = b.choice([g for g in range(1, x.shape[axis] + 1) if x.shape[axis] % g == 0])
    b.emit(op, [x, b.i32(groups), b.i32(axis)], [b.same(x)])


# -- NHWC image operations ----------------------------------------------------------------------


# the image operations' generators register themselves in GENERATORS
from tests.support import random_graph_spatial  # noqa: E402,F401
