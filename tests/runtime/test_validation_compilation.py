"""AOSP ``TestValidation``'s compilation cases, ported: ``ValidationTestCompilation``,
``ValidationTestCompilationForDevices_1`` / ``_2``, ``ValidationTestInvalidCompilation``.

One test per C case, named ``test_<Fixture>_<Case>``. The ForDevices fixtures compile for the
first device (``_1``) or the first two devices (``_2``) of an in-process device list. Not ported:
``ValidationTestInvalidCompilation.MemoryDescAddRole`` and the Burst / fenced parts of
``ExecutionUsability`` / ``ExecutionTiming`` (no Burst, fenced or MemoryDesc API yet).
"""
import pytest

from nnscope.runtime import (Compilation, Duration, Execution, Model, Preference, Priority, ResultCode,
                     manager)
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from tests.runtime.helpers import AddOnlyDevice
from tests.runtime.validation_helpers import (BAD_DATA, BAD_STATE, NO_ERROR, SHORT_WAIT_NS,
                                              UINT64_MAX, UNEXPECTED_NULL, SecondCpu, bind_add,
                                              code, create_model)

TOKEN = bytes(32)
_MISSED = (ResultCode.MISSED_DEADLINE_TRANSIENT, ResultCode.MISSED_DEADLINE_PERSISTENT)
CACHE_DIR = "/data/local/tmp"  # as the C test: not checked by setCaching


@pytest.fixture
def two_devices():
    devices = [CpuDevice(), SecondCpu()]
    manager.forTest_set_devices(devices)
    yield devices
    manager.forTest_reset()


@pytest.fixture
def compilation(two_devices):
    """``ValidationTestCompilation``: ``ANeuralNetworksCompilation_create`` of createModel()."""
    return Compilation(create_model())


@pytest.fixture
def for_one(two_devices):
    """``ValidationTestCompilationForDevices_1``: createForDevices with device 0."""
    model = create_model()
    assert model.get_supported_operations_for_devices(two_devices[:1]) == [True]
    return Compilation.for_devices(model, two_devices[:1])


@pytest.fixture
def for_two(two_devices):
    """``ValidationTestCompilationForDevices_2``: createForDevices with devices 0 and 1."""
    model = create_model()
    assert model.get_supported_operations_for_devices(two_devices) == [True]
    return Compilation.for_devices(model, two_devices)


def test_ValidationTestCompilation_SetPreference(compilation):
    assert code(compilation.set_preference, 40) == BAD_DATA
    assert code(compilation.set_preference, Preference.LOW_POWER) == NO_ERROR


def test_ValidationTestCompilation_SetCaching(compilation):
    assert code(compilation.set_caching, None, TOKEN) == UNEXPECTED_NULL
    assert code(compilation.set_caching, CACHE_DIR, None) == UNEXPECTED_NULL


def test_ValidationTestCompilation_SetPriority(compilation):
    for invalid in (0, Priority.LOW - 1, Priority.LOW + 1, Priority.MEDIUM - 1, Priority.MEDIUM + 1,
                    Priority.HIGH - 1, Priority.HIGH + 1):
        assert code(compilation.set_priority, invalid) == BAD_DATA, invalid


def test_ValidationTestCompilation_SetTimeout(compilation):
    assert code(compilation.set_timeout, SHORT_WAIT_NS) == BAD_DATA  # not createForDevices with 1


def test_ValidationTestCompilation_CreateExecution(compilation):
    assert code(Execution, None) == UNEXPECTED_NULL
    assert code(Execution, compilation) == BAD_STATE  # not finished


def _check_finished(compilation):
    assert code(compilation.finish) == NO_ERROR
    assert code(compilation.set_preference, Preference.FAST_SINGLE_ANSWER) == BAD_STATE
    assert code(compilation.set_priority, Priority.MEDIUM) == BAD_STATE
    assert code(compilation.set_timeout, SHORT_WAIT_NS) == BAD_STATE
    assert code(compilation.set_caching, CACHE_DIR, TOKEN) == BAD_STATE
    assert code(compilation.finish) == BAD_STATE


def test_ValidationTestCompilation_Finish(compilation):
    _check_finished(compilation)


def test_ValidationTestCompilation_ExecutionSetTimeout(compilation):
    compilation.finish()
    assert code(Execution(compilation).set_timeout, SHORT_WAIT_NS) == BAD_DATA


def test_ValidationTestCompilation_ExecutionTiming(compilation):
    _timing_is_bad_data(compilation)


def _timing_is_bad_data(compilation):
    """Timing is for single-device compilations (createForDevices with one device) only."""
    compilation.finish()
    execution = Execution(compilation)
    assert code(execution.set_measure_timing, False) == BAD_DATA
    assert code(execution.set_measure_timing, True) == BAD_DATA


def _too_late(execution, memory):
    """``testTooLate`` of ExecutionUsability: everything a started execution refuses."""
    buffer = bytearray(8)
    for call, args in ((execution.set_loop_timeout, (SHORT_WAIT_NS,)),
                       (execution.set_input, (0, bytes(8))), (execution.set_output, (0, buffer)),
                       (execution.set_input_from_memory, (0, memory, 0, 8)),
                       (execution.set_output_from_memory, (0, memory, 0, 8)),
                       (execution.start_compute, ()), (execution.compute, ())):
        assert code(call, *args) == BAD_STATE, call.__name__


@pytest.mark.parametrize("kind", ["ASYNC", "SYNC"])
def test_ValidationTestCompilation_ExecutionUsability(compilation, kind):
    from tests.runtime.validation_helpers import shared_memory  # noqa: PLC0415
    compilation.finish()
    execution = Execution(compilation)
    bind_add(execution)
    with shared_memory(8) as memory:
        if kind == "ASYNC":
            event = execution.start_compute()
            _too_late(execution, memory)
            assert code(event.wait) == NO_ERROR
        else:
            assert code(execution.compute) == NO_ERROR
        _too_late(execution, memory)


def test_ValidationTestCompilationForDevices_1_SetPreference(for_one):
    assert code(for_one.set_preference, 40) == BAD_DATA


def test_ValidationTestCompilationForDevices_1_SetCaching(for_one):
    assert code(for_one.set_caching, None, TOKEN) == UNEXPECTED_NULL
    assert code(for_one.set_caching, CACHE_DIR, None) == UNEXPECTED_NULL


def test_ValidationTestCompilationForDevices_1_CreateExecution(for_one):
    assert code(Execution, None) == UNEXPECTED_NULL
    assert code(Execution, for_one) == BAD_STATE


def test_ValidationTestCompilationForDevices_1_Finish(for_one):
    _check_finished(for_one)


def test_ValidationTestCompilationForDevices_1_SetTimeout(for_one):
    assert code(for_one.set_timeout, SHORT_WAIT_NS) == NO_ERROR
    assert code(for_one.finish) in (NO_ERROR, *_MISSED)


def test_ValidationTestCompilationForDevices_1_SetTimeoutMaximum(for_one):
    assert code(for_one.set_timeout, UINT64_MAX) == NO_ERROR
    assert code(for_one.finish) == NO_ERROR


@pytest.mark.parametrize("kind", ["ASYNC", "SYNC"])
def test_ValidationTestCompilationForDevices_1_ExecutionTiming(for_one, kind):
    for_one.finish()
    execution = Execution(for_one)
    assert code(execution.set_measure_timing, False) == NO_ERROR
    assert code(execution.set_measure_timing, True) == NO_ERROR
    bind_add(execution)
    for duration in (Duration.ON_HARDWARE, Duration.IN_DRIVER):  # not before it finished
        assert code(execution.get_duration, duration) == BAD_STATE
    if kind == "ASYNC":
        event = execution.start_compute()
        assert code(execution.set_measure_timing, True) == BAD_STATE
        assert code(event.wait) == NO_ERROR
    else:
        assert code(execution.compute) == NO_ERROR
    assert code(execution.set_timeout, SHORT_WAIT_NS) == BAD_STATE
    assert code(execution.set_measure_timing, False) == BAD_STATE
    assert code(execution.set_measure_timing, True) == BAD_STATE
    for duration in (-1, 4):
        assert code(execution.get_duration, duration) == BAD_DATA
    for duration in Duration:
        value = execution.get_duration(duration)
        assert value is None or value >= 0


def _run_with_timeout(compilation, duration_ns, kind):
    compilation.finish()
    execution = Execution(compilation)
    bind_add(execution)
    assert code(execution.set_timeout, duration_ns) == NO_ERROR
    if kind == "ASYNC":
        return code(execution.start_compute().wait)
    return code(execution.compute)


@pytest.mark.parametrize("kind", ["ASYNC", "SYNC"])
def test_ValidationTestCompilationForDevices_1_ExecutionSetTimeout(for_one, kind):
    assert _run_with_timeout(for_one, SHORT_WAIT_NS, kind) in (NO_ERROR, *_MISSED)


@pytest.mark.parametrize("kind", ["ASYNC", "SYNC"])
def test_ValidationTestCompilationForDevices_1_ExecutionSetTimeoutMaximum(for_one, kind):
    assert _run_with_timeout(for_one, UINT64_MAX, kind) == NO_ERROR


def test_ValidationTestCompilationForDevices_2_SetTimeout(for_two):
    assert code(for_two.set_timeout, SHORT_WAIT_NS) == BAD_DATA


def test_ValidationTestCompilationForDevices_2_ExecutionSetTimeout(for_two):
    for_two.finish()
    assert code(Execution(for_two).set_timeout, SHORT_WAIT_NS) == BAD_DATA


def test_ValidationTestCompilationForDevices_2_ExecutionTiming(for_two):
    _timing_is_bad_data(for_two)


def test_ValidationTestInvalidCompilation_CreateExecution():
    """A compilation whose finish failed (a device that cannot run the model's MUL)."""
    model = Model("mul")
    a, out = model.add_operand(T.TENSOR_FLOAT32, [1]), model.add_operand(T.TENSOR_FLOAT32, [1])
    act = model.add_operand(T.INT32)
    model.set_operand_value(act, 0)
    model.add_operation(Op.MUL, [a, a, act], [out])
    model.identify_inputs_and_outputs([a], [out])
    model.finish()
    device = AddOnlyDevice()
    assert model.get_supported_operations_for_devices([device]) == [False]
    invalid = Compilation.for_devices(model, [device])
    assert code(invalid.finish) == BAD_DATA
    assert code(Execution, invalid) == BAD_STATE
    assert code(invalid.finish) == BAD_STATE
    assert code(invalid.set_preference, Preference.LOW_POWER) == BAD_STATE


# ---------------------------------------------------------------- rules of the issue beyond TestValidation
def test_device_lists_and_argument_types(two_devices):
    model = create_model()
    cpu = two_devices[0]
    assert code(Compilation, model, [cpu, "nnapi-reference"]) == BAD_DATA  # not a device
    assert code(Compilation, model, "nnapi-reference") == BAD_DATA
    assert code(Compilation, "model") == BAD_DATA
    assert code(Compilation.for_devices, Model("unfinished"), [cpu]) == BAD_STATE
    compilation = Compilation(model)
    assert code(compilation.set_preference, "fast") == BAD_DATA
    assert code(compilation.set_preference, None) == BAD_DATA
    assert code(compilation.set_caching, CACHE_DIR, b"short") == BAD_DATA
    assert code(compilation.set_caching, 42, TOKEN) == BAD_DATA
    assert code(compilation.set_caching, CACHE_DIR, TOKEN) == NO_ERROR  # no directory check
    one = Compilation.for_devices(model, [cpu])
    assert code(one.set_timeout, -1) == BAD_DATA
    assert code(one.set_timeout, UINT64_MAX + 1) == BAD_DATA
    assert code(one.set_timeout, 1.5) == BAD_DATA
