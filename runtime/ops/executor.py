"""CpuExecutor: runs a HalModel's main subgraph with the registered numpy kernels.

Everything that does not depend on the request is done once in the constructor: constants are
read from ``operand_values``/pools into arrays (scalars into Python numbers), every operation is
validated through the registry, and the call table is built (``runtime.ops.calls``).
:meth:`CpuExecutor.run` then runs one loop over the calls, with NNTRACE spans and ``cpuexe``
vlog when asked (``recorder``: :func:`tracing.tracer.hot_recorder`, tags formatted once, at
import) and a null recorder otherwise. :meth:`CpuExecutor.bind` repeats a run on fixed arrays
(a burst's frames) through the same loop; a model of one operation is one kernel call there
(the one measured fast path, see :meth:`CpuExecutor._one_call_run`).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import *
    >>> t = Operand(OperandType.TENSOR_FLOAT32, (1, 2), lifetime=OperandLifetime.SUBGRAPH_INPUT)
    >>> act = Operand(OperandType.INT32, lifetime=OperandLifetime.CONSTANT_COPY,
    ...               location=DataLocation(-1, 0, 4))
    >>> out = Operand(OperandType.TENSOR_FLOAT32, (0, 0), lifetime=OperandLifetime.SUBGRAPH_OUTPUT)
    >>> graph = Subgraph((t, t, act, out), (Operation(OperationType.ADD, (0, 1, 2), (3,)),),
    ...                  (0, 1), (3,))
    >>> model = HalModel(graph, operand_values=np.int32(0).tobytes())
    >>> CpuExecutor(model).run([np.float32([[1, 2]]), np.float32([[3, 4]])])[0].tolist()
    [[4.0, 6.0]]
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from nnscope import vlog
from nnscope.runtime.hal.types import HalModel, OperandLifetime as L, is_scalar, numpy_dtype
from nnscope.runtime.ops import control_flow, preempt, registry
from nnscope.runtime.ops.budget import BudgetExceeded, OutputTooSmall, charge, configured_budget, element_count
from nnscope.runtime.ops.calls import OperationCall, kernel_name, operation_calls, read_constant
from nnscope.runtime.ops.static_plans import plans_follow_input_shapes
from nnscope.runtime.ops.registry import OpContext, OpValidationError
from nnscope.tracing import Layer, Phase
from nnscope.tracing.naming import SWITCH, format_name
from nnscope.tracing.tracer import hot_recorder

__all__ = ["CpuExecutor", "OperationCall", "kernel_name", "read_constant"]

_RUN_TAG = format_name(Layer.CPU, Phase.EXECUTION)
_TRANSFORM_TAG = format_name(Layer.CPU, Phase.TRANSFORMATION)
_COMPUTE_TAG = format_name(Layer.CPU, Phase.COMPUTATION, marker=SWITCH)
_new_context = tuple.__new__  # OpContext(...) without the NamedTuple's Python-level __new__
_IGNORE = {}.get  # a C-level callable taking one argument: records nothing
#: The null recorder of an unobserved run: the same calls as a recorder, recording nothing.
NULL_RECORDER = (_IGNORE, _IGNORE, int)
_CONSTANT = frozenset({L.CONSTANT_COPY, L.CONSTANT_REFERENCE})
_SUBGRAPH = L.SUBGRAPH  # a module global: Enum member access is slow on Python 3.11
_ndarray = np.ndarray


def _traced_one_call(call, ctx, recorder) -> list:
    """``call.execute(ctx)`` as a traced :meth:`CpuExecutor.run` of one call records it."""
    append, extend, now = recorder
    extend((_RUN_TAG, "CpuExecutor::run", now()))
    try:
        return _traced_execute(call, ctx, append, extend, now)
    finally:
        append(now())


def _traced_execute(call, ctx, append, extend, now) -> list:
    """``call.execute(ctx)`` inside its TRANSFORMATION scope and ``[SW]`` COMPUTATION switch."""
    detail = call.span_detail
    begun = now()  # inputs are bound in place: the TRANSFORMATION scope switches at once
    extend((_TRANSFORM_TAG, detail, begun, begun, _COMPUTE_TAG, detail, begun))
    try:
        return call.execute(ctx)
    finally:
        append(now())


class CpuExecutor:
    """Executes ``model.main`` on the CPU; construct once, run many times.

    ``budget_bytes`` bounds what one operation may allocate (``runtime.ops.budget``; default: the
    configured budget): operations with an ``infer_shapes`` are checked before their kernel runs.
    """

    #: Test hook: called as ``hook(step_index, values)`` after each step (frees applied).
    forTest_step_hook = None

    def __init__(self, model: HalModel, budget_bytes: int | None = None,
                 subgraph: int | None = None, _family: dict | None = None,
                 _trusted_frees: list | None = None) -> None:
        registry.load_all()
        graph = model.main if subgraph is None else model.referenced[subgraph]
        self.model = model
        self.budget_bytes = configured_budget() if budget_bytes is None else budget_bytes
        # executors of the referenced subgraphs (IF/WHILE), shared by the whole tree
        self._family = {} if _family is None else _family
        self.has_control_flow = any(op.type in control_flow.TYPES for op in graph.operations)
        self._operands = graph.operands
        self._template = self._constants(model, graph)
        self._inputs = graph.input_indexes
        self._input_dtypes = tuple(numpy_dtype(graph.operands[i].type) for i in graph.input_indexes)
        self._outputs = graph.output_indexes
        self._declared = tuple(graph.operands[i].dimensions for i in graph.output_indexes)
        self.calls = tuple(operation_calls(graph, model, self._run_subgraph, _trusted_frees))
        # plans that follow from the input shapes alone are checked once per input signature
        self._static_plans = plans_follow_input_shapes(graph)
        self._checked_key = None  # the input signature whose plans all passed
        if subgraph is None and model.referenced:
            self._build_family(model)

    # ------------------------------------------------------------------ construction
    def _build_family(self, model: HalModel) -> None:
        """An executor per referenced subgraph (validated now, run by IF/WHILE steps)."""
        control_flow.check_acyclic(model)
        for index in range(len(model.referenced)):
            try:
                self._family[index] = CpuExecutor(model, self.budget_bytes, index, self._family)
            except OpValidationError as error:
                raise OpValidationError(f"referenced subgraph {index}: {error}") from error

    def _constants(self, model: HalModel, graph) -> list:
        values: list = [None] * len(graph.operands)
        for index, operand in enumerate(graph.operands):
            if operand.lifetime in _CONSTANT:
                values[index] = read_constant(model, operand)
            elif operand.lifetime == _SUBGRAPH and operand.location is not None:
                values[index] = model.referenced[operand.location.offset]
        return values

    @classmethod
    def restored(cls, model: HalModel, frees: list, budget_bytes: int | None = None) -> CpuExecutor:
        """An executor of ``model`` (no control flow) from plan records this class made for the
        same model earlier (``frees``: per step, the operands freed after it), without
        validating every operation again (a driver's compilation cache)."""
        return cls(model, budget_bytes, _trusted_frees=frees)

    # ------------------------------------------------------------------ execution
    def _bind_inputs(self, inputs: Sequence[np.ndarray | None]) -> list:
        if len(inputs) != len(self._inputs):
            raise ValueError(f"expected {len(self._inputs)} inputs, got {len(inputs)}")
        values = self._template.copy()
        for operand_index, dtype, value in zip(self._inputs, self._input_dtypes, inputs):
            if value is not None:
                if type(value) is not np.ndarray or (value.dtype is not dtype and value.dtype != dtype):
                    value = np.asarray(value, dtype)
                if value.ndim == 0 and is_scalar(self._operands[operand_index].type):
                    value = value.item()
            values[operand_index] = value
        return values

    def _collect(self, values: list) -> list[np.ndarray]:
        results = []
        for position, (operand_index, declared) in enumerate(zip(self._outputs, self._declared)):
            value = values[operand_index]
            if value is None:
                raise RuntimeError(f"output {position} (operand {operand_index}) was not computed")
            if type(value) is not np.ndarray:
                value = np.asarray(value)
            if value.shape != declared and declared:
                _check_shape(position, declared, value.shape)
            results.append(value)
        return results

    def check(self, call: OperationCall, plan, capacities: Sequence[int | None] | None) -> None:
        """Before ``call`` runs, given its ``infer_shapes`` plan: its model outputs fit their
        buffers (``capacities``: bytes per model output, None where unknown) and its outputs
        and scratch fit the budget.

        Raises:
            OutputTooSmall: a model output needs more bytes than its buffer has.
            BudgetExceeded: the operation would need more than ``budget_bytes``.
        """
        if capacities is not None:
            for slot, position, itemsize in call.model_outputs:
                capacity = capacities[position]
                if capacity is not None and slot < len(plan.shapes):
                    needed = element_count(plan.shapes[slot]) * itemsize
                    if needed > capacity:
                        raise OutputTooSmall(position, plan.shapes[slot], needed, capacity)
        needed = charge(plan, [operand.type for operand in call.output_operands])
        if needed > self.budget_bytes:
            raise BudgetExceeded(needed, self.budget_bytes)

    def run(self, inputs: Sequence[np.ndarray | None],
            capacities: Sequence[int | None] | None = None,
            loop_timeout_ns: int | None = None, deadline_ns: int | None = None,
            recorder: tuple | None = None, logging: bool = False) -> list[np.ndarray]:
        """Compute the outputs (in ``main.output_indexes`` order) for ``inputs``; ``capacities``
        are the bytes of each output's buffer (see :meth:`check`); ``loop_timeout_ns`` bounds
        each WHILE loop (None: the 2 s default); past ``deadline_ns`` (monotonic) the run stops
        at the next operation boundary. With a ``recorder`` (this thread's
        :func:`tracing.tracer.hot_recorder`), inside ``[NN_LC_PE]CpuExecutor::run`` with a
        TRANSFORMATION scope and a ``[SW]`` COMPUTATION switch per operation (those of IF/WHILE
        subgraphs included, nested in the IF/WHILE's); with ``logging``, each operation and its
        output shapes under vlog ``cpuexe``.

        Raises:
            control_flow.LoopTimeout: a WHILE loop ran past the loop timeout.
            control_flow.DeadlinePassed: the deadline passed between two operations.
        """
        recorder = recorder or NULL_RECORDER
        append, extend, now = recorder
        if recorder is not NULL_RECORDER:
            extend((_RUN_TAG, "CpuExecutor::run", now()))
        try:
            values = self._bind_inputs(inputs)
            if self.has_control_flow:
                state = control_flow.RunState(_loop_timeout(loop_timeout_ns), recorder, logging)
                with control_flow.running(state):
                    self._run_calls(values, capacities, False, deadline_ns, recorder, logging)
            else:
                key = self._signature(values, capacities)
                self._run_calls(values, capacities, key is not None and key == self._checked_key,
                                deadline_ns, recorder, logging)
                self._checked_key = key
            return self._collect(values)
        finally:
            if recorder is not NULL_RECORDER:
                append(now())

    def _signature(self, values: list, capacities: Sequence[int | None] | None) -> tuple | None:
        """What every call's plan and check depend on (input shapes and scalars, output
        capacities), or None when a plan may depend on computed values."""
        if not self._static_plans:
            return None
        inputs = tuple(v.shape if type(v) is np.ndarray else v for v in map(values.__getitem__, self._inputs))
        return inputs, None if capacities is None else tuple(capacities)

    def _run_subgraph(self, index: int, inputs: list) -> list:
        """Run referenced subgraph ``index`` (an IF branch, a WHILE condition or body) on
        ``inputs`` within the current run: observed when the run is."""
        executor = self._family[index]
        values = executor._bind_inputs(inputs)
        state = control_flow.current()
        executor._run_calls(values, None, False, None, state.recorder or NULL_RECORDER, state.logging)
        return executor._collect(values)

    def _run_calls(self, values: list, capacities: Sequence[int | None] | None, checked: bool,
                   deadline_ns: int | None, recorder: tuple, logging: bool) -> None:
        """The one loop: every call on ``values``; ``checked``: the plans of these inputs passed
        before; ``recorder``: a hot recorder or :data:`NULL_RECORDER`."""
        append, extend, now = recorder
        traced = recorder is not NULL_RECORDER  # untraced, the span calls are skipped, not made to nothing
        hook, yielding = self.forTest_step_hook, preempt.current()
        call = None
        try:
            for call in self.calls:
                if deadline_ns is not None or yielding is not None:
                    control_flow.checkpoint(deadline_ns, yielding, call.index)
                args = [values[i] for i in call.inputs]
                if logging:
                    _log_call(call, args)
                ctx = _new_context(OpContext, (call.operation, args, call.input_operands,
                                                call.output_operands))
                if call.infer_shapes is not None and not checked:
                    plan = call.infer_shapes(ctx)
                    if plan is not None:
                        self.check(call, plan, capacities)
                if traced:
                    results = _traced_execute(call, ctx, append, extend, now)
                else:
                    results = call.execute(ctx)
                for operand_index, value in zip(call.outputs, results):
                    values[operand_index] = value
                if logging:
                    vlog.log("cpuexe", "CpuExecutor", "operation %d (%s) output shapes %s",
                             call.index, call.operation.type.name, [_shape(r) for r in results])
                for operand_index in call.frees:
                    values[operand_index] = None
                if hook is not None:
                    hook(call.index, values)
        except Exception as error:
            _reraise(call, error)

    def bind(self, inputs: Sequence[np.ndarray | None], capacities: Sequence[int],
             out_views: Sequence[np.ndarray]) -> Callable[[], bool] | None:
        """A repeatable run on fixed arrays (a burst's frames: the same input views on the same
        mapped pools, the same output views), after a :meth:`run` on them passed: a callable
        that runs the one loop on those views, untimed, and copies each result into its output
        view; traced (this thread's :func:`tracing.tracer.hot_recorder`), it records the spans
        :meth:`run` records. It skips what :meth:`run` derives again on every call (binding
        and converting the inputs, the plan signature, collecting the outputs), and returns
        False, writing nothing, when that is not valid any more (the plans were checked for
        another input signature since, a test step hook is set, a kernel raised, a result
        does not have its view's shape): the caller then runs the ordinary path, which
        reports. None when the plans may depend on computed values, with control flow, or when
        an input would be converted (a copy, or a scalar read out of its pool)."""
        if self.has_control_flow or len(out_views) != len(self._outputs):
            return None
        template = self._bind_inputs(inputs)
        if any(template[index] is not value for index, value in zip(self._inputs, inputs)):
            return None
        key = self._signature(template, capacities)
        if key is None:
            return None
        outputs = tuple(zip(self._outputs, out_views))
        if len(self.calls) == 1 and self.calls[0].outputs == self._outputs:
            return self._one_call_run(key, template, out_views)

        def run() -> bool:
            checked = self._checked_key
            if (checked is not key and checked != key) or self.forTest_step_hook is not None:
                return False
            values = template.copy()
            recorder = hot_recorder() or NULL_RECORDER
            if recorder is not NULL_RECORDER:
                recorder[1]((_RUN_TAG, "CpuExecutor::run", recorder[2]()))
            try:
                self._run_calls(values, capacities, True, None, recorder, False)
            except Exception:  # noqa: BLE001 - the ordinary path runs again and reports it
                return False
            finally:
                if recorder is not NULL_RECORDER:
                    recorder[0](recorder[2]())
            return _write(values, outputs)

        return run

    def _one_call_run(self, key, template: list, out_views: Sequence[np.ndarray]) -> Callable[[], bool]:
        """Measured fast path of :meth:`bind` for a model of one operation computing exactly the
        model's outputs (a burst's typical per-frame kernel): its context is built once and its
        results go straight to the views, without the loop. It pays on
        ``benchmarks/runtime_latency.py``'s tiny ADD ``burst_us`` (sample-all): 21.8 us with it,
        24.5 us through the loop, -11 % (``burst_vs_fmq`` 1.27 vs 1.41; medians of 3 interleaved
        runs on the 2-CPU machine, 2026-11-26)."""
        call = self.calls[0]
        ctx = _new_context(OpContext, (call.operation, [template[i] for i in call.inputs],
                                        call.input_operands, call.output_operands))
        execute, views = call.execute, tuple(out_views)

        def run() -> bool:
            checked = self._checked_key
            if (checked is not key and checked != key) or self.forTest_step_hook is not None:
                return False
            recorder = hot_recorder()
            try:
                results = execute(ctx) if recorder is None else _traced_one_call(call, ctx, recorder)
            except Exception:  # noqa: BLE001 - the ordinary path runs again and reports it
                return False
            if len(results) != len(views):
                return False
            for value, view in zip(results, views):
                if type(value) is not _ndarray or value.shape != view.shape:
                    return False
            for value, view in zip(results, views):
                view[...] = value
            return True

        return run


def _write(values: list, outputs: tuple) -> bool:
    """Copy each computed output into its view; False (nothing written) unless all fit."""
    for index, view in outputs:
        value = values[index]
        if type(value) is not _ndarray or value.shape != view.shape:
            return False
    for index, view in outputs:
        view[...] = values[index]  # as np.copyto(casting="unsafe"): same shape, any dtype
    return True


def _loop_timeout(loop_timeout_ns: int | None) -> int:
    return control_flow.LOOP_TIMEOUT_DEFAULT_NS if loop_timeout_ns is None else loop_timeout_ns


def _reraise(call: OperationCall | None, error: Exception):
    """Name the failing operation: OpValidationError gets a prefix, anything else a note."""
    if call is None:
        raise error
    where = f"operation {call.index} ({call.operation.type.name})"
    try:
        if isinstance(error, OpValidationError):
            raise OpValidationError(f"{where}: {error}") from error
        error.add_note(f"while executing {where} with kernel {call.kernel_name}")
        raise error
    finally:  # this frame is on the traceback: holding ``error`` would make a reference cycle
        del error  # that keeps the run's tensors (views of the request's pools) until a GC pass


def _shape(value) -> list[int] | str:
    return list(value.shape) if isinstance(value, np.ndarray) else "scalar" if value is not None else "omitted"


def _log_call(call: OperationCall, args: list) -> None:
    vlog.log("cpuexe", "CpuExecutor", "operation %d (%s) %s inputs %s", call.index,
             call.operation.type.name, call.kernel_name, [_shape(a) for a in args])


def _check_shape(position: int, declared: tuple[int, ...], actual: tuple[int, ...]) -> None:
    mismatch = len(declared) != len(actual) or any(
        d not in (0, a) for d, a in zip(declared, actual))
    if mismatch:
        raise RuntimeError(f"output {position}: computed shape {list(actual)} contradicts "
                           f"declared dimensions {list(declared)}")
