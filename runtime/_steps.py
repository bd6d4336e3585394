"""Internal: the StepExecutor — runs an :class:`~runtime.plan.ExecutionPlan` for one request.

A simple plan hands the request to its only device. A compound plan runs every step against the
plan's step memory (``runtime._step_memory``): one shared region holding the tensors that cross
steps and the model's inputs and outputs, each at an offset; the model inputs are copied in before
the first step and the outputs out after the last. With static shapes each step's request is
built once and reused by later executions (the driver then gets a repeat: its memo, no pools).
A temporary of unknown shape starts at 64 KiB; when a device reports it larger, the region grows
and the step runs again. Once every step's request is built and each driver has answered its
repeat, an execution chains its steps (``runtime.drivers.ipc.client.chain``): all are sent at
once and the drivers hand over through words in the step memory; a chain that fails (a refusal,
a driver that stopped answering) is followed by the steps one by one, without the dead drivers.
A step that fails on its driver (also a dead driver process) is redone on the CPU, then the
whole model (see ``runtime._fallback``).

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
    >>> result, step = run_plan(plan, request, measure=False, deadline_ns=None)
    >>> result.status, step, np.frombuffer(pool, np.float32, 4, 32).tolist()  # step: the failing one
    (<ErrorStatus.NONE: 0>, None, [2.0, 2.0, 2.0, 2.0])
    >>> plan.release()
"""
from __future__ import annotations

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime import _fallback
from nnscope.runtime._step_memory import StepMemory
from nnscope.runtime.drivers.ipc.client import chain as chained
from nnscope.runtime.hal.shared_memory import ibuffer_token, pool_bytes
from nnscope.runtime.drivers.ipc.wire import chain
from nnscope.runtime.extensions import operand_byte_size
from nnscope.runtime.hal.device_types import ExecutionResult, OutputShape, Request, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.runtime.plan import MODEL_INPUT, MODEL_OUTPUT, ExecutionPlan, ExecutionStep, Source
from nnscope.tracing import Phase

_GUESS_BYTES = 1 << 16
CHAIN_WORDS = "chain"  # the step memory slot of the chain words (8 bytes a step)
#: Executions run one step at a time after a chain that failed without a dead driver (doubled
#: after each such failure in a row, up to MAX_CHAIN_PAUSE).
CHAIN_PAUSE, MAX_CHAIN_PAUSE = 16, 1024
_EXECUTION = Phase.EXECUTION  # a module global: Enum member access is slow on Python 3.11
_NONE = ErrorStatus.NONE
_DEAD = ExecutionResult(ErrorStatus.DEAD_OBJECT)


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
        return _after_failure(plan, request, measure, deadline_ns, result)
    result, failed = _run_compound(plan, request, deadline_ns, prepared_of or _own_prepared)
    if failed is not None and _fallback.allowed(plan, failed, result):
        result = _fallback.full(plan, request, measure, deadline_ns) or result
        failed = None if result.status == ErrorStatus.NONE else failed
    return result, failed


def _after_failure(plan: ExecutionPlan, request: Request, measure: bool, deadline_ns: int | None,
                  result: ExecutionResult) -> tuple[ExecutionResult, ExecutionStep | None]:
    """A simple plan whose step gave the failed ``result``: the step redone on the CPU when
    allowed; the final result and the failing step (None once the retry succeeded)."""
    step = plan.steps[0]
    if _fallback.allowed(plan, step, result):
        retried = _fallback.partial(plan, step, lambda cpu: _fallback.execute(
            cpu, request, measure, deadline_ns))
        result = retried or result
    return result, (None if result.status == ErrorStatus.NONE else step)


class _Arguments:
    """Where each step argument of one execution lives: a slot of the plan's step memory, or a
    device memory (an IBuffer: only its driver can reach the bytes) passed through as a pool."""

    def __init__(self, plan: ExecutionPlan, memory: StepMemory, request: Request):
        self.plan, self.memory, self.request = plan, memory, request
        self.graph = plan.model.main
        self.dims: dict = {}  # temporary operand or ("out", position) -> dimensions
        self.through = [i for i, pool in enumerate(request.pools) if ibuffer_token(pool) is not None]
        temporaries = plan.memories.temporary_sizes
        if temporaries is None:
            temporaries = plan.memories.temporary_sizes = {o: self.size(o, self.graph.operands[o].dimensions)
                                                           or _GUESS_BYTES for o in plan.temporaries}
        memory.fit({**temporaries, **{key: arg.length for key, arg in self._model_slots()},
                    CHAIN_WORDS: chain.WORD_SIZE * len(plan.steps)})
        signature = (request.inputs, request.outputs, tuple(id(request.pools[i]) for i in self.through))
        if not plan.static_boundaries or memory.signature != signature:
            memory.requests, memory.signature = {}, (signature if plan.static_boundaries else None)

    def _model_slots(self):
        """(slot key, argument) of the model inputs and outputs copied through the step memory."""
        request, through = self.request, self.through
        for kind, args in (("in", request.inputs), ("out", request.outputs)):
            for position, arg in enumerate(args):
                if not arg.has_no_value and arg.pool_index not in through:
                    yield (kind, position), arg

    def size(self, operand_index: int, dims: tuple[int, ...]) -> int:
        """Bytes of operand ``operand_index`` with ``dims`` (an extension type: as a device
        describes it); 0 when unknown."""
        return operand_byte_size(self.plan.model, self.graph.operands[operand_index], dims,
                                 self.plan.devices()) or 0

    def copy_inputs(self) -> None:
        view, pools = self.memory.region.view, self.request.pools
        for key, arg in self._model_slots():
            if key[0] == "in":
                offset = self.memory.slot(key)[0]
                view[offset:offset + arg.length] = pool_bytes(pools[arg.pool_index])[arg.offset:arg.offset + arg.length]

    def copy_outputs(self) -> None:
        view, pools = self.memory.region.view, self.request.pools
        for key, arg in self._model_slots():
            if key[0] == "out":
                offset = self.memory.slot(key)[0]
                pool_bytes(pools[arg.pool_index])[arg.offset:arg.offset + arg.length] = view[offset:offset + arg.length]

    def step_request(self, step: ExecutionStep) -> Request:
        cached = self.memory.requests.get(step.index)
        if cached is not None:
            return cached
        inputs = tuple(self._input(s, o) for s, o in zip(step.input_sources, step.inputs))
        outputs = tuple(self._output(s, o) for s, o in zip(step.output_sources, step.outputs))
        pools = (self.memory.region, *(self.request.pools[i] for i in self.through))
        request = Request(inputs, outputs, pools, self.request.loop_timeout_ns)
        if self.memory.signature is not None:
            self.memory.requests[step.index] = request
        return request

    def _model_arg(self, arg: RequestArgument, key, length: int, dims) -> RequestArgument:
        if arg.has_no_value:
            return RequestArgument(True, 0, 0, 0, arg.dimensions)
        if arg.pool_index in self.through:
            return RequestArgument(False, 1 + self.through.index(arg.pool_index), arg.offset, length, dims)
        return RequestArgument(False, 0, self.memory.slot(key)[0], length, dims)

    def _input(self, source: Source, operand_index: int) -> RequestArgument:
        if source.kind == MODEL_INPUT:
            arg = self.request.inputs[source.position]
            return self._model_arg(arg, ("in", source.position), arg.length, arg.dimensions)
        if source.kind == MODEL_OUTPUT:
            key = ("out", source.position)
            dims = self.dims[key]
            return self._model_arg(self.request.outputs[source.position], key,
                                   self.size(operand_index, dims), dims)
        dims = self.dims[operand_index]
        offset = self.memory.slot(operand_index)[0]
        return RequestArgument(False, 0, offset, self.size(operand_index, dims), dims)

    def _output(self, source: Source, operand_index: int) -> RequestArgument:
        if source.kind == MODEL_OUTPUT:
            arg = self.request.outputs[source.position]
            return self._model_arg(arg, ("out", source.position), arg.length, arg.dimensions)
        offset, size = self.memory.slot(operand_index)
        return RequestArgument(False, 0, offset, size, ())


def _own_prepared(step: ExecutionStep):
    return step.prepared


def _run_compound(plan: ExecutionPlan, request: Request, deadline_ns: int | None,
                  prepared_of) -> tuple[ExecutionResult, ExecutionStep | None]:
    memory = plan.memories.take()
    try:
        arguments = _Arguments(plan, memory, request)
        arguments.copy_inputs()
        outcome = _chained(plan, arguments, deadline_ns, prepared_of)
        if outcome is not None and outcome.results is not None:
            result, failed = _shapes_of(plan, arguments, zip(plan.steps, outcome.results)), None
        else:
            dead = set(outcome.dead) if outcome is not None else set()
            result, failed = _run_steps(plan, arguments, deadline_ns, prepared_of, dead)
        if result.status == _NONE:
            arguments.copy_outputs()
        return result, failed
    finally:
        plan.memories.give_back(memory, plan.forget_pool)


def _chained(plan: ExecutionPlan, arguments: _Arguments, deadline_ns: int | None, prepared_of):
    """The outcome of the steps chained from driver to driver (``client.chain``); None when this
    execution cannot chain: a first run, a deadline, a burst, tracing on, a step outside a driver
    process, no polling window (LOW_POWER, one CPU), or a pause after a failed chain."""
    memory = arguments.memory
    if prepared_of is not _own_prepared or deadline_ns is not None or memory.signature is None \
            or len(memory.requests) != len(plan.steps) or tracing.enabled():
        return None
    if memory.chain_pause:
        memory.chain_pause -= 1
        return None
    links = _links(plan, memory)
    window = links[0].prepared.reply_poll_s if links else 0.0
    if not chained.worthwhile(window):
        return None
    memory.chain_run += 1
    outcome = chained.run_chain(links, memory.region.view, memory.slot(CHAIN_WORDS)[0], memory.chain_run,
                                memory.chain_s, window)
    if outcome is not None and outcome.results is None and not outcome.dead:  # refused: pause, longer each time
        memory.chain_pause = memory.chain_backoff = min(2 * memory.chain_backoff or CHAIN_PAUSE, MAX_CHAIN_PAUSE)
    elif outcome is not None and outcome.results is not None:
        memory.chain_s += (outcome.elapsed_s - memory.chain_s) / 4
        memory.chain_backoff = 0
    return outcome


def _links(plan: ExecutionPlan, memory: StepMemory) -> list:
    """The chain links of ``memory``'s step requests (kept while they hold); empty when a step
    cannot chain."""
    requests, links = memory.chain_links
    if requests is not memory.requests:
        links = [chained.Link(step.prepared, memory.requests[step.index]) for step in plan.steps]
        links = links if all(link.prepared.chains for link in links) else []
        memory.chain_links = (memory.requests, links)
    return links


def _run_steps(plan: ExecutionPlan, arguments: _Arguments, deadline_ns: int | None,
               prepared_of, dead: set) -> tuple[ExecutionResult, ExecutionStep | None]:
    """The steps one by one; ``dead``: devices that died in this execution (their steps go to
    the CPU at once)."""
    shapes = _model_shapes(plan)
    for step in plan.steps:
        if step.device in dead:
            result = _DEAD
        else:
            with tracing.runtime(_EXECUTION, "StepExecutor::compute"):
                result = _run_step(step, prepared_of(step), arguments, deadline_ns)
            if result.status == ErrorStatus.DEAD_OBJECT:
                dead.add(step.device)
        if _fallback.allowed(plan, step, result):
            result = _fallback.partial(plan, step, lambda cpu: _run_step(
                step, cpu, arguments, deadline_ns)) or result
        vlog.log("execution", "ExecutionPlan", "step %d on %s: %s", step.index, step.device.name,
                 result.status.name)
        _record_shapes(step, result, shapes, arguments)
        if result.status != _NONE:
            return ExecutionResult(result.status, tuple(shapes)), step
    return ExecutionResult(_NONE, tuple(shapes)), None


def _model_shapes(plan: ExecutionPlan) -> list:
    return [OutputShape(plan.model.main.operands[i].dimensions) for i in plan.model.main.output_indexes]


def _record_shapes(step: ExecutionStep, result: ExecutionResult, shapes: list, arguments: _Arguments) -> None:
    """Keep the dimensions ``step`` reported: the model's output shapes, the temporaries' dims."""
    for source, operand_index, shape in zip(step.output_sources, step.outputs, result.output_shapes):
        if source.kind == MODEL_OUTPUT:
            shapes[source.position] = shape
            arguments.dims[("out", source.position)] = tuple(shape.dimensions)
        else:
            arguments.dims[operand_index] = tuple(shape.dimensions)


def _shapes_of(plan: ExecutionPlan, arguments: _Arguments, results) -> ExecutionResult:
    """The successful result of a chained run from each step's result."""
    shapes = _model_shapes(plan)
    for step, result in results:
        vlog.log("execution", "ExecutionPlan", "step %d on %s: %s (chained)", step.index,
                 step.device.name, result.status.name)
        _record_shapes(step, result, shapes, arguments)
    return ExecutionResult(_NONE, tuple(shapes))


def _run_step(step: ExecutionStep, prepared, arguments: _Arguments,
              deadline_ns: int | None) -> ExecutionResult:
    """Run one step; a temporary reported larger than its slot grows the step memory and the
    step runs once more."""
    for _attempt in range(2):
        result = _fallback.execute(prepared, arguments.step_request(step), False, deadline_ns)
        if result.status != ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            return result
        needed = {operand_index: arguments.size(operand_index, tuple(shape.dimensions))
                  for source, operand_index, shape in zip(step.output_sources, step.outputs,
                                                          result.output_shapes)
                  if source.kind != MODEL_OUTPUT and not shape.is_sufficient}
        if not needed or not arguments.memory.fit(needed):
            return result
    return result
