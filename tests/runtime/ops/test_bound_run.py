"""A bound run (``CpuExecutor.bind``, ``CpuPreparedModel.bound_run``): the executor's one loop on
fixed views of a request's pools. Oracle: the ordinary path (``CpuPreparedModel.execute``, i.e.
``CpuExecutor.run``) on the same pool bytes; a bound run must see each run's new input bytes,
and decline (False, or None when binding) whenever the ordinary path's checks could differ."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.builtin_models import mobilenet, sample_input
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.hal.types import Operand, OperandLifetime as L, OperandType as T, Operation, OperationType as Op
from nnscope.runtime.ops.executor import CpuExecutor
from tests.runtime.drivers._hal import make_request
from tests.runtime.drivers._hal import _Values
from tests.runtime.ops.test_executor_signature import _inputs, _unknown_add_model
from tests.support import cost_models as cm


def _bound_mobilenet():
    model = mobilenet(size=32, alpha=0.25, classes=10).to_hal()
    prepared = CpuDevice().prepare_model(model)
    inputs = sample_input(mobilenet(size=32, alpha=0.25, classes=10))
    request, pool, outputs = make_request(model, inputs)
    result = prepared.execute(request)
    return prepared, request, pool, outputs, result


def test_a_bound_run_computes_what_execute_computes_for_new_input_bytes():
    prepared, request, pool, outputs, result = _bound_mobilenet()
    run = prepared.bound_run(request, result)
    assert run is not None
    image = np.frombuffer(pool, np.float32, request.inputs[0].length // 4, request.inputs[0].offset)
    rng = np.random.default_rng(3)
    for _ in range(3):
        image[:] = rng.uniform(-1, 1, image.size)
        outputs[0][:] = 0
        assert run() is True
        bound = outputs[0].copy()
        outputs[0][:] = 0
        assert prepared.execute(request).status == 0
        np.testing.assert_array_equal(bound, outputs[0])
        assert abs(float(bound.sum()) - 1.0) < 1e-4  # a softmax over the classes


def test_no_bound_run_for_another_request_or_a_timed_result():
    prepared, request, _, _, result = _bound_mobilenet()
    timed = prepared.execute(request, measure_timing=True)
    assert prepared.bound_run(request, timed) is None
    other, _, _ = make_request(prepared.model, sample_input(mobilenet(size=32, alpha=0.25, classes=10)))
    assert prepared.bound_run(other, result) is None


def test_declines_while_another_input_signature_is_the_checked_one():
    executor = CpuExecutor(_unknown_add_model())
    inputs, out = _inputs(4), np.zeros((4, 4), np.float32)
    executor.run(inputs, [64])
    run = executor.bind(inputs, [64], [out])
    assert run() is True
    np.testing.assert_array_equal(out, np.full((4, 4), 2, np.float32))
    executor.run(_inputs(2), [16])  # plans now checked for [2, 1] + [1, 2] only
    out[:] = 0
    assert run() is False and not out.any()
    executor.run(inputs, [64])
    inputs[0][:] = 5
    assert run() is True
    np.testing.assert_array_equal(out, np.full((4, 4), 6, np.float32))


def test_declines_a_step_hook_and_a_result_shaped_unlike_its_view():
    executor = CpuExecutor(_unknown_add_model())
    inputs = _inputs(4)
    executor.run(inputs, [64])
    wrong = np.zeros((2, 8), np.float32)
    assert executor.bind(inputs, [64], [wrong])() is False
    assert not wrong.any()
    out = np.zeros((4, 4), np.float32)
    run = executor.bind(inputs, [64], [out])
    executor.forTest_step_hook = lambda index, values: None
    assert run() is False and not out.any()


def test_no_binding_for_inputs_the_executor_would_convert():
    executor = CpuExecutor(_unknown_add_model())
    as_float64 = [x.astype(np.float64) for x in _inputs(4)]
    executor.run(as_float64, [64])
    assert executor.bind(as_float64, [64], [np.zeros((4, 4), np.float32)]) is None


def _binary_model(op, fuse: int, operand_type=T.TENSOR_FLOAT32):
    """``out [4, 4] = op(a [4, 1], b [1, 4])`` with fused activation ``fuse``."""
    values = _Values()
    a = Operand(operand_type, (4, 1), lifetime=L.SUBGRAPH_INPUT)
    b = Operand(operand_type, (1, 4), lifetime=L.SUBGRAPH_INPUT)
    act = values.add(T.INT32, np.int32(fuse))
    out = Operand(operand_type, (4, 4), lifetime=L.SUBGRAPH_OUTPUT)
    return cm._graph((a, b, act, out), (Operation(op, (0, 1, 2), (3,)),), (0, 1), (3,), values)


@pytest.mark.parametrize("op", [Op.ADD, Op.SUB, Op.MUL, Op.DIV])
@pytest.mark.parametrize("fuse", [0, 1])  # NONE (in place where the op can), RELU
def test_one_operation_runs_bound_equal_the_ordinary_path_for_new_bytes(op, fuse):
    executor = CpuExecutor(_binary_model(op, fuse))
    rng = np.random.default_rng(int(op) * 10 + fuse)
    inputs = [np.ones((4, 1), np.float32), np.full((1, 4), 2, np.float32)]
    executor.run(inputs, [64])
    out = np.zeros((4, 4), np.float32)
    run = executor.bind(inputs, [64], [out])
    for _ in range(3):
        for array in inputs:
            array[...] = rng.uniform(-2, 2, array.shape).astype(np.float32)
        out[...] = np.nan
        assert run() is True
        np.testing.assert_array_equal(out, executor.run(inputs, [64])[0])
