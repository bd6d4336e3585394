import time

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, Duration, Execution, Memory, Model, NnError, ResultCode
from nnscope.runtime.hal.types import FuseCode, OperandType as T, OperationType as Op
from tests.runtime.helpers import add_model, conv_model, ones_add_execution, run
from tests.support.log_capture import captured_log

#: Runtime-core behaviour on the in-process reference device (driver processes: tests/runtime/drivers).
pytestmark = pytest.mark.usefixtures("cpu_only")


def _compiled(model):
    compilation = Compilation(model)
    compilation.finish()
    return compilation


def _reference_conv(x, w, b):
    """SAME-padded stride-1 NHWC convolution in plain numpy."""
    out_c, kh, kw, _ = w.shape
    padded = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    h, wd = x.shape[1:3]
    out = np.zeros((1, h, wd, out_c), np.float64)
    for i in range(h):
        for j in range(wd):
            patch = padded[0, i:i + kh, j:j + kw, :]
            out[0, i, j] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2])) + b
    return out


def test_add_matches_numpy():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 1, 4)).astype(np.float32)
    assert np.array_equal(run(add_model(), a, b), a + b)


def test_add_with_fused_relu():
    a = np.float32([[-3, -1, 1, 3]])
    assert run(add_model(fuse=FuseCode.RELU), a, a).tolist() == [[0, 0, 2, 6]]


def test_conv_matches_numpy():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    x = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    np.testing.assert_allclose(run(conv_model(w, b), x), _reference_conv(x, w, b), rtol=1e-5, atol=1e-5)


def test_reusable_execution_sees_new_input_values():
    execution = Execution(_compiled(add_model()))
    x, out = np.ones((1, 4), np.float32), np.zeros((1, 4), np.float32)
    execution.set_input(0, x)
    execution.set_input(1, x)
    execution.set_output(0, out)
    execution.set_reusable(True)
    execution.compute()
    assert out.tolist() == [[2.0] * 4]
    x[:] = 5  # buffers are read at compute time, as in NNAPI
    execution.compute()
    assert out.tolist() == [[10.0] * 4]
    execution.start_compute().wait()
    assert out.tolist() == [[10.0] * 4]


def test_execution_is_single_use_by_default():
    execution = ones_add_execution(_compiled(add_model()))
    execution.compute()
    for again in (execution.compute, execution.start_compute, lambda: execution.set_reusable(True)):
        with pytest.raises(NnError) as info:
            again()
        assert info.value.code == ResultCode.BAD_STATE


def test_start_compute_and_wait():
    execution = Execution(_compiled(add_model()))
    x, out = np.full((1, 4), 2, np.float32), np.zeros((1, 4), np.float32)
    execution.set_input(0, x)
    execution.set_input(1, x)
    execution.set_output(0, out)
    event = execution.start_compute()
    event.wait()
    assert event.done and out.tolist() == [[4.0] * 4]


def test_start_compute_rejects_an_unset_input_at_the_call():
    execution = Execution(_compiled(add_model()))
    execution.set_input(0, np.ones((1, 4), np.float32))
    with pytest.raises(NnError, match=r"startCompute: input 1 \(operand 1\) is not set") as info:
        execution.start_compute()
    assert info.value.code == ResultCode.BAD_DATA
    execution.set_input(1, np.ones((1, 4), np.float32))  # not started: still in preparation
    execution.set_output(0, np.zeros((1, 4), np.float32))
    execution.start_compute().wait()


def _doubling_model(name: str) -> Model:
    """``out = x + x`` on [1, 2] floats."""
    model = Model(name)
    x = model.add_operand(T.TENSOR_FLOAT32, (1, 2))
    act = model.add_operand(T.INT32)
    out = model.add_operand(T.TENSOR_FLOAT32, (1, 2))
    model.set_operand_value(act, 0)
    model.add_operation(Op.ADD, [x, x, act], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


def test_device_error_comes_out_of_wait():
    model = _doubling_model("omit")
    execution = Execution(_compiled(model))
    execution.set_input(0, None)
    execution.set_output(0, np.zeros((1, 2), np.float32))
    event = execution.start_compute()
    with pytest.raises(NnError) as info:
        event.wait()
    assert info.value.code == ResultCode.OP_FAILED


def test_measure_timing_and_get_duration(cpu_only):
    compilation = Compilation.for_devices(add_model(), [cpu_only])
    compilation.finish()
    execution = Execution(compilation)
    x, out = np.ones((1, 4), np.float32), np.zeros((1, 4), np.float32)
    for index in (0, 1):
        execution.set_input(index, x)
    execution.set_output(0, out)
    with pytest.raises(NnError) as info:
        execution.get_duration(Duration.ON_HARDWARE)
    assert info.value.code == ResultCode.BAD_STATE
    execution.set_measure_timing(True)
    execution.compute()
    on_hw, in_driver = execution.get_duration(Duration.ON_HARDWARE), execution.get_duration(Duration.IN_DRIVER)
    assert isinstance(on_hw, int) and isinstance(in_driver, int) and 0 <= on_hw <= in_driver
    assert on_hw % 1000 == 0 and in_driver % 1000 == 0  # nanoseconds, from the HAL's microseconds
    assert execution.get_duration(Duration.FENCED_IN_DRIVER) == in_driver


def test_measure_timing_needs_a_single_explicit_device():
    execution = Execution(_compiled(add_model()))  # Compilation(model): all devices
    with pytest.raises(NnError) as info:
        execution.set_measure_timing(True)
    assert info.value.code == ResultCode.BAD_DATA and "exactly one device" in info.value.message


def test_argument_errors_name_the_input():
    execution = Execution(_compiled(add_model()))
    with pytest.raises(NnError, match=r"input 0 \(operand 0\): TENSOR_FLOAT32 needs dtype float32, "
                                      r"buffer has float64"):
        execution.set_input(0, np.ones((1, 4)))
    with pytest.raises(NnError, match=r"input 1 \(operand 1\): 8 bytes given, \[1, 4\] needs 16"):
        execution.set_input(1, np.ones(2, np.float32))
    with pytest.raises(NnError, match="input index 2 out of range"):
        execution.set_input(2, np.ones((1, 4), np.float32))
    with pytest.raises(NnError, match="read-only"):
        execution.set_output(0, bytes(16))


def test_dynamic_output_insufficient_size_then_retry():
    model = add_model(shape=(2, 3), out_shape=(0, 0))
    execution = Execution(_compiled(model))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    execution.set_input(0, a)
    execution.set_input(1, a)
    small = np.zeros(2, np.float32)
    execution.set_output(0, small)
    with pytest.raises(NnError) as info:
        execution.compute()
    assert info.value.code == ResultCode.OUTPUT_INSUFFICIENT_SIZE
    assert "output 0 (operand 3) needs shape [2, 3] (24 bytes), buffer has 8 bytes" in info.value.message
    assert execution.get_output_operand_dimensions(0) == (2, 3)
    assert execution.get_output_operand_rank(0) == 2
    with pytest.raises(NnError) as info:  # the execution completed (with that error)
        execution.set_output(0, np.zeros(6, np.float32))
    assert info.value.code == ResultCode.BAD_STATE
    retry = Execution(execution.compilation)
    retry.set_input(0, a)
    retry.set_input(1, a)
    big = np.zeros(6, np.float32)
    retry.set_output(0, big)
    retry.compute()
    assert big.reshape(2, 3).tolist() == (a + a).tolist()


def test_inputs_and_outputs_from_memory():
    model = add_model()
    execution = Execution(_compiled(model))
    with Memory.create_shared(64) as memory:
        memory.array(np.float32, (4,), 0)[:] = [1, 2, 3, 4]
        memory.array(np.float32, (4,), 16)[:] = 10
        execution.set_input_from_memory(0, memory, 0, 16)
        execution.set_input_from_memory(1, memory, 16, 16)
        execution.set_output_from_memory(0, memory, 32, 16)
        execution.compute()
        assert memory.array(np.float32, (4,), 32).tolist() == [11, 12, 13, 14]
        with pytest.raises(NnError, match=r"region \[56, 72\) outside"):
            Execution(execution.compilation).set_output_from_memory(0, memory, 56, 16)


def test_omitted_optional_input():
    model = _doubling_model("pad")
    execution = Execution(_compiled(model))
    execution.set_input(0, None)  # accepted as omitted; ADD then fails at run time with a message
    execution.set_output(0, np.zeros((1, 2), np.float32))
    with pytest.raises(NnError) as info:
        execution.compute()
    assert info.value.code == ResultCode.OP_FAILED
    assert "nnapi-reference" in info.value.message


def test_timeout_in_the_past_is_a_missed_deadline():
    model = add_model()
    from nnscope.runtime import devices
    compilation = Compilation.for_devices(model, devices()[:1])
    compilation.finish()
    execution = ones_add_execution(compilation)
    execution.set_timeout(1)  # 1 ns
    time.sleep(0.001)
    with pytest.raises(NnError) as info:
        execution.compute()
    assert info.value.code == ResultCode.MISSED_DEADLINE_TRANSIENT


def test_execution_needs_a_finished_compilation():
    with pytest.raises(NnError) as info:
        Execution(Compilation(add_model()))
    assert info.value.code == ResultCode.BAD_STATE


def test_vlog_cpuexe_logs_each_operation_with_tracing_off():
    assert not tracing.enabled()
    with captured_log("nn.CpuExecutor", "cpuexe") as lines:
        out = run(add_model(), np.float32([[1, 2, 3, 4]]), np.float32([[10, 20, 30, 40]]))
    assert out.tolist() == [[11, 22, 33, 44]]
    assert any("operation 0 (ADD) addFloat32 inputs [[1, 4], [1, 4], 'scalar']" in line for line in lines)
    assert any("output shapes [[1, 4]]" in line for line in lines)
