"""Internal: the StepExecutor — runs an :class:`~runtime.plan.ExecutionPlan` for one request.

A simple plan hands the request to its only device. A compound plan runs every step against the
plan's step memory (``runtime._step_memory``): one shared region holding the tensors that cross
steps and the model's inputs and outputs, each at an offset; the model inputs are copied in before
the first step and the outputs out after the last. With static shapes each step's request is
built once and reused by later executions (the driver then gets a repeat: its memo, no pools).
A temporary of unknown shape starts at 64 KiB; when a device reports it larger, the region grows
and the step runs again. Once every step's request is built (static shapes, from the second
execution on), an execution is fenced, as AOSP's fenced execution of a compound plan
(``ExecutionBuilder``'s ``startComputeFenced``): each step is launched with its device's
``executeFenced``, waiting for the sync fence of the step before and giving its own, so the
drivers hand over to each other and the application waits once, on the last fence. At most
:data:`LAUNCH_AHEAD` steps of one device are launched and not seen to end; a step on an
in-process device runs here once the steps before it ended. A step that no fence shows ending
within its device's timeout has its driver killed; a fenced run that fails in any way is followed
by the steps one by one, without the dead drivers. ``startComputeWithDependencies`` takes the
same path (:func:`launch`): every step is launched at the call, the first waiting for a fence of
the application's own that :class:`Launched` signals once the dependencies signalled and the
inputs are copied in. Tracing changes nothing of this: each launch is a
``StepExecutor::computeFenced`` span and each wait a ``syncWait`` span.
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

import os
import time

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime import _fallback
from nnscope.runtime._step_memory import StepMemory
from nnscope.runtime.extensions import operand_byte_size
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.shared_memory import ibuffer_token, pool_bytes
from nnscope.runtime.hal.sync_fence import ACTIVE, DONE, fail, nap, new_fence, signal, spin
from nnscope.runtime.hal.device_types import ExecutionResult, OutputShape, Request, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.runtime.plan import MODEL_INPUT, MODEL_OUTPUT, ExecutionPlan, ExecutionStep, Source
from nnscope.tracing import Phase

_GUESS_BYTES = 1 << 16
#: Steps of one device a fenced execution has launched and not seen end, at most (a driver takes
#: a bounded number from one connection: ``service.fenced.MAX_RUNNING``); beyond, the application
#: waits until half of them ended.
LAUNCH_AHEAD = 32
#: Seconds between two looks at the frontier step while the application waits for a later one.
CHECK_S = 0.1
_EXECUTION = Phase.EXECUTION  # a module global: Enum member access is slow on Python 3.11
_NONE = ErrorStatus.NONE
_DEAD = ExecutionResult(ErrorStatus.DEAD_OBJECT)


def run_plan(plan: ExecutionPlan, request: Request, measure: bool, deadline_ns: int | None,
             prepared_of=None, launched: Launched | None = None) -> tuple[ExecutionResult, ExecutionStep | None]:
    """Run every step; return the result and the failing step (None on success).

    ``prepared_of(step)`` is what executes a step (default: its prepared model; a burst gives
    its controllers). A simple plan's only step is the execution itself: it gets no
    ``StepExecutor::compute`` span of its own (it would coincide with the caller's
    ``ANeuralNetworksExecution_compute``); each step of a compound plan does. ``launched``:
    the steps :func:`launch` started for this request, waiting for its inputs."""
    if launched is not None:
        result, failed = launched.run(deadline_ns)
        return _after_compound(plan, request, measure, deadline_ns, result, failed)
    if plan.simple:
        step = plan.steps[0]
        prepared = step.prepared if prepared_of is None else prepared_of(step)
        result = _fallback.execute(prepared, request, measure, deadline_ns)
        if result.status == _NONE:
            return result, None
        return _after_failure(plan, request, measure, deadline_ns, result)
    result, failed = _run_compound(plan, request, deadline_ns, prepared_of or _own_prepared)
    return _after_compound(plan, request, measure, deadline_ns, result, failed)


def _after_compound(plan: ExecutionPlan, request: Request, measure: bool, deadline_ns: int | None,
                    result: ExecutionResult, failed: ExecutionStep | None) -> tuple:
    """A compound plan's result, the whole model redone on the CPU when a step failed for good
    and fallback is allowed."""
    if failed is not None and _fallback.allowed(plan, failed, result):
        result = _fallback.full(plan, request, measure, deadline_ns) or result
        failed = None if result.status == ErrorStatus.NONE else failed
    return result, failed


def launch(plan: ExecutionPlan, request: Request, deadline_ns: int | None) -> Launched | None:
    """``startComputeWithDependencies`` of a compound plan, at the call (AOSP's
    ``computeFenced``): when its steps repeat (static shapes, from the second execution on)
    every step is launched at once with its device's executeFenced, as :func:`run_plan` would,
    the first waiting for a fence of the application's own instead of the inputs, which
    :meth:`Launched.run` copies once the dependencies signalled. None (nothing launched) when
    the plan runs step by step: simple, or its step requests not built yet."""
    if plan.simple:
        return None
    memory = plan.memories.take()
    try:
        arguments = _Arguments(plan, memory, request)
        if memory.signature is None or len(memory.requests) != len(plan.steps):
            plan.memories.give_back(memory, plan.forget_pool)
            return None
        ready = new_fence()
    except BaseException:
        plan.memories.give_back(memory, plan.forget_pool)
        raise
    fenced = _Fenced(plan, memory.requests)
    fenced.fence = ready
    fenced.launch(deadline_ns, may_wait=False)  # up to an in-process step, or a device's window
    return Launched(plan, memory, arguments, fenced, ready)


class Launched:
    """A compound plan's steps launched by :func:`launch`, the first waiting for ``ready``."""

    def __init__(self, plan: ExecutionPlan, memory: StepMemory, arguments: _Arguments, fenced: _Fenced,
                 ready: int):
        self.plan, self.memory, self.arguments, self.fenced, self.ready = plan, memory, arguments, fenced, ready

    def run(self, deadline_ns: int | None) -> tuple[ExecutionResult, ExecutionStep | None]:
        """(Once the dependencies signalled.) Copy the inputs in, let the first step go, launch
        what is left, wait for the last fence and copy the outputs out; after a failure the
        steps one by one, as :func:`run_plan`."""
        try:
            self.arguments.copy_inputs()
            signal(self.ready, True)
            fenced = self.fenced.finish(deadline_ns)
            return _conclude(self.plan, self.memory, self.arguments, fenced, deadline_ns, _own_prepared)
        finally:
            self._release()

    def cancel(self) -> None:
        """A dependency failed: the launched steps end (their first fence fails), unrun."""
        fail(self.ready)
        self.fenced.failed = True  # nothing more is launched
        self.fenced.finish(None)
        self._release()

    def _release(self) -> None:
        if self.ready >= 0:
            os.close(self.ready)
            self.ready = -1
            self.plan.memories.give_back(self.memory, self.plan.forget_pool)


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
        memory.fit({**temporaries, **{key: arg.length for key, arg in self._model_slots()}})
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
        fenced = None
        if prepared_of is _own_prepared and memory.signature is not None \
                and len(memory.requests) == len(plan.steps):
            fenced = _Fenced(plan, memory.requests).run(deadline_ns)
        return _conclude(plan, memory, arguments, fenced, deadline_ns, prepared_of)
    finally:
        plan.memories.give_back(memory, plan.forget_pool)


def _conclude(plan: ExecutionPlan, memory: StepMemory, arguments: _Arguments, fenced: _Fenced | None,
              deadline_ns: int | None, prepared_of) -> tuple[ExecutionResult, ExecutionStep | None]:
    """After the fenced run (None: none): its result, or the steps one by one without the
    drivers that died; the outputs copied out on success."""
    if fenced is not None and fenced.results is not None:
        result, failed = _fenced_result(plan, memory, arguments, fenced.results), None
    else:
        dead = set(fenced.dead) if fenced is not None else set()
        result, failed = _run_steps(plan, arguments, deadline_ns, prepared_of, dead)
    if result.status == _NONE:
        arguments.copy_outputs()
    return result, failed


class _Fenced:
    """One fenced execution of a compound plan: the steps launched in order, each waiting for
    the fence of the one before (AOSP's ``startComputeFenced``)."""

    def __init__(self, plan: ExecutionPlan, requests: dict):
        self.plan, self.requests = plan, requests
        self.runs: list = []  # (step, FencedRun) in launch order
        self.ended = 0  # runs known done (a prefix of ``runs``)
        self.launched: dict = {}  # device -> indexes in ``runs`` of its runs, oldest first
        self.results: list | None = []  # one ExecutionResult per step that ended
        self.dead: set = set()
        self.fence = None  # the sync fence the next step waits for
        self.next = 0  # the index of the next step to launch
        self.failed = False  # a launch failed: what was launched ends, then the steps one by one

    def run(self, deadline_ns: int | None) -> _Fenced:
        """Launch and wait for every step; ``results`` is None unless all succeeded."""
        started_ns = time.monotonic_ns()
        self.launch(deadline_ns)
        return self.finish(deadline_ns, started_ns)

    def launch(self, deadline_ns: int | None, may_wait: bool = True) -> None:
        """Launch the steps not launched yet, in order. Without ``may_wait`` it stops before a
        step that would have to wait for others to end first: one on an in-process device, or
        one whose device has :data:`LAUNCH_AHEAD` runs not seen to end."""
        steps = self.plan.steps
        while not self.failed and self.next < len(steps):
            launched = self._launch(steps[self.next], deadline_ns, may_wait)
            if launched is None:
                return
            self.failed = not launched
            self.next += 1

    def finish(self, deadline_ns: int | None, started_ns: int | None = None) -> _Fenced:
        """Launch the rest and wait for every run (``started_ns``: when the first was launched,
        for the wait's expected length); ``results`` is None unless all succeeded."""
        try:
            self.launch(deadline_ns)
            if self.failed or not self._settle(len(self.runs), started_ns):
                self.results = None
                self._drain()
        finally:
            for _, run in self.runs:
                run.close()
        return self

    def _launch(self, step: ExecutionStep, deadline_ns: int | None, may_wait: bool = True) -> bool | None:
        """Launch ``step`` (True), or run it here when its device runs in-process; False when
        it failed, None when it would have to wait and ``may_wait`` is False."""
        if not may_wait and self._full(step.device):
            return None
        if not self._room(step.device):
            return False
        request, waits = self.requests[step.index], [] if self.fence is None else [self.fence]
        try:
            with tracing.runtime(_EXECUTION, "StepExecutor::computeFenced"):
                run = step.prepared.execute_fenced(request, waits, False, deadline_ns)
        except HalError as error:
            vlog.log("execution", "ExecutionPlan", "executeFenced of step %d on %s: %s; the steps "
                     "run one by one", step.index, step.device.name, error)
            if error.status == ErrorStatus.DEAD_OBJECT:
                self.dead.add(step.device)
            return False
        if run is not None:
            self.launched.setdefault(step.device, []).append(len(self.runs))
            self.runs.append((step, run))
            self.fence = run.fence
            return True
        if not may_wait:
            return None
        if not self._settle(len(self.runs)):  # an in-process model runs here, after the others
            return False
        with tracing.runtime(_EXECUTION, "StepExecutor::compute"):
            result = _fallback.execute(step.prepared, request, False, deadline_ns)
        self.fence = None
        return self._ended(step, result)

    def _full(self, device) -> bool:
        """Whether ``device`` has :data:`LAUNCH_AHEAD` runs not seen to end."""
        return sum(index >= self.ended for index in self.launched.get(device, ())) >= LAUNCH_AHEAD

    def _room(self, device) -> bool:
        """Whether ``device`` may take one more launch: at :data:`LAUNCH_AHEAD` runs not seen to
        end, wait until half of them ended (False when one failed)."""
        indexes = self.launched.get(device, [])
        while indexes and indexes[0] < self.ended:
            indexes.pop(0)
        if len(indexes) < LAUNCH_AHEAD:
            return True
        return self._settle(indexes[len(indexes) - LAUNCH_AHEAD // 2] + 1)

    def _ended(self, step: ExecutionStep, result: ExecutionResult, why: str | None = None) -> bool:
        if vlog.is_on("execution"):
            vlog.log("execution", "ExecutionPlan", "step %d on %s: %s (fenced)%s", step.index, step.device.name,
                     result.status.name, f": {why}" if why and result.status != _NONE else "")
        if result.status == ErrorStatus.DEAD_OBJECT:
            self.dead.add(step.device)
        if result.status != _NONE:
            return False
        self.results.append(result)
        return True

    def _settle(self, count: int, started_ns: int | None = None) -> bool:
        """Wait until the first ``count`` runs ended; False when one failed or its driver
        stopped answering (its process is killed). The last of them is waited for first: one
        wake-up when all goes well; the first not ended has its device's timeout from when the
        one before it ended. ``started_ns``: when the execution launched its first step, for
        the wait of a whole execution, which sleeps through the part it is expected to take and
        looks without sleeping around its expected end."""
        since = time.monotonic()
        with tracing.runtime(_EXECUTION, "syncWait"):
            if started_ns is not None and count and self.plan.watch_s > 0:
                self._look_around(self.runs[count - 1][1], started_ns)
            last, last_done = (self.runs[count - 1][1] if count else None), False
            while self.ended < count:
                step, run = self.runs[self.ended]
                left = since + run.timeout_s - time.monotonic()
                if not last_done:  # once the last ended well, so did every run before it
                    state = last.state(max(0.0, min(CHECK_S, left)))
                    last_done = state == DONE
                    if not last_done and self.ended < count - 1:
                        state = run.state(0)
                if state == ACTIVE:
                    if left <= 0:
                        self._silent(step, run)
                        return False
                    continue
                self.ended += 1
                since = time.monotonic()
                if not self._ended(step, run.result(state), run.last_error):
                    return False
        if started_ns is not None and count == len(self.plan.steps):
            self.plan.fenced_wait.learn(time.monotonic_ns() - started_ns)
        return True

    def _look_around(self, last, started_ns: int) -> None:
        """Sleep until a little before the expected end of the execution (or its last fence),
        then look for the last fence without sleeping until a while after that end."""
        first, until = self.plan.fenced_wait.window(started_ns, int(self.plan.watch_s * 1e9))
        if nap(last.fence, (first - time.monotonic_ns()) / 1e9):
            return
        spin(lambda: last.state(0) != ACTIVE, (until - time.monotonic_ns()) / 1e9)

    def _silent(self, step: ExecutionStep, run) -> None:
        why = f"no fenced step ended within {run.timeout_s:g}s"
        vlog.log("execution", "ExecutionPlan", "step %d on %s: %s; driver killed", step.index,
                 step.device.name, why)
        run.give_up(why)
        self.dead.add(step.device)

    def _drain(self) -> None:
        """After a failure: wait until no launched step can still run (a silent one is given
        up), so that the steps one by one own the step memory."""
        for step, run in self.runs[self.ended:]:
            since = time.monotonic()
            while run.state(CHECK_S) == ACTIVE:
                if time.monotonic() - since >= run.timeout_s:
                    self._silent(step, run)
                    break


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


def _fenced_result(plan: ExecutionPlan, memory: StepMemory, arguments: _Arguments,
                   results: list) -> ExecutionResult:
    """The result of a fenced run: the last one again when every step reported the very
    shapes it reported then (a static plan's steps do, run after run)."""
    shapes = tuple(result.output_shapes for result in results)
    last = memory.fenced_result
    if last is not None and len(last[0]) == len(shapes) and all(a is b for a, b in zip(last[0], shapes)):
        return last[1]
    result = _shapes_of(plan, arguments, zip(plan.steps, results))
    memory.fenced_result = (shapes, result)
    return result


def _shapes_of(plan: ExecutionPlan, arguments: _Arguments, results) -> ExecutionResult:
    """The successful result of a fenced run from each step's result."""
    shapes = _model_shapes(plan)
    for step, result in results:
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
