import numpy as np
import pytest

from nnscope.runtime import Compilation, Execution, NnError, Preference, ResultCode, devices, manager
from tests.runtime.helpers import AddOnlyDevice, add_model, chain_model, run


@pytest.fixture
def fake_devices():
    fake = AddOnlyDevice()
    manager.forTest_set_devices([manager.cpu_device(), fake])
    yield fake
    manager.forTest_reset()


def _inputs():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 2.0, np.float32)
    return x, y, (x + 0.5) * y + 0.5


def test_single_device_plan_is_simple(cpu_only):
    compilation = Compilation(add_model())
    compilation.set_preference(Preference.SUSTAINED_SPEED)
    compilation.finish()
    plan = compilation.plan
    assert plan.simple and [s.device.name for s in plan.steps] == ["nnapi-reference"]
    assert plan.steps[0].operations == (0,)


def test_settings_are_validated_and_frozen_after_finish(tmp_path):
    compilation = Compilation(add_model())
    with pytest.raises(NnError, match="setPreference: invalid value 7"):
        compilation.set_preference(7)
    with pytest.raises(NnError, match="token must be 32 bytes"):
        compilation.set_caching(str(tmp_path), b"short")
    compilation.set_caching(str(tmp_path), bytes(32))
    with pytest.raises(NnError, match="exactly one device"):
        compilation.set_timeout(10)
    compilation.finish()
    with pytest.raises(NnError) as info:
        compilation.set_priority(110)
    assert info.value.code == ResultCode.BAD_STATE


def test_unfinished_model_is_bad_state():
    from nnscope.runtime import Model
    with pytest.raises(NnError) as info:
        Compilation(Model())
    assert info.value.code == ResultCode.BAD_STATE


def test_partitioning_over_two_devices(fake_devices):
    x, y, expected = _inputs()
    compilation = Compilation(chain_model())
    compilation.finish()
    plan = compilation.plan
    assert [(s.device.name, s.operations) for s in plan.steps] == [
        ("fake-add-only", (0,)), ("nnapi-reference", (1,)), ("fake-add-only", (2,))]
    assert plan.crossing == {4, 5}  # the two temporaries passed between devices
    np.testing.assert_allclose(run(compilation, x, y), expected)


def test_for_devices_without_fallback_rejects_unsupported_operations(fake_devices):
    with pytest.raises(NnError) as info:
        Compilation.for_devices(chain_model(), [fake_devices]).finish()
    assert info.value.code == ResultCode.BAD_DATA
    assert "no device can do operation 1 (MUL); devices: fake-add-only" in info.value.message


def test_for_devices_single_cpu():
    x, y, expected = _inputs()
    compilation = Compilation.for_devices(chain_model(), [manager.cpu_device()])
    compilation.finish()
    np.testing.assert_allclose(run(compilation, x, y), expected)


def test_measure_timing_needs_one_device(fake_devices):
    compilation = Compilation(chain_model())
    compilation.finish()
    with pytest.raises(NnError, match="exactly one device") as info:
        Execution(compilation).set_measure_timing(True)
    assert info.value.code == ResultCode.BAD_DATA  # Android 11's ExecutionBuilder::setMeasureTiming
