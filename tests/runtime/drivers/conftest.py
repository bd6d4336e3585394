"""Driver-process fixtures: real ``python -m nnscope.runtime.drivers`` processes, shut down after use."""
import pytest

from nnscope.runtime.drivers.ipc import RemoteDevice


@pytest.fixture
def fresh_device():
    """A factory of devices owned by one test (each its own driver process)."""
    devices = []

    def make(name="sample-all", **kwargs):
        device = RemoteDevice(name, **kwargs)
        devices.append(device)
        return device

    yield make
    for device in devices:
        device.shutdown()
