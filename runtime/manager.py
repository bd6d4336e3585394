"""Device discovery and registry (AOSP ``DeviceManager``): ``devices()`` and lookup by name.

Devices are found once, on first use, and kept for the life of the process. The reference CPU
device ``nnapi-reference`` is always present (it is also the fallback when partitioning).
Tests add or replace devices with :func:`forTest_set_devices` and undo it with
:func:`forTest_reset`.

Example:
    >>> [d.name for d in devices()]
    ['nnapi-reference']
    >>> get_device("nnapi-reference").type.name
    'CPU'
"""
from __future__ import annotations

import threading
from typing import Sequence

import tracing
import vlog
from runtime.api import NnError, ResultCode
from runtime.drivers.base import Device
from runtime.drivers.cpu import NAME as CPU_DEVICE_NAME
from runtime.drivers.cpu import CpuDevice
from tracing import Phase

__all__ = ["devices", "get_device", "cpu_device", "CPU_DEVICE_NAME", "forTest_set_devices",
           "forTest_reset"]

_lock = threading.Lock()
_devices: tuple[Device, ...] | None = None


def _discover() -> tuple[Device, ...]:
    with tracing.runtime(Phase.INITIALIZATION, "DeviceManager::findAvailableDevices"):
        found: tuple[Device, ...] = (CpuDevice(),)
        _log_devices(found)
        return found


def _log_devices(found: Sequence[Device]) -> None:
    if vlog.is_on("manager"):
        vlog.log("manager", "Manager", "found %d device(s)", len(found))
        for device in found:
            vlog.log("manager", "Manager", "device %s: type %s, version %s, feature level %d",
                     device.name, device.type.name, device.version, device.feature_level)


def devices() -> tuple[Device, ...]:
    """All available devices (ANeuralNetworks_getDeviceCount / getDevice), CPU included."""
    global _devices
    if _devices is None:
        with _lock:
            if _devices is None:
                _devices = _discover()
    return _devices


def get_device(name: str) -> Device:
    """The device called ``name``.

    Raises:
        NnError: BAD_DATA for an unknown name, listing the valid ones.
    """
    for device in devices():
        if device.name == name:
            return device
    valid = ", ".join(d.name for d in devices())
    raise NnError(ResultCode.BAD_DATA, f"unknown device {name!r}; valid: {valid}")


def cpu_device() -> Device:
    """The reference CPU device (the partitioner's fallback)."""
    for device in devices():
        if device.name == CPU_DEVICE_NAME:
            return device
    return CpuDevice()


def forTest_set_devices(replacement: Sequence[Device]) -> None:
    """Test hook: make ``devices()`` return ``replacement``."""
    global _devices
    with _lock:
        _devices = tuple(replacement)
        _log_devices(_devices)


def forTest_reset() -> None:
    """Test hook: forget the device list; the next ``devices()`` discovers again."""
    global _devices
    with _lock:
        _devices = None
