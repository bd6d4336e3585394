"""Device discovery and registry (AOSP ``DeviceManager``): ``devices()``, lookup, partitioning mode.

Devices are found once, on first use, and kept for the life of the process: the reference
CPU device ``nnapi-reference`` (always present; also the CPU fallback) followed by one
:class:`~runtime.drivers.ipc.RemoteDevice` per registered sample driver (``NNSCOPE_DRIVERS``,
default all; see :mod:`runtime.drivers.registry`). A driver process starts on the first real
call to its device and stops at exit (or at :func:`shutdown`).

:data:`NN_PARTITION` mirrors ``debug.nn.partition``; :func:`partitioning` returns it and
:func:`override_partitioning` changes it for a ``with`` block (tests). Tests replace the devices
with :func:`forTest_set_devices` and undo it with :func:`forTest_reset`.

Example:
    >>> [d.name for d in devices()][:2]
    ['nnapi-reference', 'sample-all']
    >>> get_device("nnapi-reference").type.name
    'CPU'
    >>> partitioning()
    <PartitioningMode.WITH_FALLBACK: 1>
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Iterator, Sequence

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.drivers import registry
from nnscope.runtime.drivers.base import Device
from nnscope.runtime.drivers.cpu import NAME as CPU_DEVICE_NAME
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.plan import (PARTITIONING_NO, PARTITIONING_WITH_FALLBACK, PARTITIONING_WITHOUT_FALLBACK,
                          PartitioningMode)
from nnscope.tracing import Phase

__all__ = ["devices", "get_device", "cpu_device", "CPU_DEVICE_NAME", "NN_PARTITION", "partitioning",
           "override_partitioning", "allows_fallback", "start_devices", "shutdown", "forTest_set_devices",
           "forTest_reset", "PartitioningMode", "PARTITIONING_NO", "PARTITIONING_WITH_FALLBACK",
           "PARTITIONING_WITHOUT_FALLBACK"]

NN_PARTITION = "NN_PARTITION"
"""Environment variable: how compilations split models (``debug.nn.partition`` on Android).

``0``: no partitioning: the whole model on the single best device that supports every
operation, else on the CPU (CPU fallback allowed). ``1`` (default): partition across devices,
with CPU fallback at compilation and execution. ``2``: partition without CPU fallback. Read
once, at import; invalid values log a warning and mean ``1``. Compilations created with
``Compilation.for_devices`` always partition without fallback, as in NNAPI.
"""

_log = logging.getLogger("nn.Manager")
_lock = threading.Lock()
_devices: tuple[Device, ...] | None = None
_discovered: tuple[Device, ...] = ()  # what _discover() made (shut down by forTest_reset)


def _read_partitioning(value: str | None) -> PartitioningMode:
    if value is None or not value.strip():
        return PARTITIONING_WITH_FALLBACK
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number not in tuple(PartitioningMode):
        _log.warning("%s=%r is not 0, 1 or 2; using 1", NN_PARTITION, value)
        return PARTITIONING_WITH_FALLBACK
    return PartitioningMode(number)


_partitioning = _read_partitioning(os.environ.get(NN_PARTITION))


def partitioning() -> PartitioningMode:
    """The ``NN_PARTITION`` mode of default compilations (0, 1 or 2)."""
    return _partitioning


def allows_fallback(mode: int) -> bool:
    """Whether compilations in ``mode`` may fall back to the CPU (every mode but 2)."""
    return mode != PARTITIONING_WITHOUT_FALLBACK


@contextlib.contextmanager
def override_partitioning(mode: int) -> Iterator[PartitioningMode]:
    """Use partitioning ``mode`` inside the ``with`` block (scoped override for tests)."""
    global _partitioning
    if mode not in tuple(PartitioningMode):
        raise ValueError(f"partitioning mode must be 0, 1 or 2, got {mode!r}")
    mode = PartitioningMode(mode)
    previous, _partitioning = _partitioning, mode
    try:
        yield mode
    finally:
        _partitioning = previous


def _discover() -> tuple[Device, ...]:
    with tracing.runtime(Phase.INITIALIZATION, "DeviceManager::findAvailableDevices"):
        try:
            remote = registry.remote_devices()
        except registry.UnknownDriverError as error:
            raise NnError(ResultCode.BAD_DATA, f"{registry.NNSCOPE_DRIVERS}: {error}") from None
        found: tuple[Device, ...] = (CpuDevice(), *remote)
        _log_devices(found)
        return found


def _log_devices(found: Sequence[Device]) -> None:
    """VLOG manager; driver processes are not started just to be logged."""
    if vlog.is_on("manager"):
        vlog.log("manager", "Manager", "found %d device(s)", len(found))
        for device in found:
            if not device.launched():
                vlog.log("manager", "Manager", "device %s: driver process (starts on first use)",
                         device.name)
                continue
            vlog.log("manager", "Manager", "device %s: type %s, version %s, feature level %d",
                     device.name, device.type.name, device.version, device.feature_level)


def devices() -> tuple[Device, ...]:
    """All available devices (ANeuralNetworks_getDeviceCount / getDevice), CPU first.

    Raises:
        NnError: BAD_DATA when ``NNSCOPE_DRIVERS`` names an unknown driver.
    """
    global _devices, _discovered
    if _devices is None:
        with _lock:
            if _devices is None:
                _devices = _discovered = _discover()
    return _devices


def get_device(name: str) -> Device:
    """The device called ``name``.

    Raises:
        NnError: UNEXPECTED_NULL for None; BAD_DATA for an unknown name, listing the valid ones.
    """
    if name is None:
        raise NnError(ResultCode.UNEXPECTED_NULL, "get_device: name is None")
    if not isinstance(name, str):
        raise NnError(ResultCode.BAD_DATA, f"get_device: name must be a string, got {type(name).__name__}")
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


def start_devices(selected: Sequence[Device]) -> None:
    """Start the driver processes of ``selected`` in parallel and wait until they serve.

    Called by ``Compilation.finish`` (first real use); a driver that cannot start is left to
    fail its first call (it then takes no work). Traced as Initialization. Drivers already
    running join the current trace session if they are not in it.
    """
    pending = [d for d in selected if not d.launched()]
    if not pending:
        for device in selected:
            device.launch()  # running drivers join a trace session started since
        return
    with tracing.runtime(Phase.INITIALIZATION, "DeviceManager::startDrivers"):
        for device in selected:
            device.launch()
        for device in pending:
            try:
                device.launch(wait=True)
            except HalError as error:
                _log.warning("driver %s did not start: %s", device.name, error)


def shutdown() -> None:
    """Stop the driver processes of the discovered devices, all at once, and forget them (they
    also stop at exit); the next :func:`devices` discovers again, with fresh processes."""
    global _devices, _discovered
    with _lock:
        stale, _discovered = _discovered, ()
        if _devices is stale:
            _devices = None
    parent = tracing.context()  # the drivers' last spans belong to the caller's span

    def stop(device: Device) -> None:
        with tracing.adopt(parent):
            device.shutdown()
    stopping = [threading.Thread(target=stop, args=(device,), name="nn-shutdown", daemon=True)
                for device in stale]
    for thread in stopping:  # in parallel: each waits (bounded) for its process to exit
        thread.start()
    for thread in stopping:
        thread.join()


def forTest_set_devices(replacement: Sequence[Device]) -> None:
    """Test hook: make ``devices()`` return ``replacement``."""
    global _devices
    with _lock:
        _devices = tuple(replacement)
        _log_devices(_devices)


def forTest_reset() -> None:
    """Test hook: forget the device list; the next ``devices()`` discovers again.

    Driver processes of the previous discovery are stopped.
    """
    global _devices
    shutdown()
    with _lock:
        _devices = None
