"""CpuExecutor: runs a HalModel's main subgraph with the registered numpy kernels.

Everything that does not depend on the request is done once in the constructor: constants are
read from ``operand_values``/pools into arrays (scalars into Python numbers), every operation is
validated through the registry, and a plan of steps is built (kernel, operand indexes, operand
records, temporaries to free after the step). :meth:`CpuExecutor.run` is then a tight loop;
:meth:`CpuExecutor.run_observed` is the same loop with NNTRACE spans and ``cpuexe`` vlog,
recorded through :func:`tracing.tracer.hot_recorder` with tags formatted once, at import.

Example:
    >>> import numpy as np
    >>> from runtime.hal.types import *
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

from typing import Any, NamedTuple, Sequence

import numpy as np

import vlog
from runtime.hal.types import (HalModel, Operand, OperandLifetime as L, OperandType, Operation,
                               OperationType, is_scalar, numpy_dtype)
from runtime.ops import control_flow, preempt, registry
from runtime.ops.budget import BudgetExceeded, OutputTooSmall, charge, configured_budget, element_count
from runtime.ops.static_plans import plans_follow_input_shapes
from runtime.ops.registry import OpContext, OpValidationError
from tracing import Layer, Phase
from tracing.naming import SWITCH, format_name

_SUFFIX = {
    OperandType.TENSOR_FLOAT32: "Float32", OperandType.TENSOR_FLOAT16: "Float16",
    OperandType.TENSOR_QUANT8_ASYMM: "Quant8", OperandType.TENSOR_QUANT8_ASYMM_SIGNED: "Quant8Signed",
    OperandType.TENSOR_INT32: "Int32", OperandType.TENSOR_QUANT8_SYMM: "Quant8Symm",
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: "Quant8PerChannel",
    OperandType.TENSOR_QUANT16_SYMM: "Quant16Symm", OperandType.TENSOR_QUANT16_ASYMM: "Quant16",
    OperandType.TENSOR_BOOL8: "Bool8",
}

_RUN_TAG = format_name(Layer.CPU, Phase.EXECUTION)
_TRANSFORM_TAG = format_name(Layer.CPU, Phase.TRANSFORMATION)
_COMPUTE_TAG = format_name(Layer.CPU, Phase.COMPUTATION, marker=SWITCH)
_new_context = tuple.__new__  # OpContext(...) without the NamedTuple's Python-level __new__
_IGNORE = {}.get  # a C-level callable taking one argument: records nothing
_NO_RECORDER = (_IGNORE, _IGNORE, int)
_CONSTANT = frozenset({L.CONSTANT_COPY, L.CONSTANT_REFERENCE})
_SUBGRAPH = L.SUBGRAPH  # a module global: Enum member access is slow on Python 3.11
_KERNEL_NAMES: dict = {}  # (operation type, first input type) -> kernel name


class _Step(NamedTuple):
    index: int
    operation: Operation
    execute: Any
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    input_operands: tuple[Operand, ...]
    output_operands: tuple[Operand, ...]
    frees: tuple[int, ...]
    kernel_name: str
    infer_shapes: Any  # the record's shape inference (None: outputs no larger than inputs)
    model_outputs: tuple[tuple[int, int, int], ...]  # (output slot, model output position, itemsize)


def kernel_name(operation: Operation, operands: Sequence[Operand]) -> str:
    """AOSP-style kernel name, e.g. ``addFloat32`` or ``softmaxQuant8Signed``."""
    key = (operation.type, operands[operation.inputs[0]].type if operation.inputs else None)
    if key not in _KERNEL_NAMES:
        first, *rest = operation.type.name.lower().split("_")
        _KERNEL_NAMES[key] = first + "".join(w.capitalize() for w in rest) + _SUFFIX.get(key[1], "")
    return _KERNEL_NAMES[key]


def read_constant(model: HalModel, operand: Operand):
    """A constant operand's value: ndarray for tensors, Python scalar for scalar types."""
    loc = operand.location
    if loc is None:
        raise OpValidationError(f"constant operand of type {operand.type.name} has no location")
    buffer = model.operand_values if loc.pool_index < 0 else _pool_buffer(model, loc.pool_index)
    dtype = numpy_dtype(operand.type)
    count = loc.length // dtype.itemsize
    array = np.frombuffer(buffer, dtype=dtype, count=count, offset=loc.offset)
    if is_scalar(operand.type):
        return array[0].item()
    return array.reshape(operand.dimensions) if operand.dimensions else array


def _pool_buffer(model: HalModel, index: int):
    if index >= len(model.pools):
        raise OpValidationError(f"constant refers to pool {index}, model has {len(model.pools)}")
    pool = model.pools[index]
    return pool.buffer() if callable(getattr(pool, "buffer", None)) else pool


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
        self.steps = tuple(self._plan(graph, _trusted_frees))
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

    def _plan(self, graph, trusted_frees: list | None = None) -> list[_Step]:
        """The steps; with ``trusted_frees`` (see :meth:`restored`) nothing is validated."""
        output_positions = {operand: position for position, operand in enumerate(graph.output_indexes)}
        frees = dict(enumerate(trusted_frees)) if trusted_frees is not None else self._frees(graph)
        steps = []
        for index, operation in enumerate(graph.operations):
            record = registry.get(operation.type)
            name = operation.type.name
            if record is None:
                raise OpValidationError(f"operation {index} ({name}): not supported by the CPU executor")
            ins = tuple(map(graph.operands.__getitem__, operation.inputs))
            outs = tuple(map(graph.operands.__getitem__, operation.outputs))
            execute = record.execute
            try:
                if trusted_frees is None:
                    record.validate(ins, outs)
                if operation.type in control_flow.TYPES:
                    control_flow.check_signature(operation, graph, self.model)
                    execute = control_flow.kernel(operation, graph, self.model, self._run_subgraph)
            except OpValidationError as error:
                raise OpValidationError(f"operation {index} ({name}): {error}") from error
            model_outputs = tuple((slot, output_positions[i], numpy_dtype(graph.operands[i].type).itemsize)
                                  for slot, i in enumerate(operation.outputs) if i in output_positions)
            steps.append(_Step(index, operation, execute, operation.inputs, operation.outputs,
                               ins, outs, tuple(frees.get(index, ())),
                               kernel_name(operation, graph.operands),
                               record.infer_shapes, model_outputs))
        return steps

    @classmethod
    def _frees(cls, graph) -> dict[int, list[int]]:
        """Step index -> the temporaries to free after it (their last use)."""
        frees: dict[int, list[int]] = {}
        for operand_index, step_index in cls._last_uses(graph).items():
            frees.setdefault(step_index, []).append(operand_index)
        return frees

    @staticmethod
    def _last_uses(graph) -> dict[int, int]:
        """Temporary operand -> index of the last step that reads (or, if unread, writes) it."""
        last: dict[int, int] = {}
        for index, operation in enumerate(graph.operations):
            for operand_index in (*operation.outputs, *operation.inputs):
                if graph.operands[operand_index].lifetime == L.TEMPORARY_VARIABLE:
                    last[operand_index] = index
        return last

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

    def check(self, step: _Step, plan, capacities: Sequence[int | None] | None) -> None:
        """Before ``step`` runs, given its ``infer_shapes`` plan: its model outputs fit their buffers
        (``capacities``: bytes per model output, None where unknown) and its outputs and scratch
        fit the budget.

        Raises:
            OutputTooSmall: a model output needs more bytes than its buffer has.
            BudgetExceeded: the operation would need more than ``budget_bytes``.
        """
        if capacities is not None:
            for slot, position, itemsize in step.model_outputs:
                capacity = capacities[position]
                if capacity is not None and slot < len(plan.shapes):
                    needed = element_count(plan.shapes[slot]) * itemsize
                    if needed > capacity:
                        raise OutputTooSmall(position, plan.shapes[slot], needed, capacity)
        needed = charge(plan, [operand.type for operand in step.output_operands])
        if needed > self.budget_bytes:
            raise BudgetExceeded(needed, self.budget_bytes)

    def run(self, inputs: Sequence[np.ndarray | None],
            capacities: Sequence[int | None] | None = None,
            loop_timeout_ns: int | None = None, deadline_ns: int | None = None) -> list[np.ndarray]:
        """Compute the outputs (in ``main.output_indexes`` order) for ``inputs``; ``capacities``
        are the bytes of each output's buffer (see :meth:`check`); ``loop_timeout_ns`` bounds
        each WHILE loop (None: the 2 s default); past ``deadline_ns`` (monotonic) the run stops
        at the next operation boundary.

        Raises:
            control_flow.LoopTimeout: a WHILE loop ran past the loop timeout.
            control_flow.DeadlinePassed: the deadline passed between two operations.
        """
        values = self._bind_inputs(inputs)
        if self.has_control_flow:
            with control_flow.running(control_flow.RunState(_loop_timeout(loop_timeout_ns))):
                self._run_steps(values, capacities, False, deadline_ns)
        else:
            key = self._signature(values, capacities)
            self._run_steps(values, capacities, key is not None and key == self._checked_key, deadline_ns)
            self._checked_key = key
        return self._collect(values)

    def _signature(self, values: list, capacities: Sequence[int | None] | None) -> tuple | None:
        """What every step's plan and check depend on (input shapes and scalars, output
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
        if state.recorder is None and not state.logging:
            executor._run_steps(values, None)
        else:
            executor._run_steps_observed(values, state.recorder or _NO_RECORDER, state.logging, None)
        return executor._collect(values)

    def _run_steps(self, values: list, capacities: Sequence[int | None] | None,
                   checked: bool = False, deadline_ns: int | None = None) -> None:
        """Run every step on ``values``; ``checked``: the plans of these inputs passed before."""
        hook, yielding = self.forTest_step_hook, preempt.current()
        step = None
        try:
            for step in self.steps:
                if deadline_ns is not None or yielding is not None:
                    control_flow.checkpoint(deadline_ns, yielding, step.index)
                ctx = _new_context(OpContext, (step.operation, [values[i] for i in step.inputs],
                                                step.input_operands, step.output_operands))
                if step.infer_shapes is not None and not checked:
                    plan = step.infer_shapes(ctx)
                    if plan is not None:
                        self.check(step, plan, capacities)
                for operand_index, value in zip(step.outputs, step.execute(ctx)):
                    values[operand_index] = value
                for operand_index in step.frees:
                    values[operand_index] = None
                if hook is not None:
                    hook(step.index, values)
        except Exception as error:
            _reraise(step, error)

    def run_observed(self, inputs: Sequence[np.ndarray | None], recorder: tuple | None,
                     logging: bool, capacities: Sequence[int | None] | None = None,
                     loop_timeout_ns: int | None = None, deadline_ns: int | None = None) -> list[np.ndarray]:
        """:meth:`run` with observation: with a ``recorder`` (this thread's
        :func:`tracing.tracer.hot_recorder`), inside ``[NN_LC_PE]CpuExecutor::run`` with a
        TRANSFORMATION scope and a ``[SW]`` COMPUTATION switch per operation (those of IF/WHILE
        subgraphs included, nested in the IF/WHILE's); with ``logging``, each operation and its
        output shapes under vlog ``cpuexe``."""
        recorder = recorder or _NO_RECORDER
        append, extend, now = recorder
        extend((_RUN_TAG, "CpuExecutor::run", now()))
        try:
            values = self._bind_inputs(inputs)
            if self.has_control_flow:
                state = control_flow.RunState(_loop_timeout(loop_timeout_ns), recorder, logging)
                with control_flow.running(state):
                    self._run_steps_observed(values, recorder, logging, capacities, False, deadline_ns)
            else:
                key = self._signature(values, capacities)
                self._run_steps_observed(values, recorder, logging, capacities,
                                         key is not None and key == self._checked_key, deadline_ns)
                self._checked_key = key
            return self._collect(values)
        finally:
            append(now())

    def _run_steps_observed(self, values: list, recorder: tuple, logging: bool,
                            capacities: Sequence[int | None] | None, checked: bool = False,
                            deadline_ns: int | None = None) -> None:
        append, extend, now = recorder
        yielding = preempt.current()
        for step in self.steps:
            if deadline_ns is not None or yielding is not None:
                control_flow.checkpoint(deadline_ns, yielding, step.index)
            args = [values[i] for i in step.inputs]
            if logging:
                _log_step(step, args)
            ctx = _new_context(OpContext, (step.operation, args, step.input_operands,
                                            step.output_operands))
            if step.infer_shapes is not None and not checked:
                try:
                    plan = step.infer_shapes(ctx)
                    if plan is not None:
                        self.check(step, plan, capacities)
                except Exception as error:
                    _reraise(step, error)
            name = step.kernel_name
            begun = now()  # inputs are bound in place: the TRANSFORMATION scope switches at once
            extend((_TRANSFORM_TAG, name, begun, begun, _COMPUTE_TAG, name, begun))
            try:
                results = step.execute(ctx)
            except Exception as error:
                _reraise(step, error)
            finally:
                append(now())
            for operand_index, value in zip(step.outputs, results):
                values[operand_index] = value
            if logging:
                vlog.log("cpuexe", "CpuExecutor", "operation %d (%s) output shapes %s",
                         step.index, step.operation.type.name, [_shape(r) for r in results])
            for operand_index in step.frees:
                values[operand_index] = None


def _loop_timeout(loop_timeout_ns: int | None) -> int:
    return control_flow.LOOP_TIMEOUT_DEFAULT_NS if loop_timeout_ns is None else loop_timeout_ns


def _reraise(step: _Step | None, error: Exception):
    """Name the failing operation: OpValidationError gets a prefix, anything else a note."""
    if step is None:
        raise error
    where = f"operation {step.index} ({step.operation.type.name})"
    try:
        if isinstance(error, OpValidationError):
            raise OpValidationError(f"{where}: {error}") from error
        error.add_note(f"while executing {where} with kernel {step.kernel_name}")
        raise error
    finally:  # this frame is on the traceback: holding ``error`` would make a reference cycle
        del error  # that keeps the run's tensors (views of the request's pools) until a GC pass


def _shape(value) -> list[int] | str:
    return list(value.shape) if isinstance(value, np.ndarray) else "scalar" if value is not None else "omitted"


def _log_step(step: _Step, args: list) -> None:
    vlog.log("cpuexe", "CpuExecutor", "operation %d (%s) %s inputs %s", step.index,
             step.operation.type.name, step.kernel_name, [_shape(a) for a in args])


def _check_shape(position: int, declared: tuple[int, ...], actual: tuple[int, ...]) -> None:
    mismatch = len(declared) != len(actual) or any(
        d not in (0, a) for d, a in zip(declared, actual))
    if mismatch:
        raise RuntimeError(f"output {position}: computed shape {list(actual)} contradicts "
                           f"declared dimensions {list(declared)}")
