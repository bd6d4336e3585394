"""Device sets for fixtures: the CPU plus one real driver process, set through the manager's
test hooks and torn down after use."""
from __future__ import annotations

from nnscope.runtime import manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice


def cpu_and_driver(name: str, timeout_s: float):
    """Generator for a fixture: yields the driver's RemoteDevice while ``manager.devices()``
    is the CPU and it; then resets the devices and shuts the driver down."""
    device = RemoteDevice(name, timeout_s=timeout_s)
    manager.forTest_set_devices([CpuDevice(), device])
    yield device
    manager.forTest_reset()
    device.shutdown()
