"""Internal: a fenced execution run by the device's own ``executeFenced`` (AOSP's path).

When the plan is a single step, ``startComputeWithDependencies`` asks the step's prepared model
to launch it (``PreparedModel.execute_fenced``) with the dependencies' sync fences: a driver
process waits for them itself, and the caller gets an Event at once. A relay thread waits for
the launched run (the driver's fence, then its status and launched/fenced timing, outputs
copied back), completes the execution and only then signals the Event's own fence (so a waiter
also sees the outputs). Otherwise :func:`start` returns None and the in-process path runs it:

- a compound plan, or a device that runs fenced work in-process (the CPU: the default);
- a dependency without a sync fence (an Event of ``start_compute``);
- a dependency still pending while an input is a plain buffer (its bytes would be read at the
  call, not after the fences, as the in-process path does; pass it in a shared ``Memory``);
- a launch the driver refuses, or a dead driver (the in-process path then falls back to the CPU).

A driver that dies after the launch, before it reported, is left behind the same way: the relay
runs the in-process path (which waits for the dependencies and falls back to the CPU as compute()).

A failed dependency makes the driver report GENERAL_FAILURE, read as OP_FAILED; an expired
``duration_ns`` after the fences is MISSED_DEADLINE_TRANSIENT.

Example (what ``Execution.start_compute_with_dependencies`` does)::

    event = start(plan, request, deps, measure, duration_ns, deadline, in_process, done)
"""
from __future__ import annotations

from typing import Callable, Sequence

from nnscope import vlog
from nnscope.runtime.api import NnError, from_hal_error
from nnscope.runtime.hal.shared_memory import is_shared
from nnscope.runtime.hal.sync_fence import close_fds, is_eventfd
from nnscope.runtime.event import Event
from nnscope.runtime.hal.device_types import ExecutionResult, Request
from nnscope.runtime.hal.errors import HalError, result_code_from_status
from nnscope.runtime.hal.types import ErrorStatus


def start(plan, request: Request, dependencies: Sequence[Event], measure: bool, duration_ns: int,
          deadline: int | None, in_process: Callable[[], None],
          done: Callable[[ExecutionResult, object], None]) -> Event | None:
    """Launch on the device and return the Event, or None for the in-process path.
    ``in_process()`` runs the execution in-process; ``done(result, fenced timing)`` records
    the outcome of a launched run and completes the execution."""
    if not plan.simple:
        return None
    step = plan.steps[0]
    if dependencies and not all(is_shared(request.pools[arg.pool_index])
                                for arg in request.inputs if not arg.has_no_value):
        return None
    fences = _fences(dependencies)
    if fences is None:
        return None
    try:
        run = step.prepared.execute_fenced(request, fences, measure, deadline, duration_ns or None)
    except HalError as error:
        vlog.log("execution", "ExecutionBuilder", "executeFenced on %s: %s; running it in-process",
                 step.device.name, error)
        return None
    finally:
        close_fds(fences)
    if run is None:
        return None
    return Event.start(lambda: _relay(run, step.device.name, in_process, done),
                       name="nn-fenced-relay", fenced=True)


def _fences(dependencies) -> list | None:
    """Duplicates of every dependency's sync fence; None when one has none or a foreign one."""
    fds = []
    for event in dependencies:
        fd = event.fence_dup()
        if fd is not None:
            fds.append(fd)
        if fd is None or not is_eventfd(fd):  # the driver takes eventfds only
            close_fds(fds)
            return None
    return fds


def _relay(run, device_name: str, in_process: Callable[[], None], done) -> None:
    """Complete one launched run on the Event's thread: wait, record, raise a failure."""
    try:
        outcome = run.wait()
    except HalError as error:
        done(ExecutionResult(ErrorStatus.GENERAL_FAILURE), None)
        raise from_hal_error(error, f"executeFenced on {device_name}") from None
    except BaseException:
        done(ExecutionResult(ErrorStatus.GENERAL_FAILURE), None)
        raise
    if outcome is None:  # the driver died: run it in-process (CPU fallback included)
        vlog.log("execution", "ExecutionBuilder", "executeFenced: driver %s died; running it in-process",
                 device_name)
        return in_process()
    result, fenced_timing, message = outcome
    done(result, fenced_timing)
    if result.status != ErrorStatus.NONE:
        raise NnError(result_code_from_status(result.status), f"executeFenced on {device_name}: "
                      f"{result.status.name}: {message}")
