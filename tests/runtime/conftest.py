"""Runtime test fixtures: device sets chosen through the manager's test hooks."""
import pytest

from nnscope.runtime import manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from tests.support.device_sets import cpu_and_driver


@pytest.fixture
def cpu_only():
    """``manager.devices()`` is just the in-process ``nnapi-reference`` device.

    For tests of the runtime core that do not need driver processes.
    """
    cpu = CpuDevice()
    manager.forTest_set_devices([cpu])
    yield cpu
    manager.forTest_reset()


@pytest.fixture
def fast():
    """The CPU plus a fresh ``sample-float-fast`` driver process (each test its own)."""
    yield from cpu_and_driver("sample-float-fast", timeout_s=30.0)


@pytest.fixture
def float_and_quant_drivers():
    """The CPU plus fresh ``sample-float-fast`` and ``sample-quant`` driver processes (each test
    its own), by name."""
    made = [RemoteDevice("sample-float-fast", timeout_s=30.0), RemoteDevice("sample-quant", timeout_s=30.0)]
    manager.forTest_set_devices([CpuDevice(), *made])
    yield {d.name: d for d in made}
    manager.forTest_reset()
    for device in made:
        device.shutdown()


@pytest.fixture(scope="module")
def sample_all():
    """A ``sample-all`` driver process shared by one test module."""
    device = RemoteDevice("sample-all", timeout_s=30.0)
    yield device
    device.shutdown()
