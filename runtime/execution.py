"""``Execution``: bind inputs/outputs to a compiled model and run it (ANeuralNetworksExecution).

Arguments are checked when they are set (index, dtype, size, dimensions; each is set once), and
the HAL ``Request`` is built once, so :meth:`Execution.compute` only hands the cached request to
the plan. An execution is single-use, as NNAPI: once a computation completed, setters and
computes raise BAD_STATE, unless ``set_reusable(True)`` was called first (NNAPI feature level 5),
which lets the same arguments be computed again, one computation at a time. Outputs with unknown
dimensions report their real shape through :meth:`get_output_operand_dimensions`, also after
OUTPUT_INSUFFICIENT_SIZE.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime import get_device
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> compilation = Compilation.for_devices(tiny_add(), [get_device("nnapi-reference")])
    >>> compilation.finish()
    >>> execution = Execution(compilation)
    >>> execution.set_input(0, np.ones((1, 4), np.float32))
    >>> execution.set_input(1, np.full((1, 4), 2, np.float32))
    >>> out = np.empty((1, 4), np.float32); execution.set_output(0, out)
    >>> execution.set_reusable(True)
    >>> execution.compute(); execution.compute()
    >>> out.tolist(), execution.get_output_operand_dimensions(0)
    ([[3.0, 3.0, 3.0, 3.0]], (1, 4))
    >>> execution.free(); compilation.free()
"""
from __future__ import annotations

import functools
import mmap
from typing import Sequence

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime import _checks as checks
from nnscope.runtime import _execargs as args
from nnscope.runtime import _fenced, _fenced_remote
from nnscope.runtime import _steps
from nnscope.runtime import memory_desc
from nnscope.runtime._lifecycle import ExecutionState
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.burst import Burst
from nnscope.runtime.compilation import Compilation, deadline_after
from nnscope.runtime.event import Event
from nnscope.runtime.hal.device_types import ExecutionResult, Request, RequestArgument
from nnscope.runtime.hal.errors import result_code_from_status
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.runtime.hal.validate import argument_problem
from nnscope.runtime.memory import Memory
from nnscope.tracing import Phase

#: Default and maximum of ``set_loop_timeout`` (ANeuralNetworks_getDefaultLoopTimeout / getMaximumLoopTimeout).
LOOP_TIMEOUT_DEFAULT_NS = 2_000_000_000
LOOP_TIMEOUT_MAXIMUM_NS = 15_000_000_000

_EMPTY = b""
_NONE = ErrorStatus.NONE  # a module global: Enum member access is slow on Python 3.11


class Execution:
    """One set of inputs and outputs for a finished :class:`Compilation`.

    Single-use by default, as NNAPI: after a computation (``compute()``, or ``start_compute()``
    then ``Event.wait()``) every setter and every further compute raises BAD_STATE. Call
    ``set_reusable(True)`` before the first compute to compute the same arguments again.

    Raises:
        NnError: UNEXPECTED_NULL for None, BAD_DATA for something that is not a Compilation,
            BAD_STATE if the compilation is not finished (or its finish failed).
    """

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_create")
    def __init__(self, compilation: Compilation):
        checks.not_null(compilation, "create", "compilation")
        if not isinstance(compilation, Compilation):
            raise checks.bad("create", f"expected a Compilation, got {type(compilation).__name__}")
        compilation.check_executable("create")
        self.compilation = compilation
        self._plan = compilation.plan
        graph = self._plan.model.main
        self._in_operands = tuple(graph.operands[i] for i in graph.input_indexes)
        self._out_operands = tuple(graph.operands[i] for i in graph.output_indexes)
        n_in = len(self._in_operands)
        self._args: list[RequestArgument | None] = [None] * (n_in + len(self._out_operands))
        self._pools: list = [_EMPTY] * len(self._args)
        self._request: Request | None = None
        self._measure = False
        self._timeout_ns = 0
        self._loop_timeout_ns = LOOP_TIMEOUT_DEFAULT_NS
        self._state = ExecutionState()
        self._result: ExecutionResult | None = None
        self._fenced_timing = None
        self._described: tuple = ()  # slots bound to memories made from a MemoryDesc

    # ------------------------------------------------------------------ arguments
    @tracing.runtime(Phase.INPUTS_AND_OUTPUTS, "ANeuralNetworksExecution_setInput")
    def set_input(self, index: int, buffer, dimensions: Sequence[int] | None = None) -> None:
        """Bind model input ``index`` to ``buffer`` (a numpy array or bytes-like), or None to omit it.

        Raises:
            NnError: BAD_STATE once computing started or when the input is already set;
                BAD_DATA for a bad index, dtype, size or dimensions.
        """
        self._bind("input", index, buffer, dimensions)

    @tracing.runtime(Phase.INPUTS_AND_OUTPUTS, "ANeuralNetworksExecution_setOutput")
    def set_output(self, index: int, buffer, dimensions: Sequence[int] | None = None) -> None:
        """Bind model output ``index`` to a writable ``buffer`` (numpy array, bytearray, ...).

        Raises:
            NnError: UNEXPECTED_NULL for a None buffer; BAD_STATE once computing started or
                when the output is already set; BAD_DATA for a bad index, dtype, size or a
                read-only buffer.
        """
        checks.not_null(buffer, "setOutput", "buffer")
        self._bind("output", index, buffer, dimensions)

    @tracing.runtime(Phase.INPUTS_AND_OUTPUTS, "ANeuralNetworksExecution_setInputFromMemory")
    def set_input_from_memory(self, index: int, memory: Memory, offset: int, length: int,
                              dimensions: Sequence[int] | None = None) -> None:
        """Bind model input ``index`` to ``length`` bytes of ``memory`` at ``offset``.

        Raises:
            NnError: as :meth:`set_input`; UNEXPECTED_NULL for a None memory.
        """
        self._bind_memory("input", index, memory, offset, length, dimensions)

    @tracing.runtime(Phase.INPUTS_AND_OUTPUTS, "ANeuralNetworksExecution_setOutputFromMemory")
    def set_output_from_memory(self, index: int, memory: Memory, offset: int, length: int,
                               dimensions: Sequence[int] | None = None) -> None:
        """Bind model output ``index`` to ``length`` bytes of ``memory`` at ``offset``.

        Raises:
            NnError: as :meth:`set_output`; UNEXPECTED_NULL for a None memory.
        """
        self._bind_memory("output", index, memory, offset, length, dimensions)

    def _slot(self, kind: str, index, dimensions, call: str):
        """State, index and dimensions of a setter, in AOSP's order: (slot, operand, dims, where)."""
        self._state.check_preparing(call)
        operands = self._in_operands if kind == "input" else self._out_operands
        index = checks.index(index, len(operands), call, f"{kind} index")
        where = f"{call}: {kind} {index} (operand {self._operand_index(kind, index)})"
        operand = operands[index]
        dims = None if dimensions is None else args.checked_dimensions(dimensions, operand, where)
        slot = index if kind == "input" else len(self._in_operands) + index
        return slot, operand, dims, where

    def _check_unset(self, slot: int, where: str) -> None:
        if self._args[slot] is not None:
            raise NnError(ResultCode.BAD_STATE, f"{where}: already set (an argument is set once)")

    def _bind(self, kind: str, index: int, buffer, dimensions) -> None:
        call = f"set{kind.capitalize()}"
        slot, operand, dims, where = self._slot(kind, index, dimensions, call)
        self._check_unset(slot, where)
        if buffer is None:  # an omitted optional input (nullptr, 0 in C)
            self._store(slot, RequestArgument(has_no_value=True, pool_index=slot), _EMPTY)
            return
        if kind == "input":
            buffer = args.as_array(buffer, operand, where)
            dims = args.dims_for(buffer, operand, dims)
        view = args.as_buffer(buffer, operand, kind == "output", where)
        self._check_and_store(kind, index, slot, operand, view, 0, view.nbytes, dims or (), where)

    def _bind_memory(self, kind: str, index: int, memory: Memory, offset: int, length: int,
                     dimensions) -> None:
        call = f"set{kind.capitalize()}FromMemory"
        checks.not_null(memory, call, "memory")
        slot, operand, dims, where = self._slot(kind, index, dimensions, call)
        access = mmap.PROT_READ if kind == "input" else mmap.PROT_WRITE
        memory = Memory.checked(memory, where, access)
        offset, length, dims = memory_desc.region(memory, self.compilation, kind, index, offset,
                                                  length, dims, where)
        self._check_unset(slot, where)
        self._check_and_store(kind, index, slot, operand, memory, offset, length, dims or (), where)
        if memory.desc is not None:
            self._described += (slot,)

    def _check_and_store(self, kind, index, slot, operand, pool, offset, length, dims, where) -> None:
        arg = RequestArgument(False, slot, offset, length, tuple(dims))
        sizes = [0] * len(self._args)
        sizes[slot] = pool.size if isinstance(pool, Memory) else length
        problem = argument_problem(kind, index, arg, operand, sizes)
        if problem:
            raise NnError(ResultCode.BAD_DATA, f"{where}: {problem.split(': ', 1)[-1]}")
        self._store(slot, arg, pool)

    def _store(self, slot: int, arg: RequestArgument, pool) -> None:
        self._args[slot] = arg
        self._pools[slot] = pool
        self._request = None

    def _operand_index(self, kind: str, index: int) -> int:
        graph = self._plan.model.main
        return (graph.input_indexes if kind == "input" else graph.output_indexes)[index]

    # ------------------------------------------------------------------ options
    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_setReusable")
    def set_reusable(self, reusable: bool = True) -> None:
        """Allow computing this execution again once a computation completed (NNAPI feature
        level 5). Arguments stay bound; the buffers' contents are read at each compute.

        Raises:
            NnError: BAD_STATE once computing started; BAD_DATA for a non-bool.
        """
        self._state.check_preparing("setReusable")
        self._state.reusable = checks.flag(reusable, "setReusable", "reusable")

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_setMeasureTiming")
    def set_measure_timing(self, measure: bool) -> None:
        """Ask the device to measure durations (read them with :meth:`get_duration`).

        Raises:
            NnError: BAD_DATA unless the compilation was created with ``Compilation.for_devices``
                for exactly one device (as NNAPI requires); BAD_STATE once computing started.
        """
        self._require_single_device("setMeasureTiming")
        self._state.check_preparing("setMeasureTiming")
        self._measure = checks.flag(measure, "setMeasureTiming", "measure")

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_setTimeout")
    def set_timeout(self, duration_ns: int) -> None:
        """Give each compute a deadline ``duration_ns`` after it starts (0 = none).

        Raises:
            NnError: BAD_DATA unless compiled by ``Compilation.for_devices`` for exactly one
                device, or for a duration that is not a uint64; BAD_STATE once computing started.
        """
        self._require_single_device("setTimeout")
        self._state.check_preparing("setTimeout")
        self._timeout_ns = checks.duration(duration_ns, "setTimeout")

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_setLoopTimeout")
    def set_loop_timeout(self, duration_ns: int) -> None:
        """Limit the time a WHILE loop may run (default 2 s, at most 15 s: larger values are
        clamped, as NNAPI). Raises NnError BAD_STATE once computing started, BAD_DATA for a
        duration that is not a uint64."""
        self._state.check_preparing("setLoopTimeout")
        self._loop_timeout_ns = min(checks.duration(duration_ns, "setLoopTimeout"),
                                    LOOP_TIMEOUT_MAXIMUM_NS)

    def _require_single_device(self, call: str) -> None:
        compilation = self.compilation
        if not compilation.explicit_devices or len(compilation.devices) != 1:
            raise NnError(ResultCode.BAD_DATA, f"{call}: only for a compilation created by "
                          "Compilation.for_devices with exactly one device")

    # ------------------------------------------------------------------ running
    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_compute")
    def compute(self) -> None:
        """Run synchronously (ANeuralNetworksExecution_compute).

        Raises:
            NnError: BAD_STATE while computing or once completed (unless reusable); BAD_DATA if
                an argument is unset; OUTPUT_INSUFFICIENT_SIZE naming the output and the shape
                it needs; the device's code (OP_FAILED, MISSED_DEADLINE_*, ...).
        """
        self._run(self._start("compute"))

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_burstCompute")
    def burst_compute(self, burst: Burst) -> None:
        """As :meth:`compute`, each step run by its controller in ``burst`` (burstCompute). Raises
        NnError as :meth:`compute`; UNEXPECTED_NULL for None, BAD_DATA for something that is not
        a Burst or a burst of another compilation, BAD_STATE for a freed or busy burst."""
        Burst.enter(burst, self, "burstCompute")
        try:
            self._run(self._start("burstCompute"), prepared_of=burst.prepared_for)
        finally:
            burst.end()

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_startCompute")
    def start_compute(self) -> Event:
        """Start computing on a worker thread; ``Event.wait()`` returns or raises like compute().

        Raises:
            NnError: at this call, BAD_STATE and BAD_DATA as :meth:`compute`.
        """
        request = self._start("startCompute")
        return Event.start(lambda: self._run(request))

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_startComputeWithDependencies")
    def start_compute_with_dependencies(self, events: Sequence[Event], duration_ns: int = 0) -> Event:
        """Start once all ``events`` signalled, the caller not waiting; returns an Event backed by a
        sync fence. ``duration_ns`` (0 = none) limits the run after the fences signal. Raises NnError
        as start_compute; UNEXPECTED_NULL/BAD_DATA for bad events; OP_FAILED for one already failed;
        BAD_DATA for an unspecified output shape (NeuralNetworks.h) and for a duration unless on one
        device. ``wait()`` raises OP_FAILED if a dependency fails, MISSED_DEADLINE_TRANSIENT when
        time runs out. A single step runs through its device's executeFenced (runtime._fenced_remote);
        a compound plan whose steps repeat has every step launched fenced at the call, waiting for
        its inputs, which a relay copies in once the dependencies signalled (runtime._steps.launch)."""
        call = "startComputeWithDependencies"
        deps = _fenced.dependencies(events, call, Event)
        if checks.duration(duration_ns, call):
            self._require_single_device(call)
        request = self._start(call)
        _fenced.check_outputs_specified(self._out_operands, request.outputs, call, self._state.cancel)
        deadline = deadline_after(self._timeout_ns)
        try:
            launched = _steps.launch(self._plan, request, deadline)  # a compound plan's steps, fenced
        except BaseException:
            self._state.cancel()
            raise
        in_process = functools.partial(self._run_fenced, request, deps, duration_ns, deadline, launched)
        if launched is not None:
            return Event.start(in_process, name="nn-fenced-relay", fenced=True)
        event = _fenced_remote.start(self._plan, request, deps, self._measure, duration_ns, deadline,
                                     in_process, self._fenced_done)  # the device's executeFenced
        return event or Event.start(in_process, fenced=True)

    def _fenced_done(self, result: ExecutionResult, fenced_timing) -> None:  # a launched fenced run's end
        self._result, self._fenced_timing = result, fenced_timing
        self._state.complete()

    def _run_fenced(self, request: Request, dependencies, duration_ns: int, deadline: int | None,
                    launched=None) -> None:
        """The fenced execution once its dependencies signalled (``launched``: its compound
        plan's steps, launched at the call and waiting for the inputs)."""
        try:
            waited = _fenced.wait_for(dependencies, self._state.complete)
        except BaseException:
            if launched is not None:
                launched.cancel()
            raise
        try:
            self._run(request, _fenced.earlier(deadline, deadline_after(duration_ns)), launched=launched)
        finally:
            self._fenced_timing = _fenced.fenced_timing(self._result and self._result.timing, waited)

    def _start(self, call: str) -> Request:
        """Enter computation with a checked request (an unset argument leaves it unstarted)."""
        self._state.begin(call)
        try:
            request = self._request or self._make_request(call)
        except BaseException:
            self._state.cancel()
            raise
        self._result = self._fenced_timing = None
        return request

    def _run(self, request: Request, deadline: int | None = None, prepared_of=None, launched=None) -> None:
        ran = False  # refused before running (an uninitialised input): output memories keep their state
        try:
            if self._described:
                try:
                    memory_desc.check_inputs(self._pools, self._described, len(self._in_operands))
                except BaseException:
                    if launched is not None:
                        launched.cancel()
                    raise
            ran = True
            deadline = deadline or deadline_after(self._timeout_ns)
            result, failed = _steps.run_plan(self._plan, request, self._measure, deadline, prepared_of,
                                             launched)
            self._result = result
            if result.status != _NONE:
                raise self._error(result, failed)
        finally:
            if self._described and ran:
                memory_desc.mark_outputs(self._pools, self._described, len(self._in_operands), self._result)
            self._state.complete()

    def _make_request(self, call: str) -> Request:
        n_in = len(self._in_operands)
        for slot, arg in enumerate(self._args):
            if arg is None:
                kind, index = ("input", slot) if slot < n_in else ("output", slot - n_in)
                raise NnError(ResultCode.BAD_DATA, f"{call}: {kind} {index} (operand "
                              f"{self._operand_index(kind, index)}) is not set")
        self._request = Request(tuple(self._args[:n_in]), tuple(self._args[n_in:]), tuple(self._pools),
                                self._loop_timeout_ns)
        vlog.log("execution", "ExecutionBuilder", "request: %d inputs, %d outputs, plan of %d step(s)",
                 n_in, len(self._out_operands), len(self._plan.steps))
        return self._request

    def _error(self, result: ExecutionResult, failed) -> NnError:
        code = result_code_from_status(result.status)
        where = f"step {failed.index} on {failed.device.name}" if failed is not None else "compute"
        if result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            return NnError(code, args.insufficient_message(result, self._out_operands, self._args,
                                                           self._operand_index))
        detail = failed.prepared.last_error if failed is not None else None
        return NnError(code, f"{where}: {result.status.name}" + (f": {detail}" if detail else ""))

    # ------------------------------------------------------------------ results
    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_getDuration")
    def get_duration(self, duration: int) -> int | None:
        """A measured duration in **nanoseconds**, or None when the device did not report it.

        As ``ANeuralNetworksExecution_getDuration``: the driver measures microseconds (HAL
        ``Timing``) and the runtime reports them times 1000. The FENCED_* codes time a fenced
        run from when its fences signalled (a non-fenced run reports the same values).

        Raises:
            NnError: BAD_STATE unless timing was measured and the execution completed without
                error; BAD_DATA for an unknown duration code.
        """
        self._state.check_completed("getDuration")
        if self._result is None or self._result.status != ErrorStatus.NONE:
            raise NnError(ResultCode.BAD_STATE, "getDuration: the execution ended with an error")
        if not self._measure:
            raise NnError(ResultCode.BAD_STATE, "getDuration: needs set_measure_timing(True)")
        if not _fenced.known_duration(duration):
            raise NnError(ResultCode.BAD_DATA, f"getDuration: unknown duration code {duration!r}")
        return _fenced.duration_ns(self._result.timing, self._fenced_timing, duration)

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_getOutputOperandDimensions")
    def get_output_operand_dimensions(self, index: int) -> tuple[int, ...]:
        """The actual shape of output ``index`` after compute (also after OUTPUT_INSUFFICIENT_SIZE,
        where NNAPI fills the shape and returns that code: here the shape is returned).

        Raises:
            NnError: BAD_STATE before completion or after an error other than
                OUTPUT_INSUFFICIENT_SIZE; BAD_DATA for a bad index or a scalar output.
        """
        call = "getOutputOperandDimensions"
        dims = tuple(self._shapes(call, index)[int(index)].dimensions)
        if not dims:
            raise NnError(ResultCode.BAD_DATA, f"{call}: output {index} is a scalar (no dimensions)")
        return dims

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_getOutputOperandRank")
    def get_output_operand_rank(self, index: int) -> int:
        """The rank of output ``index`` after compute (0 for a scalar)."""
        return len(self._shapes("getOutputOperandRank", index)[int(index)].dimensions)

    def _shapes(self, call: str, index: int):
        self._state.check_completed(call)
        result = self._result
        if result is None or result.status not in (ErrorStatus.NONE, ErrorStatus.OUTPUT_INSUFFICIENT_SIZE):
            raise NnError(ResultCode.BAD_STATE, f"{call}: the execution ended with an error")
        checks.index(index, len(self._out_operands), call, "output index")
        return result.output_shapes

    def free(self) -> None:
        """Release the execution (ANeuralNetworksExecution_free)."""
        with tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_free"):
            self._request = None
            self._pools = [_EMPTY] * len(self._args)
