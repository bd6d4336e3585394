"""Fixtures of the CTS tests."""
from __future__ import annotations

import pytest

from nnscope.runtime import manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice


@pytest.fixture(scope="module")
def sample_all():
    """A real sample-all driver process (with the CPU) as the devices, for the module."""
    device = RemoteDevice("sample-all", timeout_s=60.0)
    manager.forTest_set_devices([CpuDevice(), device])
    yield device
    manager.forTest_reset()
    device.shutdown()
