"""``nnapi-reference``: the in-process CPU device over :class:`~runtime.ops.executor.CpuExecutor`.

It implements the same :class:`~runtime.drivers.base.Device` / ``PreparedModel`` interface as a
driver process would: ``prepare_model`` builds a CpuExecutor once; ``execute`` reads the inputs
straight out of the request pools (numpy views, no copy), runs the executor and writes the
outputs into the pools, reporting :class:`OutputShape` (``is_sufficient``) and a ``Timing``.
The views of the last request are cached, so re-running the same request does no parsing.
``execute`` is the ordinary way through; a driver service repeating a request takes the one
measured repeat path, ``bound_run`` (see ``benchmarks/cpu_fast_paths.py``).
Fencing, bursts and device memory are the interface's defaults: fenced work runs in-process,
there is no burst controller and no device memory (as AOSP's CPU device).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.hal.device_types import Request, RequestArgument as Arg
    >>> hal_model = tiny_add().to_hal()
    >>> pool = bytearray(np.ones(8, np.float32).tobytes() + bytes(16))  # two inputs, one output
    >>> request = Request(inputs=(Arg(offset=0, length=16), Arg(offset=16, length=16)),
    ...                   outputs=(Arg(offset=32, length=16),), pools=(pool,))
    >>> device = CpuDevice()
    >>> prepared = device.prepare_model(hal_model)
    >>> result = prepared.execute(request, measure_timing=True)
    >>> result.status, result.output_shapes, result.timing
    (<ErrorStatus.NONE: 0>, (OutputShape(dimensions=(1, 4), is_sufficient=True),),
     Timing(time_on_device=..., time_in_driver=...))
    >>> prepared.release()
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime.drivers.base import Device
from nnscope.runtime.drivers.served import ServedModel
from nnscope.runtime.hal.device_types import (Capabilities, ExecutionResult, OutputShape, PerformanceInfo,
                                      Request)
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (DeviceType, ErrorStatus, HalModel, OperandType, Preference,
                               Priority, numpy_dtype)
from nnscope.runtime.hal.validate import merge_dimensions, pool_buffer, validate_request
from nnscope.runtime.ops import control_flow
from nnscope.runtime.ops.budget import BudgetExceeded, OutputTooSmall
from nnscope.runtime.ops.control_flow import DeadlinePassed, LoopTimeout
from nnscope.timing import Timing
from nnscope.tracing import Phase, tracer

#: Name of the reference CPU device.
NAME = "nnapi-reference"
_now = time.perf_counter_ns
_NONE = ErrorStatus.NONE  # a module global: Enum member access is slow on Python 3.11


class _Output(NamedTuple):
    buffer: object
    offset: int
    length: int
    dtype: np.dtype
    view: np.ndarray | None  # preallocated typed view when the shape is known


class _Binding(NamedTuple):
    inputs: list
    outputs: tuple[_Output, ...]
    capacities: tuple[int, ...]  # bytes of each output's region (checked before computing)
    ok_shapes: tuple | None  # shapes when every output fills its preallocated view
    ok_result: ExecutionResult | None  # the untimed success with those shapes (reused)


class CpuPreparedModel(ServedModel):
    """A model prepared for the CPU: one :class:`CpuExecutor` reused by every execution."""

    def __init__(self, model: HalModel, executor) -> None:
        self.model = model
        self.executor = executor
        graph = model.main
        self._in_ops = tuple(graph.operands[i] for i in graph.input_indexes)
        self._out_ops = tuple(graph.operands[i] for i in graph.output_indexes)
        self._cache: tuple = (None, None)  # (request, binding) of the last execution (see forget)
        #: Message of the last failed execution (the HAL result carries only a status).
        self.last_error: str | None = None

    def forget(self, match) -> None:
        if self._cache[0] is not None and match(self._cache[0]):
            self._cache = (None, None)

    def execute(self, request: Request, measure_timing: bool = False,
                deadline_ns: int | None = None) -> ExecutionResult:
        """Run ``request`` synchronously; errors come back as an ErrorStatus, never raised."""
        return self._execute(request, measure_timing, deadline_ns, tracer.hot_recorder())

    def _execute(self, request: Request, measure: bool, deadline_ns: int | None,
                 recorder) -> ExecutionResult:
        start = _now() if measure else 0
        binding = self._binding_for(request, deadline_ns)
        if isinstance(binding, ExecutionResult):
            return binding
        try:
            device_start = _now() if measure else 0
            logging = vlog.is_on("cpuexe")
            loop_timeout = request.loop_timeout_ns
            results = self.executor.run(binding.inputs, binding.capacities, loop_timeout, deadline_ns,
                                        recorder, logging)
            device_end = _now() if measure else 0
        except (LoopTimeout, DeadlinePassed) as error:
            return self._fail(ErrorStatus.MISSED_DEADLINE_TRANSIENT, str(error))
        except BudgetExceeded as error:
            return self._fail(ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT, str(error))
        except OutputTooSmall as error:
            self._fail(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, str(error))
            return ExecutionResult(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, self._shapes_for(request, error))
        except Exception as error:  # noqa: BLE001 - a driver reports, it does not raise
            return self._fail(ErrorStatus.GENERAL_FAILURE, f"{type(error).__name__}: {error}")
        status, shapes = write_outputs(binding, results)
        if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
            return self._fail(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed during execution")
        if not measure and shapes is binding.ok_shapes:
            return binding.ok_result
        timing = None
        if measure:
            timing = Timing((device_end - device_start) // 1000, (_now() - start) // 1000)
        return ExecutionResult(status, shapes, timing)

    def bound_run(self, request: Request, result: ExecutionResult) -> Callable[[], bool] | None:
        """After ``result`` of :meth:`execute` on ``request``: a callable repeating that run
        untimed and without a deadline (outputs written in place, the kernels' spans recorded
        when traced; see :meth:`CpuExecutor.bind <runtime.ops.executor.CpuExecutor.bind>`). It
        returns True when it ran and every output filled its region as bound, False when the
        caller must use :meth:`execute` instead. None unless ``result`` was the untimed success
        of the request this model bound last. The driver's one repeat path (memo repeats, burst
        frames, fenced steps); a measured fast path: ``benchmarks/cpu_fast_paths.py``
        (``burst_gain``, ``compute_gain``)."""
        cached_request, binding = self._cache
        if cached_request is not request or binding.ok_result is None or result is not binding.ok_result:
            return None
        return self.executor.bind(binding.inputs, binding.capacities,
                                  [out.view for out in binding.outputs])

    def _binding_for(self, request: Request, deadline_ns: int | None):
        """The checked binding of ``request`` (cached for the same Request object), or the
        failed ExecutionResult: a deadline already passed, or a request that does not bind."""
        if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
            return self._fail(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed before start")
        cached_request, binding = self._cache
        if cached_request is not request:
            try:
                binding = self._bind(request)
            except HalError as error:
                return self._fail(error.status, str(error))
            self._cache = (request, binding)
        return binding

    def _bind(self, request: Request) -> _Binding:
        validate_request(request, self.model)
        try:
            control_flow.check_loop_timeout(request.loop_timeout_ns)
        except ValueError as error:
            raise HalError(ErrorStatus.INVALID_ARGUMENT, str(error)) from None
        pools = [pool_buffer(p) for p in request.pools]
        inputs = []
        for arg, operand in zip(request.inputs, self._in_ops):
            if arg.has_no_value:
                inputs.append(None)
                continue
            dims = merge_dimensions(operand.dimensions, arg.dimensions)
            dtype = numpy_dtype(operand.type)
            view = np.frombuffer(pools[arg.pool_index], dtype, arg.length // dtype.itemsize, arg.offset)
            inputs.append(view.reshape(dims))
        outputs = []
        for arg, operand in zip(request.outputs, self._out_ops):
            dims = merge_dimensions(operand.dimensions, arg.dimensions)
            dtype = numpy_dtype(operand.type)
            buffer = pools[arg.pool_index]
            view = None
            if dims is not None and 0 not in dims:
                count = int(np.prod(dims, dtype=np.int64))
                if count * dtype.itemsize <= arg.length:
                    view = np.frombuffer(buffer, dtype, count, arg.offset).reshape(dims)
            outputs.append(_Output(buffer, arg.offset, arg.length, dtype, view))
        ok_shapes = ok_result = None
        if all(out.view is not None for out in outputs):
            ok_shapes = tuple(OutputShape(out.view.shape, True) for out in outputs)
            ok_result = ExecutionResult(ErrorStatus.NONE, ok_shapes, None)
        return _Binding(inputs, tuple(outputs), tuple(arg.length for arg in request.outputs),
                        ok_shapes, ok_result)

    def _shapes_for(self, request: Request, error: OutputTooSmall) -> tuple:
        """Output shapes of an OUTPUT_INSUFFICIENT_SIZE answer: what ``error``'s output needs."""
        shapes = []
        for position, (arg, operand) in enumerate(zip(request.outputs, self._out_ops)):
            if position == error.position:
                shapes.append(OutputShape(error.shape, False))
            else:
                shapes.append(OutputShape(merge_dimensions(operand.dimensions, arg.dimensions) or (), True))
        return tuple(shapes)

    def _fail(self, status: ErrorStatus, message: str) -> ExecutionResult:
        self.last_error = message
        vlog.log("driver", "CpuDevice", "execution failed (%s): %s", status.name, message)
        return ExecutionResult(status)


def write_outputs(binding: _Binding, results: list) -> tuple[ErrorStatus, tuple]:
    """Copy ``results`` into the output regions; ``binding.ok_shapes`` itself when every result
    has the shape of its preallocated view (also for drivers that bind requests as this one)."""
    outputs = binding.outputs
    if binding.ok_shapes is not None and len(results) == len(outputs):
        for out, value in zip(outputs, results):
            view = out.view
            if type(value) is not np.ndarray or view.shape != value.shape:
                break
            np.copyto(view, value, casting="unsafe")
        else:
            return _NONE, binding.ok_shapes
    status = ErrorStatus.NONE
    shapes = []
    for out, value in zip(outputs, results):
        if type(value) is not np.ndarray:
            value = np.asarray(value, out.dtype)
        view = out.view
        if view is not None and view.shape == value.shape:
            np.copyto(view, value, casting="unsafe")
            shapes.append(OutputShape(view.shape, True))
            continue
        value = np.asarray(value, out.dtype)
        if value.nbytes > out.length:
            status = ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
            shapes.append(OutputShape(value.shape, False))
            continue
        target = np.frombuffer(out.buffer, out.dtype, value.size, out.offset).reshape(value.shape)
        np.copyto(target, value)
        shapes.append(OutputShape(value.shape, True))
    return status, tuple(shapes)


def _supported(model: HalModel, graph, operation) -> bool:
    from nnscope.runtime.ops import registry  # noqa: PLC0415 - kernels load on first use
    record = registry.get(operation.type)
    if record is None:
        return False
    try:
        record.validate([graph.operands[i] for i in operation.inputs],
                        [graph.operands[i] for i in operation.outputs])
        if operation.type in control_flow.TYPES:
            control_flow.check_signature(operation, graph, model)
            return all(_supported(model, sub, inner) for sub, inner
                       in control_flow.referenced_operations(model, operation, graph))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError):
        return False
    return True


class CpuDevice(Device):
    """The reference CPU device: every registered operation, performance 1.0 for every type."""

    name = NAME
    type = DeviceType.CPU
    version = "1.3"
    feature_level = 30

    def capabilities(self) -> Capabilities:
        """Performance 1.0 (the reference) for every operand type and control flow."""
        info = PerformanceInfo(1.0, 1.0)
        return Capabilities(info, info, tuple((t, info) for t in OperandType), info, info)

    def supported_operations(self, model: HalModel) -> list[bool]:
        """Operations with a registry record whose signature check passes (for IF/WHILE, also
        every operation of the subgraphs they reference)."""
        return [_supported(model, model.main, op) for op in model.main.operations]

    def prepare_model(self, model: HalModel, preference: Preference = Preference.FAST_SINGLE_ANSWER,
                      priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
                      cache_dir: str | None = None, token: bytes | None = None) -> CpuPreparedModel:
        """Build the CpuExecutor of ``model`` (validates every operation).

        Raises:
            HalError: INVALID_ARGUMENT for an operation the executor rejects,
                MISSED_DEADLINE_TRANSIENT when ``deadline_ns`` has passed.
        """
        from nnscope.runtime.ops.executor import CpuExecutor  # noqa: PLC0415
        with tracing.runtime(Phase.COMPILATION, "CpuDevice::prepareModel"):
            if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
                raise HalError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed before prepare")
            try:
                executor = CpuExecutor(model)
            except (ValueError, TypeError, IndexError, KeyError) as error:
                raise HalError(ErrorStatus.INVALID_ARGUMENT, str(error)) from None
            return CpuPreparedModel(model, executor)
