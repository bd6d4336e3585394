"""Internal: the StepExecutor — runs an :class:`~runtime.plan.ExecutionPlan` for one request.

A simple plan hands the request to its only device. A compound plan builds one request per
step: model inputs/outputs keep their pools, tensors crossing steps get buffers allocated here
(re-allocated and the step re-run when a device reports an unknown shape larger than guessed).
A step that fails on its driver (also a dead driver process) is redone on the CPU, then the
whole model (see ``runtime._fallback``).

Example:
    >>> result, step = run_plan(plan, request, measure=False, deadline_ns=None)   # doctest: +SKIP
"""
from __future__ import annotations

import tracing
import vlog
from runtime import _fallback
from runtime.extensions import operand_byte_size
from runtime.hal.device_types import ExecutionResult, OutputShape, Request, RequestArgument
from runtime.hal.types import ErrorStatus, Operand
from runtime.plan import MODEL_INPUT, MODEL_OUTPUT, ExecutionPlan, ExecutionStep, Source
from tracing import Phase

_GUESS_BYTES = 1 << 16
_EXECUTION = Phase.EXECUTION  # a module global: Enum member access is slow on Python 3.11
_NONE = ErrorStatus.NONE


def run_plan(plan: ExecutionPlan, request: Request, measure: bool, deadline_ns: int | None,
             prepared_of=None) -> tuple[ExecutionResult, ExecutionStep | None]:
    """Run every step; return the result and the failing step (None on success).

    ``prepared_of(step)`` is what executes a step (default: its prepared model; a burst gives
    its controllers). A simple plan's only step is the execution itself: it gets no
    ``StepExecutor::compute`` span of its own (it would coincide with the caller's
    ``ANeuralNetworksExecution_compute``); each step of a compound plan does."""
    if plan.simple:
        step = plan.steps[0]
        prepared = step.prepared if prepared_of is None else prepared_of(step)
        result = _fallback.execute(prepared, request, measure, deadline_ns)
        if result.status == _NONE:
            return result, None
        return after_failure(plan, request, measure, deadline_ns, result)
    result, failed = _run_compound(plan, request, deadline_ns, prepared_of or _own_prepared)
    if failed is not None and _fallback.allowed(plan, failed, result):
        result = _fallback.full(plan, request, measure, deadline_ns) or result
        failed = None if result.status == ErrorStatus.NONE else failed
    return result, failed


def after_failure(plan: ExecutionPlan, request: Request, measure: bool, deadline_ns: int | None,
                  result: ExecutionResult) -> tuple[ExecutionResult, ExecutionStep | None]:
    """A simple plan whose step gave the failed ``result``: the step redone on the CPU when
    allowed; the final result and the failing step (None once the retry succeeded)."""
    step = plan.steps[0]
    if _fallback.allowed(plan, step, result):
        retried = _fallback.partial(plan, step, lambda cpu: _fallback.execute(
            cpu, request, measure, deadline_ns))
        result = retried or result
    return result, (None if result.status == ErrorStatus.NONE else step)


class _Temporaries:
    """Buffers of the tensors passed between steps of one execution."""

    def __init__(self, plan: ExecutionPlan, request: Request):
        self.model, self.graph = plan.model, plan.model.main
        self.devices = plan.devices()
        self.request = request
        self.pools = list(request.pools)
        self.slots: dict[int, int] = {}      # operand -> pool index
        self.dims: dict[int, tuple[int, ...]] = {}
        self.model_output_dims: dict[int, tuple[int, ...]] = {}

    def allocate(self, operand_index: int, size: int | None = None) -> int:
        operand: Operand = self.graph.operands[operand_index]
        size = size or self.size(operand_index, operand.dimensions) or _GUESS_BYTES
        self.pools.append(bytearray(size))
        self.slots[operand_index] = len(self.pools) - 1
        return self.slots[operand_index]

    def size(self, operand_index: int, dims: tuple[int, ...]) -> int:
        """Bytes of operand ``operand_index`` with ``dims`` (an extension type: as a device
        describes it); 0 when unknown."""
        return operand_byte_size(self.model, self.graph.operands[operand_index], dims,
                                 self.devices) or 0

    def input_arg(self, source: Source, operand_index: int) -> RequestArgument:
        if source.kind == MODEL_INPUT:
            return self.request.inputs[source.position]
        if source.kind == MODEL_OUTPUT:
            arg = self.request.outputs[source.position]
            dims = self.model_output_dims[source.position]
            return RequestArgument(False, arg.pool_index, arg.offset,
                                   self.size(operand_index, dims), dims)
        dims = self.dims[operand_index]
        pool = self.slots[operand_index]
        return RequestArgument(False, pool, 0, self.size(operand_index, dims), dims)

    def output_arg(self, source: Source, operand_index: int) -> RequestArgument:
        if source.kind == MODEL_OUTPUT:
            return self.request.outputs[source.position]
        pool = self.slots.get(operand_index)
        if pool is None:
            pool = self.allocate(operand_index)
        return RequestArgument(False, pool, 0, len(self.pools[pool]), ())


def _own_prepared(step: ExecutionStep):
    return step.prepared


def _run_compound(plan: ExecutionPlan, request: Request, deadline_ns: int | None,
                  prepared_of) -> tuple[ExecutionResult, ExecutionStep | None]:
    temps = _Temporaries(plan, request)
    shapes = [OutputShape(plan.model.main.operands[i].dimensions) for i in plan.model.main.output_indexes]
    for step in plan.steps:
        with tracing.runtime(_EXECUTION, "StepExecutor::compute"):
            result = _run_step(step, prepared_of(step), temps, deadline_ns)
        if _fallback.allowed(plan, step, result):
            result = _fallback.partial(plan, step, lambda cpu: _run_step(
                step, cpu, temps, deadline_ns)) or result
        vlog.log("execution", "ExecutionPlan", "step %d on %s: %s", step.index, step.device.name,
                 result.status.name)
        for source, operand_index, shape in zip(step.output_sources, step.outputs, result.output_shapes):
            if source.kind == MODEL_OUTPUT:
                shapes[source.position] = shape
                temps.model_output_dims[source.position] = tuple(shape.dimensions)
            else:
                temps.dims[operand_index] = tuple(shape.dimensions)
        if result.status != ErrorStatus.NONE:
            return ExecutionResult(result.status, tuple(shapes)), step
    return ExecutionResult(ErrorStatus.NONE, tuple(shapes)), None


def _run_step(step: ExecutionStep, prepared, temps: _Temporaries,
              deadline_ns: int | None) -> ExecutionResult:
    inputs = tuple(temps.input_arg(s, o) for s, o in zip(step.input_sources, step.inputs))
    for _attempt in range(2):
        outputs = tuple(temps.output_arg(s, o) for s, o in zip(step.output_sources, step.outputs))
        request = Request(inputs, outputs, tuple(temps.pools), temps.request.loop_timeout_ns)
        result = _fallback.execute(prepared, request, False, deadline_ns)
        if result.status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            return result
        retry = False
        for source, operand_index, shape in zip(step.output_sources, step.outputs, result.output_shapes):
            if source.kind != MODEL_OUTPUT and not shape.is_sufficient:
                needed = temps.size(operand_index, tuple(shape.dimensions))
                temps.allocate(operand_index, needed)
                retry = True
        if not retry:
            return result
    return result
