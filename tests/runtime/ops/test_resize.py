"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR against every runnable NNAPI CTS vector (also
with output shapes left unknown), plus TFLite's coordinate rules and the scale form."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType
from nnscope.runtime.ops.registry import OpContext, OpValidationError
from nnscope.runtime.ops.resize import bilinear, execute_bilinear, execute_nearest, nearest
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.RESIZE_BILINEAR, OperationType.RESIZE_NEAREST_NEIGHBOR})
MIN_PASSED = {"RESIZE_BILINEAR": 214, "RESIZE_NEAREST_NEIGHBOR": 476}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

ROW = np.arange(4, dtype=np.float32).reshape(1, 1, 4, 1)


@pytest.mark.parametrize("align, half, expected", [
    (False, False, [0, 0, 1, 2, 2, 3]),   # floor(x * 4/6)
    (True, False, [0, 1, 1, 2, 2, 3]),    # round(x * 3/5)
    (False, True, [0, 1, 1, 2, 3, 3]),    # floor((x + 0.5) * 4/6)
])
def test_nearest_neighbour_coordinate_rules(align, half, expected):
    assert nearest(ROW, (1, 6), align, half)[0, 0, :, 0].tolist() == expected


def test_half_pixel_bilinear_keeps_the_edges_and_interpolates_between():
    out = bilinear(ROW, (1, 8), False, True)[0, 0, :, 0]
    assert out[0] == 0 and out[-1] == 3
    np.testing.assert_allclose(out[1:-1], [0.25, 0.75, 1.25, 1.75, 2.25, 2.75])


def _context(op, x, width, height, scalar_type, *flags):
    operands = [Operand(T.TENSOR_QUANT8_ASYMM if x.dtype == np.uint8 else T.TENSOR_FLOAT32,
                        x.shape, 0.5, 0), Operand(scalar_type), Operand(scalar_type)]
    operands += [Operand(T.BOOL)] * len(flags)
    return OpContext(Operation(op, tuple(range(len(operands))), (len(operands),)),
                     [x, width, height, *flags], operands, [operands[0]])


def test_float_scales_give_floor_of_scaled_size_and_quant_truncates():
    x = np.uint8([[10, 21], [30, 40]]).reshape(1, 2, 2, 1)
    ctx = _context(OperationType.RESIZE_BILINEAR, x, 1.5, 1.6, T.FLOAT32, False)
    out = execute_bilinear(ctx)[0]
    assert out.shape == (1, 3, 3, 1)                      # floor(2 * 1.6), floor(2 * 1.5)
    assert out[0, 0, 1, 0] == 17                          # 10 + 11 * 2/3 = 17.33 -> 17


def test_align_corners_with_half_pixel_centers_is_rejected():
    x = np.zeros((1, 2, 2, 1), np.float32)
    ctx = _context(OperationType.RESIZE_NEAREST_NEIGHBOR, x, 4, 4, T.INT32, False, True, True)
    with pytest.raises(OpValidationError, match="cannot both be true"):
        execute_nearest(ctx)
