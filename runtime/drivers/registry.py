"""Name -> driver registry: which sample drivers exist and which ones this process registers.

:data:`NNSCOPE_DRIVERS` selects the registered drivers (comma-separated names; unset or empty
means all of them). An unknown name raises :class:`UnknownDriverError` listing the valid ones.
:func:`create_driver` builds the in-process driver object (what a driver process serves);
:func:`remote_devices` gives the runtime one ``RemoteDevice`` per registered driver.

Example:
    >>> registered({NNSCOPE_DRIVERS: "sample-quant, sample-all"})
    ('sample-quant', 'sample-all')
    >>> registered({NNSCOPE_DRIVERS: "sample-gpu"})
    Traceback (most recent call last):
    ...
    nnscope.runtime.drivers.registry.UnknownDriverError: unknown driver 'sample-gpu'; valid drivers:
    sample-all, sample-float-fast, sample-float-slow, sample-quant, sample-minimal, ...
"""
from __future__ import annotations

import importlib.util
import os
from typing import Mapping

from nnscope.runtime.drivers.base import Device
from nnscope.runtime.drivers.fibonacci import FibonacciDriver
from nnscope.runtime.drivers.oem import OemDriver
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver

NNSCOPE_DRIVERS = "NNSCOPE_DRIVERS"
"""Comma-separated names of the driver processes the runtime registers (default: all samples)."""


class UnknownDriverError(ValueError):
    """A driver name that is not in the registry; the message lists the valid names."""


LITERT = "sample-litert"
#: Why ``sample-litert`` is absent when LiteRT is not installed (``nnscope devices`` prints it).
LITERT_MISSING = f"{LITERT}: not available: ai-edge-litert is not installed (pip install 'nnscope[litert]')"


def _litert_driver() -> Device:
    from nnscope.runtime.drivers.litert import LiteRtDriver  # noqa: PLC0415 - LiteRT and the translator load on use
    return LiteRtDriver()


def litert_available() -> bool:
    """Whether ``ai-edge-litert`` (the ``litert`` extra) is installed (without importing it)."""
    return importlib.util.find_spec("ai_edge_litert") is not None


#: Drivers beyond the sample configs: vendor-extension and OEM examples, and the LiteRT
#: accelerator when ``ai-edge-litert`` is installed.
EXTRA_DRIVERS = {FibonacciDriver.name: FibonacciDriver, OemDriver.name: OemDriver,
                 **({LITERT: _litert_driver} if litert_available() else {})}


def absent() -> tuple[str, ...]:
    """One line per known driver that cannot run here, saying why (``nnscope devices``)."""
    return () if litert_available() else (LITERT_MISSING,)


def available() -> tuple[str, ...]:
    """Every driver name the registry knows, in registration order."""
    return (*SAMPLES, *EXTRA_DRIVERS)


def check_name(name: str) -> str:
    if name not in SAMPLES and name not in EXTRA_DRIVERS:
        raise UnknownDriverError(f"unknown driver {name!r}; valid drivers: {', '.join(available())}")
    return name


def registered(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Names selected by :data:`NNSCOPE_DRIVERS` in ``environ`` (default ``os.environ``)."""
    value = (os.environ if environ is None else environ).get(NNSCOPE_DRIVERS, "")
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        return available()
    return tuple(dict.fromkeys(check_name(n) for n in names))


def create_driver(name: str) -> Device:
    """The in-process driver object served by ``python -m nnscope.runtime.drivers <name>``."""
    if check_name(name) in EXTRA_DRIVERS:
        return EXTRA_DRIVERS[name]()
    return SampleDriver(SAMPLES[name])


def remote_devices(environ: Mapping[str, str] | None = None) -> list:
    """One (not yet started) ``RemoteDevice`` per registered driver."""
    from nnscope.runtime.drivers.ipc.client.device import RemoteDevice  # noqa: PLC0415 - avoid import cycle

    return [RemoteDevice(name) for name in registered(environ)]
