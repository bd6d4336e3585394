"""ANeuralNetworksDevice_wait (``Device.wait``): blocks until the device is live. An in-process
device is; a driver process is once it answers, restarted if it died; a restart that fails (or
a device shut down) is OP_FAILED."""
from __future__ import annotations

import os
import signal

import pytest

from nnscope.runtime import NnError, ResultCode
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice


@pytest.fixture
def device():
    remote = RemoteDevice("sample-float-fast", timeout_s=30.0)
    yield remote
    remote.shutdown()


def test_an_in_process_device_is_live():
    assert CpuDevice().wait() is None


def test_wait_starts_a_driver_that_never_ran(device):
    assert device.pid is None
    device.wait()
    assert device.process.alive() and device.capabilities() is not None


def test_wait_restarts_a_driver_that_died(device):
    device.wait()
    old_pid = device.pid
    os.kill(old_pid, signal.SIGKILL)
    device.process.popen.wait()
    device.wait()  # the death is found by the PING, and the driver restarted
    assert device.pid != old_pid and device.process.alive() and device.backoff.restarts == 1


def test_a_restart_that_fails_is_op_failed(device, monkeypatch):
    device.wait()
    monkeypatch.setenv("PYTHONHOME", "/nonexistent")  # the next driver process cannot start
    device.process.kill()
    device.process.popen.wait()
    with pytest.raises(NnError, match="could not be restarted|died again") as error:
        device.wait()
    assert error.value.code == ResultCode.OP_FAILED


def test_a_device_shut_down_is_op_failed(device):
    device.wait()
    device.shutdown()
    with pytest.raises(NnError) as error:
        device.wait()
    assert error.value.code == ResultCode.OP_FAILED
