"""``Execution``: bind inputs/outputs to a compiled model and run it (ANeuralNetworksExecution).

Arguments are checked when they are set (index, dtype, size, dimensions), and the HAL
``Request`` is built once and reused until an argument changes, so :meth:`Execution.compute`
only hands the cached request to the plan. An execution can be computed again after it
completed (NNAPI's reusable executions); outputs with unknown dimensions report their real
shape through :meth:`get_output_operand_dimensions`, also after OUTPUT_INSUFFICIENT_SIZE.

Example:
    >>> import numpy as np
    >>> execution = Execution(compilation)                            # doctest: +SKIP
    >>> execution.set_input(0, np.ones((1, 4), np.float32))           # doctest: +SKIP
    >>> out = np.empty((1, 4), np.float32); execution.set_output(0, out)  # doctest: +SKIP
    >>> execution.compute()                                           # doctest: +SKIP
"""
from __future__ import annotations

import threading
import time
from typing import Sequence

import numpy as np

import tracing
import vlog
from runtime import _steps
from runtime.api import NnError, ResultCode
from runtime.compilation import Compilation
from runtime.event import Event
from runtime.hal.device_types import ExecutionResult, Request, RequestArgument
from runtime.hal.errors import result_code_from_status
from runtime.hal.types import ErrorStatus, Operand, numpy_dtype
from runtime.hal.validate import argument_problem, merge_dimensions
from runtime.memory import Memory
from timing import NS_PER_US, Duration
from tracing import Layer, Phase
from tracing.naming import format_name
from tracing.tracer import hot_recorder

_EMPTY = b""
_COMPUTE_TAG = format_name(Layer.RUNTIME, Phase.EXECUTION)
_IDLE, _RUNNING = 0, 1
_NONE = ErrorStatus.NONE  # a module global: Enum member access is slow on Python 3.11


class Execution:
    """One set of inputs and outputs for a finished :class:`Compilation`.

    Raises:
        NnError: BAD_STATE if the compilation is not finished.
    """

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_create")
    def __init__(self, compilation: Compilation):
        if not isinstance(compilation, Compilation) or compilation.plan is None:
            raise NnError(ResultCode.BAD_STATE, "Execution: the compilation is not finished")
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
        self._loop_timeout_ns = 2_000_000_000
        self._state = _IDLE
        self._lock = threading.Lock()
        self._result: ExecutionResult | None = None

    # ------------------------------------------------------------------ arguments
    @tracing.runtime(Phase.INPUTS_AND_OUTPUTS, "ANeuralNetworksExecution_setInput")
    def set_input(self, index: int, buffer, dimensions: Sequence[int] | None = None) -> None:
        """Bind model input ``index`` to ``buffer`` (a numpy array or bytes-like), or None to omit it.

        Raises:
            NnError: BAD_DATA for a bad index, dtype, size or dimensions; BAD_STATE while running.
        """
        self._bind("input", index, buffer, dimensions)

    @tracing.runtime(Phase.INPUTS_AND_OUTPUTS, "ANeuralNetworksExecution_setOutput")
    def set_output(self, index: int, buffer, dimensions: Sequence[int] | None = None) -> None:
        """Bind model output ``index`` to a writable ``buffer`` (numpy array, bytearray, ...).

        Raises:
            NnError: BAD_DATA for a bad index, dtype, size or read-only buffer; BAD_STATE while running.
        """
        self._bind("output", index, buffer, dimensions)

    @tracing.runtime(Phase.INPUTS_AND_OUTPUTS, "ANeuralNetworksExecution_setInputFromMemory")
    def set_input_from_memory(self, index: int, memory: Memory, offset: int, length: int,
                              dimensions: Sequence[int] | None = None) -> None:
        """Bind model input ``index`` to ``length`` bytes of ``memory`` at ``offset``."""
        self._bind_memory("input", index, memory, offset, length, dimensions)

    @tracing.runtime(Phase.INPUTS_AND_OUTPUTS, "ANeuralNetworksExecution_setOutputFromMemory")
    def set_output_from_memory(self, index: int, memory: Memory, offset: int, length: int,
                               dimensions: Sequence[int] | None = None) -> None:
        """Bind model output ``index`` to ``length`` bytes of ``memory`` at ``offset``."""
        self._bind_memory("output", index, memory, offset, length, dimensions)

    def _slot(self, kind: str, index: int) -> tuple[int, Operand]:
        self._check_idle(f"set{kind.capitalize()}")
        operands = self._in_operands if kind == "input" else self._out_operands
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(operands):
            raise NnError(ResultCode.BAD_DATA, f"set{kind.capitalize()}: {kind} index {index} out "
                          f"of range (model has {len(operands)} {kind}s)")
        slot = index if kind == "input" else len(self._in_operands) + index
        return slot, operands[index]

    def _bind(self, kind: str, index: int, buffer, dimensions) -> None:
        slot, operand = self._slot(kind, index)
        where = f"set{kind.capitalize()}: {kind} {index} (operand {self._operand_index(kind, index)})"
        if buffer is None:
            if kind == "output":
                raise NnError(ResultCode.UNEXPECTED_NULL, f"{where}: outputs cannot be omitted")
            self._store(slot, RequestArgument(has_no_value=True, pool_index=slot), _EMPTY)
            return
        if kind == "input" and not isinstance(buffer, np.ndarray) and \
                isinstance(buffer, (int, float, bool, list, tuple)):
            buffer = np.asarray(buffer, numpy_dtype(operand.type))
        dims = _dims_for(buffer, operand, dimensions) if kind == "input" else \
            tuple(int(d) for d in dimensions or ())
        view = _as_buffer(buffer, operand, kind == "output", where)
        self._check_and_store(kind, index, slot, operand, view, 0, view.nbytes, dims, where)

    def _bind_memory(self, kind: str, index: int, memory: Memory, offset: int, length: int,
                     dimensions) -> None:
        slot, operand = self._slot(kind, index)
        where = f"set{kind.capitalize()}FromMemory: {kind} {index} (operand {self._operand_index(kind, index)})"
        if not isinstance(memory, Memory) or memory.freed:
            raise NnError(ResultCode.BAD_DATA, f"{where}: not a live Memory")
        dims = tuple(dimensions) if dimensions is not None else ()
        self._check_and_store(kind, index, slot, operand, memory, offset, length, dims, where)

    def _check_and_store(self, kind, index, slot, operand, pool, offset, length, dims, where) -> None:
        arg = RequestArgument(False, slot, int(offset), int(length), tuple(int(d) for d in dims))
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
    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_setMeasureTiming")
    def set_measure_timing(self, measure: bool) -> None:
        """Ask the device to measure durations (read them with :meth:`get_duration`).

        Raises:
            NnError: BAD_STATE unless the compilation was created with
                ``Compilation.for_devices`` for exactly one device (as NNAPI requires).
        """
        self._check_idle("setMeasureTiming")
        compilation = self.compilation
        if not compilation.explicit_devices or len(compilation.devices) != 1:
            raise NnError(ResultCode.BAD_STATE, "setMeasureTiming: only for a compilation created "
                          "by Compilation.for_devices with exactly one device")
        self._measure = bool(measure)

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_setTimeout")
    def set_timeout(self, duration_ns: int) -> None:
        """Give each compute a deadline ``duration_ns`` after it starts (0 = none)."""
        self._check_idle("setTimeout")
        self._require_single_device("setTimeout")
        if duration_ns < 0:
            raise NnError(ResultCode.BAD_DATA, f"setTimeout: negative duration {duration_ns}")
        self._timeout_ns = int(duration_ns)

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_setLoopTimeout")
    def set_loop_timeout(self, duration_ns: int) -> None:
        """Limit the time a WHILE loop may run (default 2 s)."""
        self._check_idle("setLoopTimeout")
        self._loop_timeout_ns = int(duration_ns)

    def _require_single_device(self, call: str) -> None:
        if len({id(d) for d in self._plan.devices()}) != 1:
            raise NnError(ResultCode.BAD_DATA, f"{call}: the compilation runs on several devices")

    # ------------------------------------------------------------------ running
    def compute(self) -> None:
        """Run synchronously (ANeuralNetworksExecution_compute), in the span
        ``[NN_LR_PE]ANeuralNetworksExecution_compute`` (recorded inline: the hot path).

        Raises:
            NnError: BAD_DATA if an argument is unset; OUTPUT_INSUFFICIENT_SIZE naming the output
                and the shape it needs; the device's code (OP_FAILED, MISSED_DEADLINE_*, ...).
        """
        recorder = hot_recorder()
        if recorder is None:
            self._begin("compute")
            self._compute()
            return
        append, extend, now = recorder
        extend((_COMPUTE_TAG, "ANeuralNetworksExecution_compute", now()))
        try:
            self._begin("compute")
            self._compute()
        finally:
            append(now())

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_startCompute")
    def start_compute(self) -> Event:
        """Start computing on a worker thread; ``Event.wait()`` returns or raises like compute()."""
        self._begin("startCompute")
        return Event.start(self._compute)

    def _begin(self, call: str) -> None:
        with self._lock:
            if self._state == _RUNNING:
                raise NnError(ResultCode.BAD_STATE, f"{call}: execution is already running")
            self._state = _RUNNING
        self._result = None

    def _compute(self) -> None:
        try:
            request = self._request or self._make_request()
            deadline = time.monotonic_ns() + self._timeout_ns if self._timeout_ns else None
            result, failed = _steps.run_plan(self._plan, request, self._measure, deadline)
            self._result = result
            if result.status != _NONE:
                raise self._error(result, failed)
        finally:
            self._state = _IDLE

    def _make_request(self) -> Request:
        n_in = len(self._in_operands)
        for slot, arg in enumerate(self._args):
            if arg is None:
                kind, index = ("input", slot) if slot < n_in else ("output", slot - n_in)
                raise NnError(ResultCode.BAD_DATA, f"compute: {kind} {index} (operand "
                              f"{self._operand_index(kind, index)}) is not set")
        self._request = Request(tuple(self._args[:n_in]), tuple(self._args[n_in:]), tuple(self._pools))
        vlog.log("execution", "ExecutionBuilder", "request: %d inputs, %d outputs, plan of %d step(s)",
                 n_in, len(self._out_operands), len(self._plan.steps))
        return self._request

    def _error(self, result: ExecutionResult, failed) -> NnError:
        code = result_code_from_status(result.status)
        where = f"step {failed.index} on {failed.device.name}" if failed is not None else "compute"
        if result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            return NnError(code, self._insufficient_message(result))
        detail = getattr(failed.prepared, "last_error", None) if failed is not None else None
        return NnError(code, f"{where}: {result.status.name}" + (f": {detail}" if detail else ""))

    def _insufficient_message(self, result: ExecutionResult) -> str:
        parts = []
        for index, shape in enumerate(result.output_shapes):
            if not shape.is_sufficient:
                operand = self._out_operands[index]
                needed = Operand(operand.type, tuple(shape.dimensions)).byte_size()
                arg = self._args[len(self._in_operands) + index]
                parts.append(f"output {index} (operand {self._operand_index('output', index)}) needs "
                             f"shape {list(shape.dimensions)} ({needed} bytes), buffer has {arg.length} bytes")
        return "; ".join(parts) or "an output buffer is too small"

    # ------------------------------------------------------------------ results
    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_getDuration")
    def get_duration(self, duration: int) -> int | None:
        """A measured duration in **nanoseconds**, or None when the device did not report it.

        As ``ANeuralNetworksExecution_getDuration``: the driver measures microseconds (HAL
        ``Timing``, ``UINT64_MAX`` when unknown) and the runtime reports them times 1000.
        ``Duration.ON_HARDWARE`` / ``IN_DRIVER`` (the fenced codes read the same values for
        a non-fenced execution).

        Raises:
            NnError: BAD_STATE unless timing was measured and the execution completed.
        """
        if not self._measure or self._result is None or self._result.status != ErrorStatus.NONE:
            raise NnError(ResultCode.BAD_STATE, "getDuration: needs set_measure_timing(True) and a "
                          "completed execution")
        timing = self._result.timing
        try:
            code = Duration(duration)
        except ValueError:
            raise NnError(ResultCode.BAD_DATA, f"getDuration: unknown duration code {duration!r}") from None
        if timing is None:
            return None
        value = timing.get(Duration(code % 2))  # a non-fenced run reports the same fenced durations
        return None if value is None else value * NS_PER_US

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_getOutputOperandDimensions")
    def get_output_operand_dimensions(self, index: int) -> tuple[int, ...]:
        """The actual shape of output ``index`` after compute (also after OUTPUT_INSUFFICIENT_SIZE)."""
        shapes = self._shapes("getOutputOperandDimensions", index)
        return tuple(shapes[index].dimensions)

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_getOutputOperandRank")
    def get_output_operand_rank(self, index: int) -> int:
        """The rank of output ``index`` after compute."""
        return len(self._shapes("getOutputOperandRank", index)[index].dimensions)

    def _shapes(self, call: str, index: int):
        result = self._result
        if result is None or result.status not in (ErrorStatus.NONE, ErrorStatus.OUTPUT_INSUFFICIENT_SIZE):
            raise NnError(ResultCode.BAD_STATE, f"{call}: the execution has not completed")
        if not 0 <= index < len(self._out_operands):
            raise NnError(ResultCode.BAD_DATA, f"{call}: output index {index} out of range "
                          f"(model has {len(self._out_operands)} outputs)")
        return result.output_shapes

    def free(self) -> None:
        """Release the execution (ANeuralNetworksExecution_free)."""
        with tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_free"):
            self._request = None
            self._pools = [_EMPTY] * len(self._args)

    def _check_idle(self, call: str) -> None:
        if self._state == _RUNNING:
            raise NnError(ResultCode.BAD_STATE, f"{call}: execution is running")


def _dims_for(buffer, operand: Operand, dimensions) -> tuple[int, ...]:
    if dimensions is not None:
        return tuple(int(d) for d in dimensions)
    unknown = not operand.dimensions or 0 in operand.dimensions
    if isinstance(buffer, np.ndarray) and unknown and buffer.ndim:
        return buffer.shape if merge_dimensions(operand.dimensions, buffer.shape) is not None else ()
    return ()


def _as_buffer(buffer, operand: Operand, writable: bool, where: str):
    if isinstance(buffer, np.ndarray):
        dtype = numpy_dtype(operand.type)
        if buffer.dtype != dtype:
            raise NnError(ResultCode.BAD_DATA, f"{where}: {operand.type.name} needs dtype {dtype}, "
                          f"buffer has {buffer.dtype}")
        if not buffer.flags.c_contiguous:
            raise NnError(ResultCode.BAD_DATA, f"{where}: array is not C-contiguous")
        if writable and not buffer.flags.writeable:
            raise NnError(ResultCode.BAD_DATA, f"{where}: array is read-only")
        return buffer
    try:
        view = memoryview(buffer)
    except TypeError:
        raise NnError(ResultCode.BAD_DATA, f"{where}: {type(buffer).__name__} is not a buffer") from None
    if writable and view.readonly:
        raise NnError(ResultCode.BAD_DATA, f"{where}: buffer is read-only")
    return view
