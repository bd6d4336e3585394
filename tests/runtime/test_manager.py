import numpy as np
import pytest

from nnscope.runtime import NnError, ResultCode, devices, get_device, manager
from nnscope.runtime.builtin_models import mobilenet, sample_input, tiny_add
from nnscope.runtime.drivers.registry import litert_available
from nnscope.runtime.hal.types import DeviceType
from tests.runtime.helpers import AddOnlyDevice, run


def test_devices_are_the_reference_cpu_then_the_sample_drivers():
    cpu, *drivers = devices()
    assert (cpu.name, cpu.type, cpu.version, cpu.feature_level) == ("nnapi-reference", DeviceType.CPU, "1.3", 30)
    assert get_device("nnapi-reference") is cpu
    assert [d.name for d in drivers] == ["sample-all", "sample-float-fast", "sample-float-slow",
                                         "sample-quant", "sample-minimal", "sample-fibonacci",
                                         "sample-oem"] + (["sample-litert"] if litert_available() else [])


def test_unknown_device_lists_valid_names():
    with pytest.raises(NnError) as info:
        get_device("gpu")
    assert info.value.code == ResultCode.BAD_DATA and "valid: nnapi-reference, sample-all," in info.value.message


def test_for_test_hooks_replace_and_reset():
    manager.forTest_set_devices([manager.cpu_device(), AddOnlyDevice()])
    try:
        assert [d.name for d in devices()] == ["nnapi-reference", "fake-add-only"]
    finally:
        manager.forTest_reset()
    assert [d.name for d in devices()][:2] == ["nnapi-reference", "sample-all"]


def test_builtin_models_are_deterministic_and_run():
    small = mobilenet(size=32, alpha=0.25, classes=10, seed=3)
    again = mobilenet(size=32, alpha=0.25, classes=10, seed=3)
    assert small.to_hal().operand_values == again.to_hal().operand_values
    [image] = sample_input(small)
    probabilities = run(small, image)
    assert probabilities.shape == (1, 10) and np.isclose(probabilities.sum(), 1.0, atol=1e-5)
    assert [op.type.name for op in small.operations][:3] == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D"]
    x = np.float32([[1, 2, 3, 4]])
    assert run(tiny_add(), x, x).tolist() == [[2, 4, 6, 8]]
