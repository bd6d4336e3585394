"""Runtime test fixtures: device sets chosen through the manager's test hooks."""
import pytest

from runtime import manager
from runtime.drivers.cpu import CpuDevice


@pytest.fixture
def cpu_only():
    """``manager.devices()`` is just the in-process ``nnapi-reference`` device.

    For tests of the runtime core that do not need driver processes.
    """
    cpu = CpuDevice()
    manager.forTest_set_devices([cpu])
    yield cpu
    manager.forTest_reset()
