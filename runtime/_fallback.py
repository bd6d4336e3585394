"""Internal: CPU fallback at execution time (AOSP ``ExecutionBuilder::cpuFallbackPartial`` /
``cpuFallbackFull`` and ``StepExecutor::computeOnCpuFallback``).

When a step fails on its driver (an error status, or the driver process died: ``HalError``
DEAD_OBJECT), the step is retried on the CPU with the stand-in prepared at compilation; if
that fails too, the whole model runs on the CPU. RESOURCE_EXHAUSTED_TRANSIENT is first retried
once on the same driver. Not retried: OUTPUT_INSUFFICIENT_SIZE and missed deadlines (redoing
the work cannot make the deadline), plans without a fallback device
(``Compilation.for_devices``, ``NN_PARTITION=2``) and steps already on the CPU. Each fallback
is a runtime scope in the trace and a VLOG ``execution`` line (log tag ExecutionBuilder), after
the line naming the failure's result code and number (``execute: RESOURCE_EXHAUSTED_PERSISTENT
(ResultCode 13)``).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.drivers.cpu import CpuDevice
    >>> from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
    >>> from nnscope.runtime.hal.device_types import RequestArgument as Arg
    >>> from nnscope.runtime.hal.types import Preference
    >>> from nnscope.runtime.plan import build_plan
    >>> plan = build_plan(tiny_add().to_hal(), [SampleDriver(SAMPLES["sample-all"])],
    ...                   Preference.FAST_SINGLE_ANSWER, fallback=CpuDevice())
    >>> pool = bytearray(np.ones(8, np.float32).tobytes() + bytes(16))  # two inputs, one output
    >>> request = Request(inputs=(Arg(offset=0, length=16), Arg(offset=16, length=16)),
    ...                   outputs=(Arg(offset=32, length=16),), pools=(pool,))
    >>> step = plan.steps[0]
    >>> execute(step.prepared, request, False, None).status  # the driver's answer
    <ErrorStatus.NONE: 0>
    >>> result = ExecutionResult(ErrorStatus.GENERAL_FAILURE)  # had it failed:
    >>> if allowed(plan, step, result):
    ...     result = partial(plan, step, lambda cpu: execute(cpu, request, False, None))
    >>> result.status, np.frombuffer(pool, np.float32, 4, 32).tolist()
    (<ErrorStatus.NONE: 0>, [2.0, 2.0, 2.0, 2.0])
    >>> allowed(plan, step, ExecutionResult(ErrorStatus.MISSED_DEADLINE_TRANSIENT))
    False
    >>> plan.release()
"""
from __future__ import annotations

from typing import Callable

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime.hal.device_types import ExecutionResult, Request
from nnscope.runtime.hal.errors import HalError, result_code_from_status
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.tracing import Phase

_NOT_RETRIED = frozenset({ErrorStatus.NONE, ErrorStatus.OUTPUT_INSUFFICIENT_SIZE,
                          ErrorStatus.MISSED_DEADLINE_TRANSIENT,
                          ErrorStatus.MISSED_DEADLINE_PERSISTENT})
_NONE = ErrorStatus.NONE
_EXHAUSTED = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT  # a module global: Enum member access is slow


def execute(prepared, request: Request, measure: bool, deadline_ns: int | None) -> ExecutionResult:
    """``prepared.execute``, with a driver-side ``HalError`` (e.g. a dead driver process)
    returned as its status instead of raised. RESOURCE_EXHAUSTED_TRANSIENT is retried once on
    the same driver (its other work may have ended); the persistent codes are final there."""
    try:
        result = prepared.execute(request, measure, deadline_ns)
    except HalError as error:
        return _retried(prepared, request, measure, deadline_ns, _failed(error))
    if result.status == _NONE:
        return result
    _log_status(result.status)
    return _retried(prepared, request, measure, deadline_ns, result)


def _retried(prepared, request: Request, measure: bool, deadline_ns: int | None,
             result: ExecutionResult) -> ExecutionResult:
    if result.status != _EXHAUSTED:
        return result
    vlog.log("execution", "ExecutionBuilder", "RESOURCE_EXHAUSTED_TRANSIENT: retrying once")
    return _execute_once(prepared, request, measure, deadline_ns)


def _execute_once(prepared, request: Request, measure: bool, deadline_ns: int | None) -> ExecutionResult:
    try:
        result = prepared.execute(request, measure, deadline_ns)
    except HalError as error:
        return _failed(error)
    if result.status:
        _log_status(result.status)
    return result


def _failed(error: HalError) -> ExecutionResult:
    vlog.log("execution", "ExecutionBuilder", "%s: %s", error.status.name, error)
    return ExecutionResult(error.status)


def _log_status(status: ErrorStatus) -> None:
    code = result_code_from_status(status)
    vlog.log("execution", "ExecutionBuilder", "execute: %s (ResultCode %d)", code.name, int(code))


def allowed(plan, step, result: ExecutionResult) -> bool:
    """Whether ``result`` of ``step`` may be redone on the plan's CPU fallback device."""
    return (result.status not in _NOT_RETRIED and plan.fallback is not None
            and step.device is not plan.fallback)


def partial(plan, step, run: Callable) -> ExecutionResult | None:
    """Redo ``step`` on the CPU: ``run(prepared)`` executes the step's request with the CPU
    stand-in. None when the step has no stand-in."""
    cpu = plan.cpu_step(step)
    if cpu is None:
        return None
    vlog.log("execution", "ExecutionBuilder", "ExecutionBuilder::compute: step %d on %s failed; "
             "cpuFallbackPartial", step.index, step.device.name)
    with tracing.runtime(Phase.EXECUTION, "ExecutionBuilder::cpuFallbackPartial"):
        with tracing.runtime(Phase.EXECUTION, "StepExecutor::computeOnCpuFallback"):
            return run(cpu)


def full(plan, request: Request, measure: bool, deadline_ns: int | None) -> ExecutionResult | None:
    """Run the whole model on the CPU for the original request (None: no CPU stand-in)."""
    cpu = plan.cpu_whole()
    if cpu is None:
        return None
    vlog.log("execution", "ExecutionBuilder", "ExecutionBuilder::compute: cpuFallbackFull (whole "
             "model on %s)", plan.fallback.name)
    with tracing.runtime(Phase.EXECUTION, "ExecutionBuilder::cpuFallbackFull"):
        with tracing.runtime(Phase.EXECUTION, "StepExecutor::computeOnCpuFallback"):
            return execute(cpu, request, measure, deadline_ns)
