"""The ExecutionPlan: a compiled model as steps, each a sub-model prepared on one device.

:func:`build_plan` partitions the model with :func:`runtime.partition.partition` (the one
partitioner; AOSP ``ModelBuilder::partitionTheWork``), builds the plan straight from the
:class:`~runtime.partition.Partition` (its :class:`~runtime.partition.ExecutionStep` s are the
plan's steps) and prepares every step. A plan with one step covering the whole model is
*simple*: the execution's request goes to the device untouched. A compound plan routes model
inputs and outputs to the steps and allocates the tensors that cross steps.

Partitioning follows ``NN_PARTITION`` (:class:`PartitioningMode`, see :mod:`runtime.manager`):
0 runs the whole model on the single best device that supports every operation (else on the
CPU), 1 partitions with CPU fallback, 2 partitions without it. With a fallback device (the
CPU), a step whose device fails to prepare makes the whole model a simple plan on the CPU
(``[NN_LR_PC]CompilationBuilder::cpuFallback``), and CPU stand-ins for the steps and the whole
model are prepared at compilation (``[NN_LR_PC]ExecutionPlan::prepareCpuFallback``), ready for
steps that fail at execution (:meth:`ExecutionPlan.cpu_step`, :meth:`ExecutionPlan.cpu_whole`).
With a cache directory and token, steps are prepared through :mod:`runtime._caching` (from the
driver's cache when it loads; one device whose cache loads skips partitioning).

Example:
    >>> from nnscope.runtime.builtin_models import conv_pad_chain
    >>> from nnscope.runtime.drivers.cpu import CpuDevice
    >>> from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
    >>> model = conv_pad_chain(operations=3, size=4, channels=2)  # CONV_2D, PAD, CONV_2D
    >>> minimal = SampleDriver(SAMPLES["sample-minimal"])         # has no PAD
    >>> plan = build_plan(model.to_hal(), [minimal], Preference.FAST_SINGLE_ANSWER, fallback=CpuDevice())
    >>> [(s.device.name, s.operations) for s in plan.steps]
    [('sample-minimal', (0,)), ('nnapi-reference', (1,)), ('sample-minimal', (2,))]
    >>> plan.release()
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Sequence

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime import _caching, partition as partitioner
from nnscope.runtime._step_memory import StepMemories
from nnscope.runtime.api import NnError, from_hal_error
from nnscope.runtime.drivers.base import Device, PreparedModel
from nnscope.runtime.extensions import has_extension_operation
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.sync_fence import ExpectedWait, watch_window_s
from nnscope.runtime.hal.types import HalModel, Preference, Priority, is_scalar
from nnscope.runtime.partition import (MODEL_INPUT, MODEL_OUTPUT, TEMPORARY,  # noqa: F401 (re-exported)
                               ExecutionStep, Partition, Placement, Source, whole_placements)
from nnscope.tracing import Phase


class PartitioningMode(enum.IntEnum):
    """``NN_PARTITION`` values (AOSP ``DeviceManager::kPartitioning*``)."""

    NO = 0
    WITH_FALLBACK = 1
    WITHOUT_FALLBACK = 2


PARTITIONING_NO = PartitioningMode.NO
PARTITIONING_WITH_FALLBACK = PartitioningMode.WITH_FALLBACK
PARTITIONING_WITHOUT_FALLBACK = PartitioningMode.WITHOUT_FALLBACK


@dataclass
class ExecutionPlan:
    """The compiled form of a model.

    Attributes:
        model: The whole model.
        steps: Steps in run order.
        crossing: Operands produced on one device and read by a step on another.
        fallback: The CPU device used when a step fails (None: no CPU fallback).
        preference, priority: What the steps were prepared with (for CPU stand-ins).
        placements: Why each operation of the model runs on its step's device
            (:class:`~runtime.partition.Placement`, in model order).
    """

    model: HalModel
    steps: tuple[ExecutionStep, ...]
    crossing: frozenset[int] = frozenset()
    fallback: Device | None = None
    preference: Preference = Preference.FAST_SINGLE_ANSWER
    priority: Priority = Priority.MEDIUM
    placements: tuple[Placement, ...] = ()
    _cpu: dict = field(default_factory=dict, repr=False)  # step index / "whole" -> PreparedModel
    memories: StepMemories = field(default_factory=StepMemories, repr=False)

    def __post_init__(self) -> None:
        graph = self.model.main
        self.temporaries = tuple(dict.fromkeys(
            o for step in self.steps for s, o in zip(step.output_sources, step.outputs) if s.kind == TEMPORARY))
        read = {o for step in self.steps for s, o in zip(step.input_sources, step.inputs) if s.kind != MODEL_INPUT}
        #: Every tensor a step reads from another step has a fixed shape: step requests are reused.
        self.static_boundaries = all(_fixed(graph.operands[o]) for o in read)
        self._devices = tuple(step.device for step in self.steps)
        #: How long a fenced execution waits for its last fence, and how long the application
        #: looks for it without sleeping around then (``runtime._steps``; set when prepared).
        self.fenced_wait, self.watch_s = ExpectedWait(), 0.0

    @classmethod
    def from_partition(cls, part: Partition, fallback: Device | None = None,
                       preference: Preference = Preference.FAST_SINGLE_ANSWER,
                       priority: Priority = Priority.MEDIUM) -> "ExecutionPlan":
        """The plan of ``part``'s steps (not prepared yet)."""
        return cls(part.model, part.steps, part.cross_device_operands, fallback, preference,
                   priority, part.placements)

    @property
    def simple(self) -> bool:
        """One step running the whole model: requests pass straight to its device."""
        return len(self.steps) == 1 and self.steps[0].model is self.model

    def devices(self) -> tuple[Device, ...]:
        return self._devices

    def forget_pool(self, pool) -> None:
        """Tell every device of the plan that ``pool`` goes away (drivers unmap it)."""
        for device in dict.fromkeys(self._devices):
            device.forget_pool(pool)

    def cpu_step(self, step: ExecutionStep) -> PreparedModel | None:
        """``step``'s sub-model prepared on the fallback device (None: no CPU stand-in)."""
        return self._cpu.get("whole" if self.simple else step.index)

    def cpu_whole(self) -> PreparedModel | None:
        """The whole model prepared on the fallback device (None: no full CPU fallback)."""
        return self._cpu.get("whole")

    def release(self) -> None:
        self.memories.close(self.forget_pool)
        for prepared in (*(s.prepared for s in self.steps), *self._cpu.values()):
            if prepared is not None:
                prepared.release()
        self._cpu.clear()


#: How long the runtime watches for the reply of a partitioned plan's step before it sleeps, in
#: microseconds (default 200, at most 2000; 0: never). A step boundary then costs no wake-up of
#: the application when the step is short; it costs that much CPU time when the step is long.
STEP_POLL_US = "NNSCOPE_STEP_POLL_US"
DEFAULT_STEP_POLL_US = 200


def step_polling_window_s(preference: Preference) -> float:
    """The polling window of a step in seconds (how long the runtime watches for a step's reply,
    and a driver watches a fenced step's fence): none with LOW_POWER (as AOSP's burst), nor when
    this process may use only one CPU (``sync_fence.watch_window_s``)."""
    return watch_window_s(STEP_POLL_US, DEFAULT_STEP_POLL_US, 2000, preference == Preference.LOW_POWER)


def _fixed(operand) -> bool:
    """True when ``operand``'s shape is fully specified (a scalar's always is)."""
    return is_scalar(operand.type) or bool(operand.dimensions) and all(operand.dimensions)


def _partition(model: HalModel, devices: Sequence[Device], preference: Preference,
               fallback: Device | None, partitioning: PartitioningMode) -> Partition:
    """The partition for ``partitioning``; see the module docstring."""
    devices = list(devices)
    last_resort = fallback if fallback is not None and fallback not in devices else None
    if partitioning == PartitioningMode.NO:
        best = partitioner.best_single_device(model, devices, preference)
        if best is None and has_extension_operation(model):  # never on the CPU fallback
            partitioner.find_best_device_for_each_operation(model, devices, preference,
                                                            last_resort=last_resort)
        device = devices[best] if best is not None else fallback or devices[0]
        vlog.log("compilation", "ExecutionPlan", "ModelBuilder::partitionTheWork: partitioning "
                 "disabled (NN_PARTITION=0); whole model on %s", device.name)
        index = devices.index(device) if device in devices else len(devices)
        why = "NN_PARTITION=0: the whole model on " + \
            ("the best device that runs all of it" if best is not None else "the CPU (no device runs all of it)")
        return Partition(model, (partitioner.whole_model(model, device, index),),
                         placements=whole_placements(model, device, why))
    cpu_index = None if fallback is None else \
        len(devices) if last_resort is not None else devices.index(fallback)
    return partitioner.partition(model, devices, preference, cpu_index, last_resort)


def build_plan(model: HalModel, devices: Sequence[Device], preference: Preference,
               priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
               cache_dir: str | None = None, token: bytes | None = None,
               fallback: Device | None = None,
               partitioning: PartitioningMode = PartitioningMode.WITH_FALLBACK) -> ExecutionPlan:
    """Partition ``model`` over ``devices`` and prepare every step.

    Args:
        fallback: The CPU device: runs operations no device supports, and the whole model
            when a step's device fails to prepare. None disables CPU fallback.
        partitioning: An ``NN_PARTITION`` mode (a :class:`PartitioningMode`, or 0, 1 or 2).

    Raises:
        NnError: BAD_DATA for unsupported operations, or the code of a failed prepare.
    """
    cached, tried = _caching.whole_model_from_cache(model, devices, fallback, preference, priority,
                                                    deadline_ns, cache_dir, token)
    if cached is not None:  # one device, its cache loaded: no partitioning (AOSP single device)
        whole = Partition(model, (partitioner.whole_model(model, devices[0]),), placements=whole_placements(
            model, devices[0], "the whole model, from the device's compilation cache"))
        plan = ExecutionPlan.from_partition(whole, fallback, preference, priority)
        plan.steps[0].prepared = cached
        _log_plan(plan)
        return plan
    with tracing.runtime(Phase.COMPILATION, "ModelBuilder::partitionTheWork"):
        part = _partition(model, devices, preference, fallback, partitioning)
    plan = ExecutionPlan.from_partition(part, fallback, preference, priority)
    try:
        _prepare_all(plan, deadline_ns, cache_dir, token, not tried)
    except NnError as error:
        if fallback is None or plan.simple and plan.steps[0].device is fallback \
                or has_extension_operation(model):  # no CPU fallback for extension operations
            raise
        plan = _cpu_fallback_plan(plan, error, deadline_ns)
    _prepare_cpu_standins(plan)
    _log_plan(plan)
    return plan


def _prepare_cpu_standins(plan: ExecutionPlan) -> None:
    """Prepare the CPU fallbacks of execution now (the whole model, and each step that runs on
    a driver), so that a failing step is retried without compiling inside the execution."""
    cpu = plan.fallback
    if cpu is None or all(step.device is cpu for step in plan.steps):
        return
    wanted = [] if has_extension_operation(plan.model) else [("whole", plan.model)]
    if not plan.simple:  # never a CPU stand-in for an extension operation
        wanted += [(step.index, step.model) for step in plan.steps if step.device is not cpu
                   and not has_extension_operation(step.model)]
    with tracing.runtime(Phase.COMPILATION, "ExecutionPlan::prepareCpuFallback"):
        for key, model in wanted:
            try:
                plan._cpu[key] = cpu.prepare_model(model, plan.preference, plan.priority)
            except HalError as error:
                vlog.log("compilation", "ExecutionPlan", "no CPU fallback for %s: %s", key, error)


def _prepare_all(plan: ExecutionPlan, deadline_ns, cache_dir, token, try_cache: bool = True) -> None:
    body = "ExecutionPlan::SimpleBody::finish" if plan.simple else "ExecutionPlan::CompoundBody::finish"
    with tracing.runtime(Phase.COMPILATION, body):
        window = plan.watch_s = 0.0 if plan.simple else step_polling_window_s(plan.preference)
        try:
            for step in plan.steps:
                step.prepared = _prepare(step, plan.preference, plan.priority, deadline_ns,
                                         cache_dir, token, try_cache)
                step.prepared.reply_poll_s = window
        except NnError:
            plan.release()
            raise


def _cpu_fallback_plan(failed: ExecutionPlan, error: NnError, deadline_ns) -> ExecutionPlan:
    """AOSP ``CompilationBuilder::finish`` with CPU fallback: the whole model on the CPU."""
    cpu = failed.fallback
    vlog.log("compilation", "CompilationBuilder", "CompilationBuilder::finish with CPU fallback "
             "(%s, ResultCode %d: %s)", error.code.name, int(error.code), error.message)
    with tracing.runtime(Phase.COMPILATION, "CompilationBuilder::cpuFallback"):
        whole = Partition(failed.model, (partitioner.whole_model(failed.model, cpu),),
                          placements=whole_placements(failed.model, cpu, "CPU fallback of the whole "
                                                      f"model: {error.message}"))
        plan = ExecutionPlan.from_partition(whole, cpu, failed.preference, failed.priority)
        _prepare_all(plan, deadline_ns, None, None)
    return plan


def _prepare(step: ExecutionStep, preference, priority, deadline_ns, cache_dir, token,
             try_cache: bool = True) -> PreparedModel:
    try:
        return _caching.prepare(step.device, step.model, step.operations, preference, priority,
                                deadline_ns, cache_dir, token, try_cache)
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
