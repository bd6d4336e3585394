"""TFLite RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR / TRANSPOSE_CONV / L2_NORMALIZATION map to
their NNAPI operations and compute what the reference kernels compute."""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import OperationType
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.ops.resize import bilinear, nearest
from nnscope.runtime.ops.transpose_conv import transpose_conv_taps
from nnscope.runtime.tflite import convert_tflite
from tests.runtime.tflite.test_tflite_loader import BUILTIN, OPTIONS, _options, build_model


def _run(data: bytes, x: np.ndarray):
    model, *_ = convert_tflite(data)
    return model, CpuExecutor(model).run([x])[0]


def test_resize_options_become_nnapi_flags():
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 3, 2)
    for code, options, kernel, op_type in (
            (BUILTIN.RESIZE_BILINEAR, "ResizeBilinearOptions", bilinear,
             OperationType.RESIZE_BILINEAR),
            (BUILTIN.RESIZE_NEAREST_NEIGHBOR, "ResizeNearestNeighborOptions", nearest,
             OperationType.RESIZE_NEAREST_NEIGHBOR)):
        resize = (code, [0, 1], [2], getattr(OPTIONS, options),
                  _options(options, AlignCorners=False, HalfPixelCenters=True))
        data = build_model([((1, 2, 3, 2), None), ((2,), [5.0, 4.0]), ((1, 5, 4, 2), None)],
                           [resize], [0], [2])
        model, y = _run(data, x)
        assert [op.type for op in model.main.operations] == [op_type]
        np.testing.assert_allclose(y, kernel(x, (5, 4), False, True))


def test_transpose_conv_reads_tflite_input_order_and_output_shape():
    weights = np.arange(18, dtype=np.float32).reshape(2, 3, 3, 1) / 10
    conv = (BUILTIN.TRANSPOSE_CONV, [0, 1, 2], [3], OPTIONS.TransposeConvOptions,
            _options("TransposeConvOptions", Padding=0, StrideW=2, StrideH=2))
    data = build_model([((4,), [1, 4, 4, 2]), ((2, 3, 3, 1), weights), ((1, 2, 2, 1), None),
                        ((1, 4, 4, 2), None)], [conv], [2], [3])
    x = np.float32([1, 2, 3, 4]).reshape(1, 2, 2, 1)
    model, y = _run(data, x)
    assert model.main.operations[0].type == OperationType.TRANSPOSE_CONV_2D
    # SAME for a 4x4 output of a 2x2 input, stride 2, 3x3 filter: pad head 0, tail 1
    np.testing.assert_allclose(y, transpose_conv_taps(x, weights, (2, 2), (0, 1, 0, 1), (4, 4)),
                               rtol=1e-6)


def test_l2_normalization_maps_to_the_last_axis():
    norm = (BUILTIN.L2_NORMALIZATION, [0], [1], OPTIONS.L2NormOptions,
            _options("L2NormOptions", FusedActivationFunction=0))
    data = build_model([((1, 2, 2), None), ((1, 2, 2), None)], [norm], [0], [1])
    x = np.float32([[[3, 4], [0, -2]]])
    _, y = _run(data, x)
    np.testing.assert_allclose(y, [[[0.6, 0.8], [0, -1]]], rtol=1e-6)
