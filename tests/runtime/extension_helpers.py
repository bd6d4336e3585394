"""Shared by the extension tests: an allowed program, Fibonacci numbers computed independently."""
from __future__ import annotations

import contextlib

from nnscope.runtime._allowlist import Locations, Policy, override


def vendor_policy() -> Policy:
    """A program in the vendor location: allowed to use extensions."""
    return Policy("/vendor/bin/nnscope-test", None, (), "(test)", Locations.from_environ({}))


def allowed():
    """A ``with`` block in which this process may use extensions."""
    return override(vendor_policy())


def refused():
    """A ``with`` block in which this process may not (an unlisted program, empty allowlist)."""
    return override(Policy("/opt/tools/app", None, (), "/nonexistent/allowlist",
                           Locations.from_environ({})))


def fibonacci(n: int) -> list[int]:
    """The first n Fibonacci numbers 1, 1, 2, ... with Python ints (the oracle)."""
    numbers, a, b = [], 1, 1
    for _ in range(n):
        numbers.append(a)
        a, b = b, a + b
    return numbers


suppress = contextlib.suppress


class ClaimingDevice:
    """A device that claims vendor extensions (for the runtime's "supported by a device" check:
    an extension name no device supports has no type); it runs nothing of them."""

    def __new__(cls, names, name: str = "test-vendor"):
        from nnscope.runtime.drivers.cpu import CpuDevice  # noqa: PLC0415
        from nnscope.runtime.hal.extensions import Extension  # noqa: PLC0415

        extensions = tuple(Extension(n) for n in names)
        device_class = type("ClaimingCpuDevice", (CpuDevice,), {
            "name": name, "supported_extensions": lambda self: extensions})
        return device_class()


@contextlib.contextmanager
def devices_claiming(*names):
    """A ``with`` block in which ``manager.devices()`` is the CPU, the in-process Fibonacci
    driver and a :class:`ClaimingDevice` of ``names``."""
    from nnscope.runtime import manager  # noqa: PLC0415
    from nnscope.runtime.drivers.cpu import CpuDevice  # noqa: PLC0415
    from nnscope.runtime.drivers.fibonacci import FibonacciDriver  # noqa: PLC0415

    manager.forTest_set_devices([CpuDevice(), FibonacciDriver(), ClaimingDevice(names)])
    try:
        yield
    finally:
        manager.forTest_reset()
