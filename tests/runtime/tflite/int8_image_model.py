"""A small int8 image classifier in TFLite's full-integer form (float in and out): QUANTIZE,
per-channel CONV_2D (RELU6), DEPTHWISE_CONV_2D, HARD_SWISH, residual ADD, MEAN, FULLY_CONNECTED,
SOFTMAX, DEQUANTIZE - the layers of a quantized MobileNet, for end-to-end checks."""
from __future__ import annotations

import numpy as np

from tests.runtime.tflite.litert_helpers import F32, I8, I32, Tensor, build
from tests.runtime.tflite.test_tflite_loader import BUILTIN, OPTIONS, _options

INPUT_SHAPE = (1, 8, 8, 3)


def _q(shape, scale, zero_point, data=None, axis=0):
    return Tensor(tuple(shape), I8, data, scale, zero_point, axis)


def int8_image_model(seed: int = 3) -> bytes:
    rng = np.random.default_rng(seed)
    conv_scales = list(rng.uniform(0.005, 0.02, 8))
    dw_scales = list(rng.uniform(0.01, 0.03, 8))
    conv_w = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    dw_w = rng.integers(-127, 128, (1, 3, 3, 8)).astype(np.int8)
    fc_w = rng.integers(-127, 128, (4, 8)).astype(np.int8)
    tensors = [
        Tensor(INPUT_SHAPE, F32), _q(INPUT_SHAPE, 0.02, 0),                          # 0, 1
        _q(conv_w.shape, conv_scales, 0, conv_w),                                    # 2
        Tensor((8,), I32, rng.integers(-200, 200, 8), [0.02 * s for s in conv_scales], 0),
        _q((1, 4, 4, 8), 0.05, -10),                                                 # 4
        _q(dw_w.shape, dw_scales, 0, dw_w, axis=3),                                  # 5
        Tensor((8,), I32, rng.integers(-200, 200, 8), [0.05 * s for s in dw_scales], 0, 0),
        _q((1, 4, 4, 8), 0.08, -3), _q((1, 4, 4, 8), 0.06, -20),                     # 7, 8
        _q((1, 4, 4, 8), 0.09, -5), Tensor((2,), I32, np.int32([1, 2])),             # 9, 10
        _q((1, 8), 0.05, -5), _q(fc_w.shape, 0.01, 0, fc_w),                         # 11, 12
        Tensor((4,), I32, rng.integers(-500, 500, 4), 0.05 * 0.01, 0),               # 13
        _q((1, 4), 0.1, 0), _q((1, 4), 1 / 256, -128), Tensor((1, 4), F32),          # 14-16
    ]
    conv = _options("Conv2DOptions", Padding=0, StrideW=2, StrideH=2, FusedActivationFunction=3,
                    DilationWFactor=1, DilationHFactor=1)
    depthwise = _options("DepthwiseConv2DOptions", Padding=0, StrideW=1, StrideH=1,
                         DepthMultiplier=1, DilationWFactor=1, DilationHFactor=1)
    operators = [
        (BUILTIN.QUANTIZE, [0], [1], 0, None),
        (BUILTIN.CONV_2D, [1, 2, 3], [4], OPTIONS.Conv2DOptions, conv),
        (BUILTIN.DEPTHWISE_CONV_2D, [4, 5, 6], [7], OPTIONS.DepthwiseConv2DOptions, depthwise),
        (BUILTIN.HARD_SWISH, [7], [8], 0, None),
        (BUILTIN.ADD, [8, 4], [9], OPTIONS.AddOptions, _options("AddOptions")),
        (BUILTIN.MEAN, [9, 10], [11], OPTIONS.ReducerOptions, _options("ReducerOptions")),
        (BUILTIN.FULLY_CONNECTED, [11, 12, 13], [14], OPTIONS.FullyConnectedOptions,
         _options("FullyConnectedOptions")),
        (BUILTIN.SOFTMAX, [14], [15], OPTIONS.SoftmaxOptions, _options("SoftmaxOptions", Beta=1.0)),
        (BUILTIN.DEQUANTIZE, [15], [16], 0, None),
    ]
    return build(tensors, operators, [0], [16])
