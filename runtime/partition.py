"""Partitioning of a model across devices (AOSP ``ModelBuilder::partitionTheWork``).

Three functions; no preparation, but each asks every candidate device (most are driver
processes) which operations it supports, and the chosen ones for their capabilities:

* :func:`find_best_device_for_each_operation` picks, per operation of ``model.main``, the
  device with the best advertised performance for the preference among those whose
  ``supported_operations`` flag is set (exec time for FAST_SINGLE_ANSWER / SUSTAINED_SPEED,
  power usage for LOW_POWER, for the type of the operation's input 0; relaxed figures when
  the model relaxes float32). Ties go to the earlier device. Nothing supports it: the CPU
  fallback ``cpu_index`` if given, else :class:`UnsupportedOperationError`.
* :func:`best_single_device` picks the device that runs the whole model best
  (``NN_PARTITION=0``).
* :func:`partition` groups the operations into :class:`ExecutionStep` s as AOSP does: each
  device has a queue of ready operations; the next step is the non-empty queue of the highest
  device index, drained while the operations it finishes make more of its own ready. Each
  step carries its sub-model (see ``runtime._submodel``), the original operand index of
  every sub-model input/output and where each comes from. One device for everything gives
  one step whose sub-model is the whole model unchanged (:func:`whole_model`); the
  :class:`runtime.plan.ExecutionPlan` is built straight from the :class:`Partition`.

A CPU fallback that is not one of the candidate devices is passed as ``last_resort``: it
comes after them (index ``len(devices)``), is never asked what it supports and takes only
the operations no device supports.

Log lines (log tag ``ExecutionPlan``): vlog ``compilation`` sums the choice up, one line per
device per compilation naming the operations it cannot run (counts per type and model
indexes) and one line with the operations each chosen device takes::

    ModelBuilder::findBestDeviceForEachOperation: sample-minimal can't do 2 of 31 operations: RESHAPE #28, SOFTMAX #30
    ModelBuilder::findBestDeviceForEachOperation: sample-minimal takes 29 #0-27,29; sample-float-fast takes 2 #28,30

The finer vlog tag ``partition`` (on only when named, see ``vlog.FINE_TAGS``) adds AOSP's lines
for each operation, e.g. ``ModelBuilder::findBestDeviceForEachOperation(ADD) = 1
(sample-float-fast)`` and ``Device sample-minimal can't do operation PAD``. Callers open the
``ModelBuilder::partitionTheWork`` tracing scope.

Example:
    >>> from nnscope.runtime.builtin_models import conv_pad_chain
    >>> from nnscope.runtime.drivers.cpu import CpuDevice
    >>> from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
    >>> hal_model = conv_pad_chain(operations=3, size=4, channels=2).to_hal()  # CONV_2D, PAD, CONV_2D
    >>> minimal = SampleDriver(SAMPLES["sample-minimal"])                     # has no PAD
    >>> part = partition(hal_model, [minimal, CpuDevice()], Preference.FAST_SINGLE_ANSWER)
    >>> [(s.device_index, s.operations) for s in part.steps]
    [(0, (0,)), (1, (1,)), (0, (2,))]
    >>> part.cross_device_operands
    frozenset({2, 6})
"""
from __future__ import annotations

import dataclasses
import logging
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from nnscope import vlog
from nnscope.runtime._submodel import extract, readers_of
from nnscope.runtime.api import BadDataError, ResultCode
from nnscope.runtime.drivers.base import Device, PreparedModel
from nnscope.runtime.extensions import extensions_of_operation, supported as supported_extensions
from nnscope.runtime.hal.device_types import Capabilities, PerformanceInfo
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (HalModel, OperandLifetime as L, OperandType, Operation,
                               OperationType, Preference, Subgraph)

__all__ = ["ExecutionStep", "Partition", "Placement", "Source", "UnsupportedOperationError",
           "best_single_device", "find_best_device_for_each_operation", "partition", "whole_model"]

_log = logging.getLogger(__name__)


class UnsupportedOperationError(BadDataError):
    """No device supports an operation and there is no CPU fallback (BAD_DATA).

    Attributes:
        operation_index: Index of the operation in ``model.main``.
        operation_type: Its :class:`OperationType`.
    """

    codes = ()  # keep NnError(BAD_DATA) mapping to BadDataError

    def __new__(cls, *args, **kwargs):
        return Exception.__new__(cls)

    def __init__(self, operation_index: int, operation_type: OperationType,
                 device_names: Sequence[str]):
        self.operation_index = operation_index
        self.operation_type = operation_type
        super().__init__(ResultCode.BAD_DATA,
                         f"no device can do operation {operation_index} ({operation_type.name}); "
                         f"devices: {', '.join(device_names) or 'none'}")


class MissingExtensionError(UnsupportedOperationError):
    """An operation needs an extension no candidate device supports; extension operations have
    no CPU fallback (BAD_DATA). The message says, per device, whether it lacks the extension."""

    def __init__(self, operation_index: int, operation_type: int, needed: set[str],
                 reasons: dict[str, str]):
        self.operation_index, self.operation_type = operation_index, operation_type
        self.extensions = sorted(needed)
        detail = "; ".join(f"{device} {why}" for device, why in reasons.items())
        BadDataError.__init__(self, ResultCode.BAD_DATA,
                              f"no device can do operation {operation_index} "
                              f"({operation_type.name}): it needs extension "
                              f"{', '.join(self.extensions)}, and there is no CPU fallback for "
                              f"extension operations ({detail or 'no devices'})")


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
        index: Position in run order.
        device: Where the step runs.
        operations: Indexes of the main model's operations in this step (run order).
        model: The step's sub-model (the main model itself for a whole-model step).
        inputs: Main-model operand index of each step input, in step order.
        outputs: Main-model operand index of each step output, in step order.
        input_sources, output_sources: Where each step argument comes from / goes to.
        prepared: The device's prepared model (set by :func:`runtime.plan.build_plan`).
        device_index: Index of ``device`` among the devices partitioned over (the last
            resort is one past them); 0 for a step made without partitioning.
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
    device_index: int = 0


def _sources(graph: Subgraph, operands: Sequence[int]) -> tuple[Source, ...]:
    result = []
    for operand_index in operands:
        if operand_index in graph.input_indexes:
            result.append(Source(MODEL_INPUT, graph.input_indexes.index(operand_index)))
        elif operand_index in graph.output_indexes:
            result.append(Source(MODEL_OUTPUT, graph.output_indexes.index(operand_index)))
        else:
            result.append(Source(TEMPORARY, operand_index))
    return tuple(result)


def whole_model(model: HalModel, device: Device, device_index: int = 0) -> ExecutionStep:
    """The one step that runs the whole, unchanged ``model`` on ``device``."""
    graph = model.main
    return ExecutionStep(0, device, tuple(range(len(graph.operations))), model,
                         graph.input_indexes, graph.output_indexes, device_index=device_index)


@dataclass(frozen=True)
class Placement:
    """Where one operation of ``model.main`` runs, and why: the partitioner's decision as data.

    Attributes:
        operation: The operation's index in ``model.main``.
        type_name: Its operation type (``"PAD"``).
        device: The name of the device chosen.
        reason: One line, e.g. ``"fastest that can (execTime 0.40)"`` or ``"CPU fallback:
            no device can; sample-minimal can't do PAD"``.
        refused: Names of the candidate devices that cannot run it, in device order.
    """

    operation: int
    type_name: str
    device: str
    reason: str
    refused: tuple[str, ...] = ()


def whole_placements(model: HalModel, device: Device, reason: str) -> tuple[Placement, ...]:
    """The placements of a model run whole on ``device`` for one ``reason``."""
    return tuple(Placement(index, operation.type.name, device.name, reason)
                 for index, operation in enumerate(model.main.operations))


@dataclass(frozen=True)
class Partition:
    """The steps of a model in run order.

    Attributes:
        model: The partitioned model.
        steps: Steps in run order; a step's inputs come from model inputs or earlier steps.
        operation_device: Device index of every original operation.
        cross_device_operands: Original operands produced by a step and read by a step on
            another device.
        placements: Why each operation went where it did (empty when not recorded).
    """

    model: HalModel
    steps: tuple[ExecutionStep, ...]
    operation_device: tuple[int, ...] = ()
    cross_device_operands: frozenset[int] = frozenset()
    placements: tuple[Placement, ...] = ()


def _cost(capabilities: Capabilities, model: HalModel, operation: Operation,
          preference: Preference) -> float:
    """AOSP ``ModelBuilder::getPerformance``: the figure for the type of input 0."""
    if not operation.inputs:
        return 0.0
    if operation.type == OperationType.IF:
        info = capabilities.if_performance
    elif operation.type == OperationType.WHILE:
        info = capabilities.while_performance
    else:
        info = _type_performance(capabilities, model, model.main.operands[operation.inputs[0]].type)
    return info.power_usage if preference == Preference.LOW_POWER else info.exec_time


def _type_performance(capabilities: Capabilities, model: HalModel,
                      operand_type: OperandType) -> PerformanceInfo:
    if model.relax_float32_to_float16:
        if operand_type == OperandType.TENSOR_FLOAT32:
            return capabilities.relaxed_float32_to_float16_performance_tensor
        if operand_type == OperandType.FLOAT32:
            return capabilities.relaxed_float32_to_float16_performance_scalar
    return capabilities.performance(operand_type)


def _support(model: HalModel, device: Device) -> list[bool]:
    flags = _driver_support(model, device)
    if model.extension_name_to_prefix and any(flags):  # AOSP DriverDevice: extensions it lacks
        names = {e.name for e in supported_extensions(device)}
        flags = [ok and extensions_of_operation(model, op) <= names
                 for ok, op in zip(flags, model.main.operations)]
    return flags


def _refuse_cpu_fallback(index: int, model: HalModel, devices: Sequence[Device]) -> None:
    """Raise for an operation without CPU fallback: :class:`MissingExtensionError` when
    operation ``index`` uses an extension, :class:`UnsupportedOperationError` for OEM_OPERATION."""
    operation = model.main.operations[index]
    if operation.type == OperationType.OEM_OPERATION:  # only an OEM driver runs it
        raise UnsupportedOperationError(index, operation.type, [d.name for d in devices])
    needed = extensions_of_operation(model, operation)
    if needed:
        reasons = {}
        for device in devices:
            missing = sorted(needed - {e.name for e in supported_extensions(device)})
            reasons[device.name] = f"lacks {', '.join(missing)}" if missing else \
                "has it but does not support this operation"
        raise MissingExtensionError(index, operation.type, needed, reasons)


def _driver_support(model: HalModel, device: Device) -> list[bool]:
    count = len(model.main.operations)
    try:
        flags = list(device.supported_operations(model))
    except HalError as error:  # a dead or failing driver takes no work (AOSP: supports nothing)
        _log.warning("device %s: getSupportedOperations failed (%s); treating it as supporting "
                     "none", device.name, error)
        return [False] * count
    if len(flags) != count:
        _log.warning("device %s answered %d support flags for %d operations; treating it as "
                     "supporting none", device.name, len(flags), count)
        return [False] * count
    return flags


def _capabilities(device: Device, flags: Sequence[bool]) -> Capabilities:
    """The device's capabilities; a device that supports nothing is never asked."""
    return device.capabilities() if any(flags) else Capabilities()


def best_single_device(model: HalModel, devices: Sequence[Device],
                       preference: Preference) -> int | None:
    """Index of the device that runs the whole model best (``NN_PARTITION=0``), or None.

    Only devices supporting every operation qualify; among them the lowest sum of the
    per-operation figures for the preference wins, ties going to the earlier device.
    """
    best, best_cost = None, 0.0
    for index, device in enumerate(devices):
        flags = _support(model, device)
        if not flags or not all(flags):
            continue
        capabilities = device.capabilities()
        cost = sum(_cost(capabilities, model, op, preference) for op in model.main.operations)
        if best is None or cost < best_cost:
            best, best_cost = index, cost
    return best


def _best_for(index: int, model: HalModel, devices: Sequence[Device], support, capabilities,
              preference: Preference) -> int | None:
    operation = model.main.operations[index]
    best, best_cost = None, 0.0
    for device_index, device in enumerate(devices):
        if not support[device_index][index]:
            vlog.log("partition", "ExecutionPlan", "Device %s can't do operation %s",
                     device.name, operation.type.name)
            continue
        cost = _cost(capabilities[device_index], model, operation, preference)
        if best is None or cost < best_cost:
            best, best_cost = device_index, cost
    return best


def _figure(preference: Preference) -> str:
    return "powerUsage" if preference == Preference.LOW_POWER else "execTime"


def _placement(index: int, model: HalModel, devices: Sequence[Device], support, capabilities,
               preference: Preference, best: int, fallback: bool) -> Placement:
    """Why operation ``index`` went to device ``best``: the figure that chose it, and the
    devices that would have been better (or, for a fallback, any) but cannot run it."""
    operation = model.main.operations[index]
    name = operation.type.name
    refused = tuple(d.name for i, d in enumerate(devices) if not support[i][index])
    if fallback:
        asked = [n for n in refused if n != devices[best].name]
        return Placement(index, name, devices[best].name, "CPU fallback: no device can" +
                         (f"; {', '.join(asked)} can't do {name}" if asked else ""), refused)
    cost = _cost(capabilities[best], model, operation, preference)
    better = [d.name for i, d in enumerate(devices)
              if not support[i][index] and _cost(capabilities[i], model, operation, preference) < cost]
    rivals = sum(1 for i in range(len(devices)) if support[i][index])
    reason = "the only device that can" if rivals == 1 else \
        f"best {_figure(preference)} ({cost:.2f}) of {rivals} that can"
    if better:
        reason += f"; {', '.join(better)} can't do {name}"
    return Placement(index, name, devices[best].name, reason, refused)


def find_best_device_for_each_operation(model: HalModel, devices: Sequence[Device],
                                        preference: Preference, cpu_index: int | None = None,
                                        last_resort: Device | None = None) -> list[int]:
    """The device index chosen for each operation of ``model.main``.

    Args:
        model: The model; each device is asked ``supported_operations(model)`` once.
        devices: Candidate devices; ties go to the earlier one.
        preference: LOW_POWER compares power usage, the others exec time.
        cpu_index: Index in ``devices`` of the CPU fallback, used for operations no device
            (including the CPU one) claims to support.
        last_resort: A CPU fallback that is not among ``devices`` (see the module docstring).

    Raises:
        UnsupportedOperationError: No device supports an operation and no ``cpu_index``.
    """
    return _choose(model, devices, preference, cpu_index, last_resort)[0]


def _choose(model: HalModel, devices: Sequence[Device], preference: Preference,
            cpu_index: int | None, last_resort: Device | None) -> tuple[list[int], tuple[Placement, ...]]:
    """:func:`find_best_device_for_each_operation` and the :class:`Placement` of each operation."""
    support = [_support(model, device) for device in devices]
    if last_resort is not None:
        devices = [*devices, last_resort]
        support.append([False] * len(model.main.operations))
    capabilities = [_capabilities(device, flags) for device, flags in zip(devices, support)]
    chosen, placements = [], []
    for index, operation in enumerate(model.main.operations):
        best = _best_for(index, model, devices, support, capabilities, preference)
        fallback = best is None
        if fallback:
            _refuse_cpu_fallback(index, model, devices)
            if cpu_index is None:
                raise UnsupportedOperationError(index, operation.type, [d.name for d in devices])
            best = cpu_index
        vlog.log("partition", "ExecutionPlan", "ModelBuilder::findBestDeviceForEachOperation(%s) "
                 "= %d (%s)", operation.type.name, best, devices[best].name)
        chosen.append(best)
        placements.append(_placement(index, model, devices, support, capabilities, preference,
                                     best, fallback))
    if vlog.is_on("compilation"):  # the last resort is never asked what it supports
        _log_choice(model, devices, support[:len(support) - (last_resort is not None)], chosen)
    return chosen, tuple(placements)


def _log_choice(model: HalModel, devices: Sequence[Device], support, chosen: Sequence[int]) -> None:
    """The ``compilation`` summary of the choice (see the module docstring)."""
    operations = model.main.operations
    where = "ModelBuilder::findBestDeviceForEachOperation"
    for device, flags in zip(devices, support):
        refused = [i for i, ok in enumerate(flags) if not ok]
        if refused:
            vlog.log("compilation", "ExecutionPlan", "%s: %s can't do %s", where, device.name,
                     _operation_list(refused, operations))
    takes = {}
    for index, device_index in enumerate(chosen):
        takes.setdefault(device_index, []).append(index)
    vlog.log("compilation", "ExecutionPlan", "%s: %s", where, "; ".join(
        f"{devices[d].name} takes {len(ops)} #{_ranges(ops)}" for d, ops in takes.items()))


def _operation_list(indexes: Sequence[int], operations) -> str:
    """``"2 of 31 operations: RESHAPE #28, SOFTMAX #30"``; all of them: ``"any of the 31 operations"``."""
    if len(indexes) == len(operations):
        return f"any of the {len(operations)} operations"
    by_type: dict[str, list[int]] = {}
    for index in indexes:
        by_type.setdefault(operations[index].type.name, []).append(index)
    parts = [f"{name}{f' x{len(ops)}' if len(ops) > 1 else ''} #{_ranges(ops)}" for name, ops in by_type.items()]
    return f"{len(indexes)} of {len(operations)} operations: {', '.join(parts)}"


def _ranges(indexes: Sequence[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2,5,7-8"``."""
    runs: list[list[int]] = []
    for index in indexes:
        if runs and index == runs[-1][1] + 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _group(model: HalModel, best: Sequence[int], device_count: int) -> list[tuple[int, list[int]]]:
    """AOSP's OperandTracker + per-device queues: ``(device index, operations)`` per step."""
    graph = model.main
    producer = {o: i for i, op in enumerate(graph.operations) for o in op.outputs}
    waiting = [0] * len(graph.operations)
    readers: dict[int, list[int]] = {}
    queues = [deque() for _ in range(device_count)]
    for index, operation in enumerate(graph.operations):
        for operand_index in operation.inputs:
            if operand_index in producer and graph.operands[operand_index].lifetime in (
                    L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT):
                waiting[index] += 1
                readers.setdefault(operand_index, []).append(index)
        if waiting[index] == 0:
            queues[best[index]].append(index)
    groups = []
    while (device := next((d for d in reversed(range(device_count)) if queues[d]), None)) is not None:
        operations = []
        while queues[device]:
            index = queues[device].popleft()
            operations.append(index)
            for operand_index in graph.operations[index].outputs:
                for reader in readers.get(operand_index, ()):
                    waiting[reader] -= 1
                    if waiting[reader] == 0:
                        queues[best[reader]].append(reader)
        groups.append((device, operations))
    if sum(len(ops) for _, ops in groups) != len(graph.operations):
        raise BadDataError(ResultCode.BAD_DATA, "partition: the operations form a cycle")
    return groups


def _cross_device(steps: Sequence[ExecutionStep]) -> frozenset[int]:
    made_on = {o: s.device_index for s in steps for o in s.outputs}
    return frozenset(o for s in steps for o in s.inputs
                     if o in made_on and made_on[o] != s.device_index)


def partition(model: HalModel, devices: Sequence[Device], preference: Preference,
              cpu_index: int | None = None, last_resort: Device | None = None) -> Partition:
    """Split ``model`` into steps, each a sub-model for one device.

    Args:
        model: The whole model.
        devices: Candidate devices (see :func:`find_best_device_for_each_operation`).
        preference: The compilation preference.
        cpu_index: Index in ``devices`` of the CPU fallback device, if any
            (``len(devices)`` for the ``last_resort``).
        last_resort: A CPU fallback that is not among ``devices`` (see the module docstring).

    Raises:
        UnsupportedOperationError: An operation no device supports, without a fallback.
        BadDataError: No devices, or operations that depend on each other in a cycle.
    """
    if not devices:
        raise BadDataError(ResultCode.BAD_DATA, "partition: no devices")
    best, placements = _choose(model, devices, preference, cpu_index, last_resort)
    if last_resort is not None:
        devices = [*devices, last_resort]
    graph = model.main
    if len(set(best)) <= 1:
        device = best[0] if best else (0 if cpu_index is None else cpu_index)
        vlog.log("compilation", "ExecutionPlan", "ModelBuilder::partitionTheWork: only one best "
                 "device: %s", devices[device].name)
        return Partition(model, (whole_model(model, devices[device], device),), tuple(best),
                         placements=placements)
    readers = readers_of(graph)
    steps = []
    for position, (device, operations) in enumerate(_group(model, best, len(devices))):
        sub = extract(model, operations, readers)
        traced = dataclasses.replace(sub.model, step_index=position, operation_origins=tuple(operations))
        steps.append(ExecutionStep(position, devices[device], tuple(operations), traced,
                                   sub.inputs, sub.outputs, _sources(graph, sub.inputs),
                                   _sources(graph, sub.outputs), device_index=device))
        vlog.log("compilation", "ExecutionPlan", "step %d: device %d (%s), operations %s",
                 position, device, devices[device].name, operations)
    return Partition(model, tuple(steps), tuple(best), _cross_device(steps), placements)
