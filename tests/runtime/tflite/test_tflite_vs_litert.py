"""Each mapped (or lowered) TFLite builtin, float32 and int8/uint8 where TFLite has them,
computes what LiteRT computes: one small model per case, run on both."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.tflite import convert_tflite
from tests.runtime.tflite.litert_helpers import (BOOL, F32, I32, I8, U8, Tensor, build,
                                                 litert_run, nnscope_run)
from tests.runtime.tflite.test_tflite_loader import BUILTIN, OPTIONS, _options

RNG = np.random.default_rng(7)
X4 = RNG.standard_normal((1, 4, 4, 4)).astype(np.float32)
X3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
Q4 = RNG.integers(-128, 128, (1, 4, 4, 4)).astype(np.int8)
U4 = RNG.integers(0, 256, (1, 4, 4, 4)).astype(np.uint8)


def f32(shape, data=None):
    return Tensor(tuple(shape), F32, data)


def i8(shape, scale=0.05, zero_point=0, data=None, axis=0):
    return Tensor(tuple(shape), I8, data, scale, zero_point, axis)


def u8(shape, scale=0.05, zero_point=128, data=None):
    return Tensor(tuple(shape), U8, data, scale, zero_point)


def i32(values):
    values = np.asarray(values, np.int32)
    return Tensor(values.shape, I32, values)


def unary(code, x, y, feed, options_type=0, options=None, extra=()):
    """x -> y with constant extra inputs (tensors) after x."""
    tensors = [x, *extra, y]
    op = (code, list(range(len(tensors) - 1)), [len(tensors) - 1], options_type, options)
    return tensors, [op], [0], [len(tensors) - 1], [feed]


def _resize(code, options_name, x, y, feed, **flags):
    return unary(code, x, y, feed, getattr(OPTIONS, options_name), _options(options_name, **flags),
                 extra=[i32(y.shape[1:3])])


def _reduce(code, x, y, feed, axes, keep):
    return unary(code, x, y, feed, OPTIONS.ReducerOptions,
                 _options("ReducerOptions", KeepDims=keep), extra=[i32(axes)])


def _case_table():
    c = {}
    c["prelu_f32"] = unary(BUILTIN.PRELU, f32(X4.shape), f32(X4.shape), X4,
                           extra=[f32((1, 1, 4), [[[0.1, -0.5, 2.0, 0.0]]])])
    c["prelu_i8"] = unary(BUILTIN.PRELU, i8(Q4.shape, 0.1), i8(Q4.shape, 0.1), Q4,
                          extra=[i8((1, 1, 4), 0.01, 0, [[[20, 50, -30, 90]]])])
    leaky = (OPTIONS.LeakyReluOptions,)
    c["leaky_relu_f32"] = unary(BUILTIN.LEAKY_RELU, f32(X4.shape), f32(X4.shape), X4, *leaky,
                                _options("LeakyReluOptions", Alpha=0.2))
    c["leaky_relu_i8"] = unary(BUILTIN.LEAKY_RELU, i8(Q4.shape, 0.1, 3), i8(Q4.shape, 0.08, -2),
                               Q4, *leaky, _options("LeakyReluOptions", Alpha=0.1))
    c["leaky_relu_u8"] = unary(BUILTIN.LEAKY_RELU, u8(U4.shape), u8(U4.shape, 0.04, 100), U4,
                               *leaky, _options("LeakyReluOptions", Alpha=0.3))
    for name, flags in {"half_pixel": dict(HalfPixelCenters=True),
                        "align_corners": dict(AlignCorners=True), "plain": {}}.items():
        c[f"resize_bilinear_{name}_f32"] = _resize(
            BUILTIN.RESIZE_BILINEAR, "ResizeBilinearOptions", f32(X4.shape), f32((1, 7, 6, 4)),
            X4, **flags)
    c["resize_bilinear_i8"] = _resize(BUILTIN.RESIZE_BILINEAR, "ResizeBilinearOptions",
                                      i8(Q4.shape), i8((1, 8, 8, 4)), Q4, HalfPixelCenters=True)
    c["resize_nearest_f32"] = _resize(BUILTIN.RESIZE_NEAREST_NEIGHBOR,
                                      "ResizeNearestNeighborOptions", f32(X4.shape),
                                      f32((1, 8, 6, 4)), X4)
    c["resize_nearest_half_pixel_u8"] = _resize(
        BUILTIN.RESIZE_NEAREST_NEIGHBOR, "ResizeNearestNeighborOptions", u8(U4.shape),
        u8((1, 8, 8, 4)), U4, HalfPixelCenters=True)
    c["depth_to_space_f32"] = unary(BUILTIN.DEPTH_TO_SPACE, f32(X4.shape), f32((1, 8, 8, 1)), X4,
                                    OPTIONS.DepthToSpaceOptions,
                                    _options("DepthToSpaceOptions", BlockSize=2))
    c["space_to_depth_i8"] = unary(BUILTIN.SPACE_TO_DEPTH, i8(Q4.shape), i8((1, 2, 2, 16)), Q4,
                                   OPTIONS.SpaceToDepthOptions,
                                   _options("SpaceToDepthOptions", BlockSize=2))
    c["hard_swish_f32"] = unary(BUILTIN.HARD_SWISH, f32(X4.shape), f32(X4.shape), X4 * 4)
    c["hard_swish_i8"] = unary(BUILTIN.HARD_SWISH, i8(Q4.shape, 0.05, 0),
                               i8(Q4.shape, 0.03, -10), Q4)
    c["elu_f32"] = unary(BUILTIN.ELU, f32(X4.shape), f32(X4.shape), X4)
    c["mean_f32"] = _reduce(BUILTIN.MEAN, f32(X4.shape), f32((1, 1, 1, 4)), X4, [1, 2], True)
    c["mean_i8"] = _reduce(BUILTIN.MEAN, i8(Q4.shape, 0.1, 1), i8((1, 4), 0.05, -3), Q4,
                           [1, 2], False)
    c["sum_f32"] = _reduce(BUILTIN.SUM, f32(X3.shape), f32((2, 4)), X3, [1], False)
    c["reduce_max_f32"] = _reduce(BUILTIN.REDUCE_MAX, f32(X3.shape), f32((3,)), X3, [0, 2], False)
    c["reduce_min_f32"] = _reduce(BUILTIN.REDUCE_MIN, f32(X3.shape), f32((2, 3, 1)), X3, [-1], True)
    c["reduce_prod_f32"] = _reduce(BUILTIN.REDUCE_PROD, f32(X3.shape), f32((2, 4)), X3, [1], False)
    bools = X3 > 0
    c["reduce_any"] = _reduce(BUILTIN.REDUCE_ANY, Tensor((2, 3, 4), BOOL), Tensor((2, 4), BOOL),
                              bools, [1], False)
    c["reduce_all"] = _reduce(BUILTIN.REDUCE_ALL, Tensor((2, 3, 4), BOOL), Tensor((2, 4), BOOL),
                              bools, [1], False)
    c["strided_slice_f32"] = unary(
        BUILTIN.STRIDED_SLICE, f32(X3.shape), f32((2, 2)), X3, OPTIONS.StridedSliceOptions,
        _options("StridedSliceOptions", BeginMask=1, EndMask=4, ShrinkAxisMask=2),
        extra=[i32([1, 1, 1]), i32([2, 2, 0]), i32([1, 1, 2])])
    for name, masks, spec, shape in (
            ("ellipsis", dict(EllipsisMask=1), ([0, 1], [0, 3], [1, 1]), (2, 3, 2)),  # x[..., 1:3]
            ("new_axis", dict(BeginMask=1, EndMask=1, NewAxisMask=2, ShrinkAxisMask=4),
             ([0, 0, 1], [0, 0, 2], [1, 1, 1]), (2, 1, 4)),  # x[:, None, 1]
            ("both", dict(NewAxisMask=1, EllipsisMask=2, BeginMask=4, EndMask=4),
             ([0, 0, 0], [0, 0, 0], [1, 1, 2]), (1, 2, 3, 2))):  # x[None, ..., ::2]
        c[f"strided_slice_{name}_f32"] = unary(
            BUILTIN.STRIDED_SLICE, f32(X3.shape), f32(shape), X3, OPTIONS.StridedSliceOptions,
            _options("StridedSliceOptions", **masks), extra=[i32(v) for v in spec])
    batched = RNG.standard_normal((4, 3, 3, 2)).astype(np.float32)
    c["batch_to_space_crops_f32"] = unary(BUILTIN.BATCH_TO_SPACE_ND, f32(batched.shape),
                                          f32((1, 5, 4, 2)), batched,
                                          extra=[i32([2, 2]), i32([[1, 0], [0, 2]])])
    c["space_to_batch_f32"] = unary(BUILTIN.SPACE_TO_BATCH_ND, f32(X4.shape), f32((4, 3, 2, 4)),
                                    X4, extra=[i32([2, 2]), i32([[1, 1], [0, 0]])])
    c["select_v2_broadcast_f32"] = (
        [Tensor((2, 1, 4), BOOL), f32((3, 1)), f32(X3.shape), f32(X3.shape)],
        [(BUILTIN.SELECT_V2, [0, 1, 2], [3], 0, None)], [0, 1, 2], [3],
        [X3[:, :1] > 0, np.float32([[1], [2], [3]]), X3])
    c["select_v2_broadcast_i8"] = (
        [Tensor((1, 4, 4, 1), BOOL), i8(Q4.shape, 0.1, 2), i8((1,), 0.1, 2, [7]),
         i8(Q4.shape, 0.1, 2)],
        [(BUILTIN.SELECT_V2, [0, 1, 2], [3], 0, None)], [0, 1], [3], [Q4[..., :1] > 0, Q4])
    c["gather_f32"] = unary(BUILTIN.GATHER, f32(X3.shape), f32((2, 3, 3)), X3,
                            OPTIONS.GatherOptions, _options("GatherOptions", Axis=2),
                            extra=[i32([3, 0, 3])])
    c["gather_i8"] = unary(BUILTIN.GATHER, i8(Q4.shape), i8((1, 2, 4, 4)), Q4,
                           OPTIONS.GatherOptions, _options("GatherOptions", Axis=1),
                           extra=[i32([2, 0])])
    c["squared_difference_f32"] = unary(BUILTIN.SQUARED_DIFFERENCE, f32(X3.shape), f32(X3.shape),
                                        X3, extra=[f32((4,), [0.5, -1, 2, 0])])
    c["square_f32"] = unary(BUILTIN.SQUARE, f32(X3.shape), f32(X3.shape), X3)
    c["log_softmax_f32"] = unary(BUILTIN.LOG_SOFTMAX, f32(X3.shape), f32(X3.shape), X3)
    c["tile_f32"] = unary(BUILTIN.TILE, f32(X3.shape), f32((4, 3, 8)), X3, extra=[i32([2, 1, 2])])
    c["reverse_v2_f32"] = unary(BUILTIN.REVERSE_V2, f32(X3.shape), f32(X3.shape), X3,
                                extra=[i32([1])])
    for mode, name in ((0, "reflect"), (1, "symmetric")):
        c[f"mirror_pad_{name}_f32"] = unary(
            BUILTIN.MIRROR_PAD, f32(X3.shape), f32((2, 6, 7)), X3, OPTIONS.MirrorPadOptions,
            _options("MirrorPadOptions", Mode=mode), extra=[i32([[0, 0], [2, 1], [1, 2]])])
    c["lrn_f32"] = unary(BUILTIN.LOCAL_RESPONSE_NORMALIZATION, f32(X4.shape), f32(X4.shape), X4,
                         OPTIONS.LocalResponseNormalizationOptions,
                         _options("LocalResponseNormalizationOptions", Radius=1, Bias=1.0,
                                  Alpha=0.5, Beta=0.75))
    c["quantize_i8"] = unary(BUILTIN.QUANTIZE, f32(X4.shape), i8(X4.shape, 0.02, -5), X4)
    c["requantize_u8_to_i8"] = unary(BUILTIN.QUANTIZE, u8(U4.shape, 0.05, 128),
                                     i8(U4.shape, 0.05, 0), U4)
    c["requantize_i8_rescale"] = unary(BUILTIN.QUANTIZE, i8(Q4.shape, 0.05, 3),
                                       i8(Q4.shape, 0.07, -9), Q4)
    c["dequantize_u8"] = unary(BUILTIN.DEQUANTIZE, u8(U4.shape, 0.1, 120), f32(U4.shape), U4)
    c.update(_layer_cases())
    return c


def _layer_cases():
    c = {}
    w = RNG.standard_normal((3, 4)).astype(np.float32)
    for adj in (False, True):
        # rhs w: (K, N) = (3, 4), or with adj_y (N, K) = (3, 4); lhs (2, 4, 3): M=4, K=3,
        # or with adj_x (2, K=4, M=3).
        rhs, lhs = w, X3.transpose(0, 2, 1).copy()
        x_shape = lhs.shape
        y_shape = (2, 3, 3) if adj else (2, 4, 4)
        c[f"batch_matmul_adj{int(adj)}_f32"] = unary(
            BUILTIN.BATCH_MATMUL, f32(x_shape), f32(y_shape), lhs, OPTIONS.BatchMatMulOptions,
            _options("BatchMatMulOptions", AdjX=adj, AdjY=adj), extra=[f32(rhs.shape, rhs)])
    weights = RNG.standard_normal((2, 3, 3, 4)).astype(np.float32)  # (out, h, w, in)
    c["transpose_conv_f32"] = (
        [i32([1, 8, 8, 2]), f32(weights.shape, weights), f32(X4.shape), f32((1, 8, 8, 2))],
        [(BUILTIN.TRANSPOSE_CONV, [0, 1, 2], [3], OPTIONS.TransposeConvOptions,
          _options("TransposeConvOptions", Padding=0, StrideW=2, StrideH=2))], [2], [3], [X4])
    c["pack_f32"] = ([f32((3, 4)), f32((3, 4)), f32((3, 2, 4))],
                     [(BUILTIN.PACK, [0, 1], [2], OPTIONS.PackOptions,
                       _options("PackOptions", ValuesCount=2, Axis=1))], [0, 1], [2],
                     [X3[0], X3[1]])
    c["unpack_f32"] = ([f32(X3.shape), f32((2, 4)), f32((2, 4)), f32((2, 4))],
                       [(BUILTIN.UNPACK, [0], [1, 2, 3], OPTIONS.UnpackOptions,
                         _options("UnpackOptions", Num=3, Axis=1))], [0], [1, 2, 3], [X3])
    c["split_f32"] = ([i32([2]), f32(X3.shape), f32((2, 3, 2)), f32((2, 3, 2))],
                      [(BUILTIN.SPLIT, [0, 1], [2, 3], OPTIONS.SplitOptions,
                        _options("SplitOptions", NumSplits=2))], [1], [2, 3], [X3])
    c["split_v_f32"] = ([f32(X3.shape), i32([1, -1]), i32([1]), f32((2, 1, 4)), f32((2, 2, 4))],
                        [(BUILTIN.SPLIT_V, [0, 1, 2], [3, 4], OPTIONS.SplitVOptions,
                          _options("SplitVOptions", NumSplits=2))], [0], [3, 4], [X3])
    table = RNG.standard_normal((5, 3)).astype(np.float32)
    c["embedding_lookup_f32"] = ([i32([0]), f32(table.shape, table), f32((3, 3))],
                                 [(BUILTIN.EMBEDDING_LOOKUP, [0, 1], [2], 0, None)], [0], [2],
                                 [np.int32([4, 0, 2])])
    c["embedding_lookup_f32"][0][0] = Tensor((3,), I32)
    keys = np.int32([1, 3, 4, 7, 9])  # sorted, as both kernels binary-search
    c["hashtable_lookup_f32"] = ([Tensor((4,), I32), Tensor((5,), I32, keys),
                                  f32(table.shape, table), f32((4, 3)), Tensor((4,), U8)],
                                 [(BUILTIN.HASHTABLE_LOOKUP, [0, 1, 2], [3, 4], 0, None)], [0],
                                 [3, 4], [np.int32([9, 2, 1, 7])])
    hashes = RNG.standard_normal((3, 4)).astype(np.float32)
    weight = np.float32([0.5, 2.0, 1.0])
    for kind, name in ((1, "sparse"), (2, "dense")):
        c[f"lsh_projection_{name}"] = (
            [f32(hashes.shape, hashes), Tensor((3, 2), I32), f32((3,), weight),
             Tensor((3 if kind == 1 else 12,), I32)],
            [(BUILTIN.LSH_PROJECTION, [0, 1, 2], [3], OPTIONS.LSHProjectionOptions,
              _options("LSHProjectionOptions", Type=kind))], [1], [3],
            [np.int32([[12, 345], [-7, 88], [1000, 3]])])
    c.update(_int8_layer_cases())
    return c


def _int8_layer_cases():
    """The layers of an int8 image model: per-channel CONV_2D / DEPTHWISE, FC, ADD, pooling."""
    c = {}
    scales = [0.01, 0.02, 0.015]
    w = RNG.integers(-127, 128, (3, 3, 3, 4)).astype(np.int8)
    bias = Tensor((3,), I32, np.int32([100, -50, 7]), [0.1 * s for s in scales], 0)
    conv = (BUILTIN.CONV_2D, [0, 1, 2], [3], OPTIONS.Conv2DOptions,
            _options("Conv2DOptions", Padding=0, StrideW=1, StrideH=1, FusedActivationFunction=1,
                     DilationWFactor=1, DilationHFactor=1))
    c["conv_2d_per_channel_i8"] = ([i8(Q4.shape, 0.1, 2), i8(w.shape, scales, 0, w),
                                    bias, i8((1, 4, 4, 3), 0.25, -128)], [conv], [0], [3], [Q4])
    dw = RNG.integers(-127, 128, (1, 3, 3, 4)).astype(np.int8)
    dscales = [0.01, 0.02, 0.03, 0.04]
    dbias = Tensor((4,), I32, np.int32([1, 2, 3, 4]), [0.1 * s for s in dscales], 0, 0)
    depthwise = (BUILTIN.DEPTHWISE_CONV_2D, [0, 1, 2], [3], OPTIONS.DepthwiseConv2DOptions,
                 _options("DepthwiseConv2DOptions", Padding=1, StrideW=1, StrideH=1,
                          DepthMultiplier=1, DilationWFactor=1, DilationHFactor=1))
    c["depthwise_per_channel_i8"] = ([i8(Q4.shape, 0.1, 2), i8(dw.shape, dscales, 0, dw, axis=3),
                                      dbias, i8((1, 2, 2, 4), 0.3, 5)], [depthwise], [0], [3],
                                     [Q4])
    fw = RNG.integers(-127, 128, (5, 64)).astype(np.int8)
    fc = (BUILTIN.FULLY_CONNECTED, [0, 1, -1], [2], OPTIONS.FullyConnectedOptions,
          _options("FullyConnectedOptions", FusedActivationFunction=0))
    c["fully_connected_i8"] = ([i8((1, 64), 0.1, 2), i8(fw.shape, 0.01, 0, fw),
                                i8((1, 5), 0.5, 0)], [fc], [0], [2], [Q4.reshape(1, 64)])
    add = (BUILTIN.ADD, [0, 1], [2], OPTIONS.AddOptions,
           _options("AddOptions", FusedActivationFunction=1))
    c["add_u8"] = ([u8(U4.shape, 0.05, 128), u8(U4.shape, 0.07, 100), u8(U4.shape, 0.1, 0)],
                   [add], [0, 1], [2], [U4, U4[:, ::-1].copy()])
    pool = (BUILTIN.AVERAGE_POOL_2D, [0], [1], OPTIONS.Pool2DOptions,
            _options("Pool2DOptions", Padding=0, StrideW=2, StrideH=2, FilterWidth=2,
                     FilterHeight=2, FusedActivationFunction=0))
    c["average_pool_i8"] = ([i8(Q4.shape, 0.1, 2), i8((1, 2, 2, 4), 0.1, 2)], [pool], [0], [1],
                            [Q4])
    return c


CASES = _case_table()


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_litert(name):
    tensors, operators, inputs, outputs, feeds = CASES[name]
    data = build(tensors, operators, inputs, outputs)
    expected = litert_run(data, feeds)
    actual = nnscope_run(data, feeds)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        elif want.dtype in (np.int8, np.uint8):  # one quantum: rounding order may differ
            assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1
        else:
            np.testing.assert_array_equal(got, want)


def _hybrid_case(kind):
    x = RNG.standard_normal((1, 4, 4, 4)).astype(np.float32)
    if kind == "fully_connected":
        w = RNG.integers(-127, 128, (5, 64)).astype(np.int8)
        tensors = [f32((1, 64)), i8(w.shape, 0.02, 0, w), f32((5,), [0.1, 0, -0.2, 0.3, 1]),
                   f32((1, 5))]
        op = (BUILTIN.FULLY_CONNECTED, [0, 1, 2], [3], OPTIONS.FullyConnectedOptions,
              _options("FullyConnectedOptions", FusedActivationFunction=0))
        return tensors, [op], [0], [3], [x.reshape(1, 64)]
    w = RNG.integers(-127, 128, (3, 3, 3, 4)).astype(np.int8)
    tensors = [f32(x.shape), i8(w.shape, [0.01, 0.02, 0.03], 0, w), f32((3,), [0.5, 0, -1]),
               f32((1, 4, 4, 3))]
    op = (BUILTIN.CONV_2D, [0, 1, 2], [3], OPTIONS.Conv2DOptions,
          _options("Conv2DOptions", Padding=0, StrideW=1, StrideH=1, FusedActivationFunction=0,
                   DilationWFactor=1, DilationHFactor=1))
    return tensors, [op], [0], [3], [x]


@pytest.mark.parametrize("kind", ["fully_connected", "conv_2d_per_channel"])
def test_hybrid_weights_are_dequantized(kind):
    """Float activations with int8 weights: nnscope computes in float32 with dequantized weights
    (as the NNAPI delegate does); LiteRT's hybrid kernel quantizes the activations to int8 too,
    so they agree to about one activation quantum (1/127 of the input range) per tap."""
    tensors, operators, inputs, outputs, feeds = _hybrid_case(kind)
    data = build(tensors, operators, inputs, outputs)
    model, *_ = convert_tflite(data)
    weights = model.main.operands[model.main.operations[0].inputs[1]]
    assert weights.type.name == "TENSOR_FLOAT32"
    (expected,) = litert_run(data, feeds)
    (actual,) = nnscope_run(data, feeds)
    w = tensors[1]
    scales = np.asarray(w.scale, np.float32).reshape(-1, *([1] * (w.data.ndim - 1)))
    dequantized = w.data.astype(np.float32) * scales
    reference = _float_reference(kind, feeds[0], dequantized, tensors[2].data)
    np.testing.assert_allclose(actual, reference, rtol=1e-4, atol=1e-4)
    scale = float(np.abs(expected).max())
    np.testing.assert_allclose(actual, expected, atol=0.02 * scale)


def _float_reference(kind, x, w, bias):
    bias = np.asarray(bias, np.float32)
    if kind == "fully_connected":
        return x @ w.T + bias
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((1, 4, 4, 3), np.float32)
    for i in range(4):
        for j in range(4):
            patch = padded[0, i:i + 3, j:j + 3, :]
            out[0, i, j] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2])) + bias
    return out
