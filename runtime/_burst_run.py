"""Internal: the run of ``Execution.burst_compute`` (ANeuralNetworksExecution_burstCompute).

The usual burst execution (a simple plan whose only step has a burst controller, no timeout,
no memory made from a MemoryDesc) goes straight to the controller: the burst entered, the
execution's state changed, the controller called, with nothing per call that the execution
checked when its arguments were set. A failed result takes the simple plan's CPU fallback as
``compute()`` does (``runtime._steps.after_failure``); every other execution runs as
``compute()`` does, with the burst's controllers (``Execution._run``).

Example (what ``Execution.burst_compute`` does)::

    compute(execution, burst)
"""
from __future__ import annotations

from runtime import _fallback, _steps
from runtime.burst import Burst
from runtime.hal.errors import HalError
from runtime.hal.types import ErrorStatus
from tracing import Layer, Phase
from tracing.naming import format_name
from tracing.tracer import hot_recorder

CALL = "burstCompute"
_TAG = format_name(Layer.RUNTIME, Phase.EXECUTION)
_NONE = ErrorStatus.NONE  # a module global: Enum member access is slow on Python 3.11


def compute(execution, burst: Burst) -> None:
    """:func:`run` in the span ``[NN_LR_PE]ANeuralNetworksExecution_burstCompute`` (recorded
    inline, as ``compute()``'s: the hot path)."""
    recorder = hot_recorder()
    if recorder is None:
        run(execution, burst)
        return
    append, extend, now = recorder
    extend((_TAG, "ANeuralNetworksExecution_burstCompute", now()))
    try:
        run(execution, burst)
    finally:
        append(now())


def run(execution, burst: Burst) -> None:
    """Run ``execution`` through ``burst``; raises NnError as ``Execution.burst_compute``."""
    if type(burst) is Burst:
        burst.begin(execution, CALL)
    else:
        Burst.enter(burst, execution, CALL)  # None or not a Burst: the API's error
    try:
        request = execution._start(CALL)
        controller = burst.direct
        if controller is None or execution._described or execution._timeout_ns:
            execution._run(request, prepared_of=burst.prepared_for)
            return
        try:
            measure = execution._measure
            try:  # _fallback.execute's steps, one call shorter
                result = controller.execute(request, measure)
            except HalError as error:
                result = _fallback.after_error(controller, request, measure, None, error)
            else:
                if result.status != _NONE:
                    result = _fallback.after_status(controller, request, measure, None, result)
            if result.status != _NONE:
                result, failed = _steps.after_failure(execution._plan, request, measure, None, result)
            execution._result = result
            if result.status != _NONE:
                raise execution._error(result, failed)
        finally:
            execution._state.complete()
    finally:
        burst.end()
