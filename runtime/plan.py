"""The ExecutionPlan: a compiled model as steps, each a sub-model prepared on one device.

:func:`partition` assigns every operation to the best device that supports it (by the
device's capabilities for the preference; the CPU device is the fallback) and cuts the run
order into steps of consecutive operations on one device. :func:`build_plan` extracts each
step's sub-model and prepares it. A plan with one step covering the whole model is *simple*:
the execution's request goes to the device untouched. A compound plan routes model inputs and
outputs to the steps and allocates the tensors that cross steps.

Example:
    >>> plan = build_plan(model.to_hal(), [cpu_device], Preference.FAST_SINGLE_ANSWER)  # doctest: +SKIP
    >>> [(s.device.name, s.operations) for s in plan.steps]                            # doctest: +SKIP
    [('nnapi-reference', (0, 1, 2))]
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import tracing
import vlog
from runtime.api import NnError, ResultCode, from_hal_error
from runtime.drivers.base import Device, PreparedModel
from runtime.hal.errors import HalError
from runtime.hal.types import HalModel, OperandLifetime as L, Preference, Priority, Subgraph
from tracing import Phase

MODEL_INPUT, MODEL_OUTPUT, TEMPORARY = "input", "output", "temporary"


@dataclass(frozen=True)
class Source:
    """Where a step argument lives: a model input/output (by position) or a cross-step temporary."""

    kind: str
    position: int  # model input/output position, or the main operand index for temporaries


@dataclass
class ExecutionStep:
    """One step: operations of the main model run as a sub-model on one device.

    Attributes:
        index: Position in the plan.
        device: Where the step runs.
        operations: Indexes of the main model's operations in this step (run order).
        model: The step's sub-model (the main model itself for a simple plan).
        inputs: Main-model operand index of each step input, in step order.
        outputs: Main-model operand index of each step output, in step order.
        input_sources, output_sources: Where each step argument comes from / goes to.
        prepared: The device's prepared model (set by :func:`build_plan`).
    """

    index: int
    device: Device
    operations: tuple[int, ...]
    model: HalModel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    input_sources: tuple[Source, ...] = ()
    output_sources: tuple[Source, ...] = ()
    prepared: PreparedModel | None = None


@dataclass
class ExecutionPlan:
    """The compiled form of a model. ``crossing`` = operands passed between steps."""

    model: HalModel
    steps: tuple[ExecutionStep, ...]
    crossing: frozenset[int] = frozenset()

    @property
    def simple(self) -> bool:
        """One step running the whole model: requests pass straight to its device."""
        return len(self.steps) == 1 and self.steps[0].model is self.model

    def devices(self) -> tuple[Device, ...]:
        return tuple(step.device for step in self.steps)

    def release(self) -> None:
        for step in self.steps:
            if step.prepared is not None:
                step.prepared.release()


def _preferred(capability_of, preference: Preference):
    if preference == Preference.LOW_POWER:
        return lambda device: capability_of(device).power_usage
    return lambda device: capability_of(device).exec_time


def partition(model: HalModel, devices: Sequence[Device], preference: Preference,
              fallback: Device | None = None) -> list[tuple[Device, list[int]]]:
    """Assign operations to devices; return ``(device, operation indexes)`` per step, in run order.

    Raises:
        NnError: BAD_DATA naming the first operation no device supports.
    """
    graph = model.main
    candidates = list(devices)
    if fallback is not None and fallback not in candidates:
        candidates.append(fallback)
    support = {id(d): d.supported_operations(model) for d in candidates}
    groups: list[tuple[Device, list[int]]] = []
    for index, op in enumerate(graph.operations):
        able = [d for d in candidates if support[id(d)][index]]
        if not able:
            names = ", ".join(d.name for d in candidates)
            raise NnError(ResultCode.BAD_DATA, f"operation {index} ({op.type.name}) is not supported "
                          f"by any device ({names})")
        first_type = graph.operands[op.inputs[0]].type if op.inputs else None
        cost = _preferred(lambda d: d.capabilities().performance(first_type), preference)
        best = min(able, key=cost) if first_type is not None else able[0]
        if groups and groups[-1][0] is best:
            groups[-1][1].append(index)
        else:
            groups.append((best, [index]))
    return groups


def _step_interface(graph: Subgraph, operations: Sequence[int],
                    readers_elsewhere) -> tuple[list[int], list[int]]:
    produced = {o for i in operations for o in graph.operations[i].outputs}
    inputs: list[int] = []
    for i in operations:
        for operand_index in graph.operations[i].inputs:
            life = graph.operands[operand_index].lifetime
            if operand_index not in produced and operand_index not in inputs and \
                    life in (L.SUBGRAPH_INPUT, L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT):
                inputs.append(operand_index)
    outputs = [o for i in operations for o in graph.operations[i].outputs
               if graph.operands[o].lifetime == L.SUBGRAPH_OUTPUT or readers_elsewhere(o)]
    return inputs, outputs


def extract(model: HalModel, operations: Sequence[int]) -> tuple[HalModel, list[int], list[int]]:
    """The sub-model of ``operations``: (sub-model, step inputs, step outputs) in main indexes."""
    graph = model.main
    chosen = set(operations)
    readers: dict[int, set[int]] = {}
    for index, op in enumerate(graph.operations):
        for operand_index in op.inputs:
            readers.setdefault(operand_index, set()).add(index)
    inputs, outputs = _step_interface(graph, operations,
                                      lambda o: bool(readers.get(o, set()) - chosen))
    used = sorted({o for i in operations for o in (*graph.operations[i].inputs,
                                                   *graph.operations[i].outputs)})
    new_index = {old: new for new, old in enumerate(used)}
    operands = []
    for old in used:
        operand = graph.operands[old]
        if old in inputs:
            operand = dataclasses.replace(operand, lifetime=L.SUBGRAPH_INPUT, location=None)
        elif old in outputs:
            operand = dataclasses.replace(operand, lifetime=L.SUBGRAPH_OUTPUT, location=None)
        elif operand.lifetime in (L.SUBGRAPH_INPUT, L.SUBGRAPH_OUTPUT):
            operand = dataclasses.replace(operand, lifetime=L.TEMPORARY_VARIABLE)
        operands.append(operand)
    ops = tuple(dataclasses.replace(graph.operations[i],
                                    inputs=tuple(new_index[o] for o in graph.operations[i].inputs),
                                    outputs=tuple(new_index[o] for o in graph.operations[i].outputs))
                for i in operations)
    sub = Subgraph(tuple(operands), ops, tuple(new_index[o] for o in inputs),
                   tuple(new_index[o] for o in outputs))
    return dataclasses.replace(model, main=sub), inputs, outputs


def _sources(graph: Subgraph, operands: Sequence[int], output: bool) -> tuple[Source, ...]:
    result = []
    for operand_index in operands:
        if operand_index in graph.input_indexes:
            result.append(Source(MODEL_INPUT, graph.input_indexes.index(operand_index)))
        elif operand_index in graph.output_indexes:
            result.append(Source(MODEL_OUTPUT, graph.output_indexes.index(operand_index)))
        else:
            result.append(Source(TEMPORARY, operand_index))
    return tuple(result)


def build_plan(model: HalModel, devices: Sequence[Device], preference: Preference,
               priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
               cache_dir: str | None = None, token: bytes | None = None,
               fallback: Device | None = None) -> ExecutionPlan:
    """Partition ``model`` over ``devices`` and prepare every step.

    Raises:
        NnError: BAD_DATA for unsupported operations, or the code of a failed prepare.
    """
    with tracing.runtime(Phase.COMPILATION, "ModelBuilder::partitionTheWork"):
        groups = partition(model, devices, preference, fallback)
    graph = model.main
    steps = []
    if len(groups) <= 1:
        device = groups[0][0] if groups else (fallback or devices[0])
        steps.append(ExecutionStep(0, device, tuple(range(len(graph.operations))), model,
                                   graph.input_indexes, graph.output_indexes))
    else:
        for index, (device, operations) in enumerate(groups):
            sub, ins, outs = extract(model, operations)
            steps.append(ExecutionStep(index, device, tuple(operations), sub, tuple(ins), tuple(outs),
                                       _sources(graph, ins, False), _sources(graph, outs, True)))
    crossing = frozenset(o for s in steps[1:] for o in s.inputs if o not in graph.input_indexes)
    plan = ExecutionPlan(model, tuple(steps), crossing)
    body = "ExecutionPlan::SimpleBody::finish" if plan.simple else "ExecutionPlan::CompoundBody::finish"
    with tracing.runtime(Phase.COMPILATION, body):
        for step in plan.steps:
            step.prepared = _prepare(step, preference, priority, deadline_ns, cache_dir, token)
    _log_plan(plan)
    return plan


def _prepare(step: ExecutionStep, preference, priority, deadline_ns, cache_dir, token) -> PreparedModel:
    try:
        return step.device.prepare_model(step.model, preference, priority, deadline_ns, cache_dir, token)
    except HalError as error:
        raise from_hal_error(error, f"step {step.index} on {step.device.name}: prepareModel") from None


def _log_plan(plan: ExecutionPlan) -> None:
    if not vlog.is_on("compilation"):
        return
    kind = "simple" if plan.simple else "compound"
    vlog.log("compilation", "ExecutionPlan", "%s plan, %d step(s) on %s", kind, len(plan.steps),
             ", ".join(sorted({s.device.name for s in plan.steps})))
    for step in plan.steps:
        vlog.log("compilation", "ExecutionPlan", "step %d: device %s, operations %s, inputs %s, "
                 "outputs %s", step.index, step.device.name, list(step.operations),
                 list(step.inputs), list(step.outputs))
