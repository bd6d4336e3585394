"""Internal: a fenced execution run by the driver's HAL ``executeFenced`` (AOSP's path).

When the plan is a single step on a driver process, ``startComputeWithDependencies`` hands the
dependencies' sync fences to the driver, which waits for them itself; the caller gets an Event
at once. A relay thread waits for the driver's sync fence, asks ``getExecutionInfo`` for the
status and the launched/fenced timing, copies outputs out of the memfd copies of plain buffers,
completes the execution and only then signals the Event's own fence (so a waiter also sees the
outputs). Otherwise :func:`start` returns None and the in-process path runs it:

- a compound plan, or a step on an in-process device;
- a dependency without a sync fence (an Event of ``start_compute``);
- a dependency still pending while an input is a plain buffer (its bytes would be read at the
  call, not after the fences, as the in-process path does; pass it in a shared ``Memory``);
- a launch the driver refuses, or a dead driver (the in-process path then falls back to the CPU).

A driver that dies after the launch, before it reported, is left behind the same way: the relay
runs the in-process path (which waits for the dependencies and falls back to the CPU as compute()).

A failed dependency makes the driver report GENERAL_FAILURE, read as OP_FAILED; an expired
``duration_ns`` after the fences is MISSED_DEADLINE_TRANSIENT.

It works with the Execution's internals: ``_plan``, ``_measure``, ``_out_operands``,
``_fenced_done(result, fenced_timing)`` (record and complete) and ``_run_fenced`` (in-process).

Example:
    >>> event = start(execution, request, deps, duration_ns=0, deadline=None)  # doctest: +SKIP
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import vlog
from runtime.api import NnError, from_hal_error
from runtime.drivers.ipc.client import fenced as fenced_client
from runtime.drivers.ipc.client.encoder import is_shared
from runtime.drivers.ipc.client.prepared import RemotePreparedModel
from runtime.drivers.ipc.wire.syncfence import ACTIVE, is_eventfd, wait
from runtime.drivers.ipc.wire.transport import close_fds
from runtime.event import Event
from runtime.hal.device_types import ExecutionResult, OutputShape, Request
from runtime.hal.errors import HalError, result_code_from_status
from runtime.hal.types import ErrorStatus
from timing import FencedTiming

#: Seconds between checks that the driver process is still alive while its fence is pending.
LIVENESS_S = 0.25
_DEAD = ErrorStatus.DEAD_OBJECT


def start(execution, request: Request, dependencies: Sequence[Event], duration_ns: int,
          deadline: int | None) -> Event | None:
    """Launch on the driver and return the Event, or None for the in-process path."""
    plan, measure = execution._plan, execution._measure
    prepared = plan.steps[0].prepared if plan.simple else None
    if not isinstance(prepared, RemotePreparedModel):
        return None
    if dependencies and not all(is_shared(request.pools[arg.pool_index])
                                for arg in request.inputs if not arg.has_no_value):
        return None
    fences = _fences(dependencies)
    if fences is None:
        return None
    shared, copies = fenced_client.shared_request(request)
    try:
        fence, callback = fenced_client.execute_fenced(prepared, shared, fences, measure, deadline,
                                                       timeout_after_fence_ns=duration_ns or None)
    except HalError as error:
        vlog.log("execution", "ExecutionBuilder", "executeFenced on %s: %s; running it in-process",
                 prepared.device.name, error)
        fenced_client.close_copies(copies)
        return None
    finally:
        close_fds(fences)
    relay = _Relay(execution, prepared.device, request, copies, lambda: execution._run_fenced(
        request, dependencies, duration_ns, deadline))
    return Event.start(lambda: relay.run(fence, callback), name="nn-fenced-relay", fenced=True)


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


def _shapes(request: Request, out_operands) -> tuple:
    """The output shapes (fully specified for a fenced run: see ``check_outputs_specified``)."""
    return tuple(OutputShape(tuple(arg.dimensions or operand.dimensions))
                 for arg, operand in zip(request.outputs, out_operands))


class _Relay:
    """Completes one driver-run fenced execution in the runtime (on the Event's thread)."""

    def __init__(self, execution, device, request: Request, copies: list, in_process: Callable[[], None]):
        self.execution, self.device, self.request = execution, device, request
        self.copies, self.in_process = copies, in_process

    def run(self, fence: int, callback) -> None:
        """Wait for the driver's fence, read the outcome, copy outputs, complete."""
        try:
            info = self._outcome(fence, callback)
        except BaseException:
            self._complete(ExecutionResult(ErrorStatus.GENERAL_FAILURE), None)
            raise
        finally:
            os.close(fence)
        if info is None:  # the driver died: run it in-process (CPU fallback included)
            fenced_client.close_copies(self.copies)
            vlog.log("execution", "ExecutionBuilder", "executeFenced: driver %s died; running it in-process",
                     self.device.name)
            return self.in_process()
        if info.status != ErrorStatus.NONE:
            self._complete(ExecutionResult(info.status), None)
            raise NnError(result_code_from_status(info.status), f"executeFenced on {self.device.name}: "
                          f"{info.status.name}: {info.message}")
        try:
            fenced_client.copy_back(self.request, self.copies)
        except BaseException:
            self._complete(ExecutionResult(ErrorStatus.GENERAL_FAILURE), None)
            raise
        measure = self.execution._measure
        launched = fenced_client.timing_or_none(info.launched) if measure else None
        shapes = _shapes(self.request, self.execution._out_operands)
        self._complete(ExecutionResult(ErrorStatus.NONE, shapes, launched),
                       FencedTiming(info.launched, info.fenced) if measure else None)

    def _outcome(self, fence: int, callback):
        """getExecutionInfo once the fence signalled; None when the driver died first."""
        if _wait_for_driver(self.device, fence) == _DEAD:
            return None
        try:
            return callback.get_execution_info()
        except HalError as error:
            if error.status == _DEAD:
                return None
            raise from_hal_error(error, f"executeFenced on {self.device.name}") from None

    def _complete(self, result: ExecutionResult, timing) -> None:
        fenced_client.close_copies(self.copies)
        self.execution._fenced_done(result, timing)


def _wait_for_driver(device, fence: int):
    """The fence's state once it signalled; DEAD_OBJECT if the driver process died first."""
    while True:
        state = wait(fence, LIVENESS_S)
        if state != ACTIVE:
            return state
        if not device.process.alive():
            return _DEAD
