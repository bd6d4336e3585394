"""Internal: sync fences for fenced execution (``startComputeWithDependencies``).

A sync fence here is a Linux ``eventfd``: unsignalled it is not readable; it is signalled once by
writing a count, after which every duplicate of it polls readable for good (nobody reads it, so
the count stays). The count says how the work ended, as a kernel sync_file carries its status:
:data:`SIGNALED` (1) for success, :data:`FAILED` (the largest count, so the fence stops being
writable) for an error; ``runtime.hal.sync_fence`` tells them apart without consuming it. Any other pollable fd works as a foreign fence, with
AOSP's ``syncWait`` rules: POLLIN is signalled, POLLERR/POLLNVAL is an error. The fds are plain
file descriptors, so a HAL ``executeFenced`` can later pass them across the socket (SCM_RIGHTS).

Example:
    >>> fd = new_fence()
    >>> state(fd, 0)
    'active'
    >>> signal(fd, ok=False); state(fd, 0)
    'error'
    >>> os.close(fd)
"""
from __future__ import annotations

import os
import time
from typing import Callable, Sequence

import numpy as np

from nnscope.runtime import _checks as checks
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.hal.sync_fence import (ACTIVE, DONE, ERROR, FAILED, SIGNALED,  # noqa: F401
                                                new_fence, signal, wait)
from nnscope.runtime.hal.types import SCALAR_TYPES
from nnscope.timing import NS_PER_US, Duration, FencedTiming, Timing

def dup(fd, call: str) -> int:
    """A duplicate of a caller's fence fd (NNAPI owns the copy); BAD_DATA for a bad fd."""
    checks.not_null(fd, call, "sync_fence_fd")
    fd = checks.integer(fd, call, "sync_fence_fd", 1, 2**31 - 1)  # AOSP rejects fd <= 0
    try:
        return os.dup(fd)
    except OSError as error:
        raise checks.bad(call, f"sync_fence_fd {fd} is not open ({error.strerror})") from None


#: ACTIVE, DONE or ERROR after polling a fence for up to ``timeout`` seconds (None: forever).
state = wait


def dependencies(events, call: str, event_type: type) -> tuple:
    """The dependency events: UNEXPECTED_NULL for None, BAD_DATA for a non-Event, OP_FAILED
    for one already failed ("already in a bad state", as NNAPI documents)."""
    items = checks.sequence(events, call, "dependencies")
    for position, event in enumerate(items):
        checks.not_null(event, call, f"dependencies[{position}]")
        if not isinstance(event, event_type):
            raise checks.bad(call, f"dependencies[{position}] is a {type(event).__name__}, not an Event")
        if event.done and event.failure(0) is not None:
            raise NnError(ResultCode.OP_FAILED, f"{call}: dependencies[{position}] has already failed")
    return items


def wait_for(events: Sequence, on_failure: Callable[[], None]) -> int:
    """Block until every dependency signalled; return the nanoseconds waited. A failed one
    calls ``on_failure`` and fails the execution with OP_FAILED (the sample driver's failed
    ``syncWait``)."""
    start = time.monotonic_ns()
    for position, event in enumerate(events):
        failure = event.failure(None)
        if failure is not None:
            on_failure()
            raise NnError(ResultCode.OP_FAILED, f"startComputeWithDependencies: dependencies[{position}] "
                          f"failed: {failure.code.name}: {failure.message}")
    return time.monotonic_ns() - start


def earlier(first: int | None, second: int | None) -> int | None:
    """The earlier of two optional deadlines."""
    return second if first is None else first if second is None else min(first, second)


def check_outputs_specified(operands, arguments, call: str, on_failure: Callable[[], None]) -> None:
    """BAD_DATA (as NeuralNetworks.h says), after calling ``on_failure``, when an output
    tensor's shape is not fully specified (AOSP's ``areOutputsFullySpecified``): a fenced run
    cannot report a new shape."""
    for index, (operand, arg) in enumerate(zip(operands, arguments)):
        if arg.has_no_value or operand.type in SCALAR_TYPES:
            continue
        dims = arg.dimensions or operand.dimensions
        if not dims or 0 in dims:
            on_failure()
            raise NnError(ResultCode.BAD_DATA, f"{call}: output {index} has unspecified dimensions "
                          f"{list(dims)}; a fenced execution needs fully specified outputs")


def fenced_timing(timing: Timing | None, waited_ns: int) -> FencedTiming | None:
    """Launched and fenced timing of a fenced run from the device's Timing (measured after
    the fences signalled): launched time in driver also counts the wait for the fences."""
    if timing is None:
        return None
    in_driver = timing.in_driver
    in_driver = None if in_driver is None else in_driver + waited_ns // NS_PER_US
    launched = Timing.from_us(timing.on_device, in_driver)
    return FencedTiming(launched, timing)


def duration_ns(timing: Timing | None, fenced: FencedTiming | None, code) -> int | None:
    """One ``getDuration`` value in nanoseconds, or None when unknown. A non-fenced run
    reports its Timing for the fenced codes too, as NNAPI."""
    if fenced is None:
        if timing is None:
            return None
        fenced = FencedTiming.unfenced(timing)
    value = fenced.get(Duration(int(code)))
    return None if value is None else value * NS_PER_US


def known_duration(code) -> bool:
    """Whether ``code`` is an ``ANEURALNETWORKS_*DURATION_*`` code (an integer, not a bool)."""
    if isinstance(code, (bool, np.bool_)) or not isinstance(code, (int, np.integer)):
        return False
    return int(code) in set(Duration)
