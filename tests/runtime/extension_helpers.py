"""Shared by the extension tests: an allowed program, Fibonacci numbers computed independently."""
from __future__ import annotations

import contextlib

from runtime._allowlist import Locations, Policy, override


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
