"""The executor checks each step's plan (output capacities, memory budget) once per input
signature: a repeat with the same input shapes and output buffers skips the checks, anything
else checks again, and models whose shapes follow from computed values always check."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandLifetime as L, OperandType as T, Operation, OperationType as Op
from nnscope.runtime.ops.budget import BudgetExceeded, OutputTooSmall
from nnscope.runtime.ops.executor import CpuExecutor, plans_follow_input_shapes
from tests.runtime.drivers._hal import _Values
from tests.support import cost_models as cm

_F32 = T.TENSOR_FLOAT32


def _unknown_add_model():
    """``out = a [?, 1] + b [1, ?]``: the output grows with the input shapes."""
    values = _Values()
    a = Operand(_F32, (0, 1), lifetime=L.SUBGRAPH_INPUT)
    b = Operand(_F32, (1, 0), lifetime=L.SUBGRAPH_INPUT)
    act = values.add(T.INT32, np.int32(0))
    out = Operand(_F32, (0, 0), lifetime=L.SUBGRAPH_OUTPUT)
    return cm._graph((a, b, act, out), (Operation(Op.ADD, (0, 1, 2), (3,)),), (0, 1), (3,), values)


def _pad_by_input_model():
    """``out = PAD(x, paddings)`` with the paddings a model input (their values set the shape)."""
    x = Operand(_F32, (1, 4), lifetime=L.SUBGRAPH_INPUT)
    paddings = Operand(T.TENSOR_INT32, (2, 2), lifetime=L.SUBGRAPH_INPUT)
    out = Operand(_F32, (0, 0), lifetime=L.SUBGRAPH_OUTPUT)
    return cm._graph((x, paddings, out), (Operation(Op.PAD, (0, 1), (2,)),), (0, 1), (2,), _Values())


def _inputs(size: int) -> list:
    return [np.ones((size, 1), np.float32), np.ones((1, size), np.float32)]


def test_larger_inputs_are_checked_against_the_budget_again():
    executor = CpuExecutor(_unknown_add_model(), budget_bytes=1 << 20)
    for _ in range(2):
        assert executor.run(_inputs(4))[0].shape == (4, 4)
    with pytest.raises(BudgetExceeded):
        executor.run(_inputs(1024))  # 4 MiB of float32 (8 MiB counted wide) > 1 MiB


def test_smaller_output_buffers_are_checked_again():
    executor = CpuExecutor(_unknown_add_model())
    np.testing.assert_array_equal(executor.run(_inputs(4), [64])[0], np.full((4, 4), 2, np.float32))
    executor.run(_inputs(4), [64])
    with pytest.raises(OutputTooSmall):
        executor.run(_inputs(4), [16])


def test_input_values_that_set_shapes_are_checked_every_run():
    model = _pad_by_input_model()
    assert not plans_follow_input_shapes(model.main)
    executor = CpuExecutor(model, budget_bytes=1 << 20)
    x = np.ones((1, 4), np.float32)
    assert executor.run([x, np.int32([[0, 0], [0, 4]])])[0].shape == (1, 8)
    with pytest.raises(BudgetExceeded):  # same shapes, but these values need 1 GiB
        executor.run([x, np.int32([[0, 0], [0, 2 ** 28]])])


@pytest.mark.parametrize("model, static", [
    (_unknown_add_model(), True),
    (cm.pad_model(chained=True), True),  # constant paddings
    (_pad_by_input_model(), False),
], ids=["add", "constant-pad", "input-pad"])
def test_which_models_have_shape_static_plans(model, static):
    assert plans_follow_input_shapes(model.main) is static
