"""``MemoryDesc`` (ANeuralNetworksMemoryDesc): the roles and shape of a memory to allocate.

A descriptor lists where a memory will be used: inputs and outputs of finished compilations,
each with a usage frequency in (0, 1], plus optional dimensions. Checks follow AOSP's
``MemoryBuilder``: every setter after :meth:`MemoryDesc.finish` is BAD_STATE; a role of an
unfinished compilation, an index out of range, a frequency outside (0, 1], the same role twice,
roles whose operands differ in type, scale or zero point, or dimensions that cannot be merged
are BAD_DATA. ``finish`` without a role is BAD_DATA. At finish the descriptor picks its
allocator: the one driver device every role's compilation step runs on, else none (the CPU,
or several devices: the memory is then runtime-side shared memory, as AOSP falls back to
ashmem). Only compilations that run whole on that driver (simple plans) qualify: the steps of
a partitioned plan all receive every pool of the request, and a step on another device could
not read a driver's buffer. ``runtime.Memory.from_desc`` makes the memory; :class:`DescValidator` is what such a
memory keeps to check its uses (:func:`region`, :func:`check_inputs`, :func:`mark_outputs`).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime import Compilation, Execution, Memory, get_device
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> producer, consumer = (Compilation.for_devices(tiny_add(), [get_device("nnapi-reference")])
    ...                       for _ in range(2))
    >>> producer.finish(); consumer.finish()
    >>> desc = MemoryDesc()
    >>> desc.add_output_role(producer, 0, 1.0)
    >>> desc.add_input_role(consumer, 0, 1.0); desc.finish()
    >>> memory = Memory.from_desc(desc)
    >>> ones, out = np.ones((1, 4), np.float32), np.empty((1, 4), np.float32)
    >>> first = Execution(producer); first.set_input(0, ones); first.set_input(1, ones)
    >>> first.set_output_from_memory(0, memory, 0, 0); first.compute()  # length 0: the whole memory
    >>> second = Execution(consumer); second.set_input_from_memory(0, memory, 0, 0); second.set_input(1, ones)
    >>> second.set_output(0, out); second.compute(); out.tolist()
    [[3.0, 3.0, 3.0, 3.0]]
    >>> for item in (first, second, memory, desc, producer, consumer):
    ...     item.free()
"""
from __future__ import annotations

import math

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime import _checks as checks
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.hal.types import Operand, is_scalar
from nnscope.runtime.hal.validate import merge_dimensions
from nnscope.runtime.plan import MODEL_INPUT, MODEL_OUTPUT, ExecutionPlan
from nnscope.tracing import Phase

INPUT, OUTPUT = "input", "output"


class MemoryDesc:
    """An ANeuralNetworksMemoryDesc under construction (then finished, then used by
    ``Memory.from_desc``)."""

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksMemoryDesc_create")
    def __init__(self) -> None:
        self.roles: dict = {}   # (compilation, kind, index) -> frequency
        self.step_roles: list = []  # (step prepared model, device, kind, step io index, frequency)
        self.operand: Operand | None = None
        self.dimensions: tuple[int, ...] = ()
        self.finished = False
        self.allocator = None  # the driver device allocating it (set by finish)

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksMemoryDesc_addInputRole")
    def add_input_role(self, compilation, index: int, frequency: float) -> None:
        """The memory may be input ``index`` of ``compilation`` (a finished Compilation).

        Raises:
            NnError: UNEXPECTED_NULL for None; BAD_STATE after finish; BAD_DATA for an
                unfinished compilation, a bad index or frequency, a role given twice or an
                operand incompatible with the other roles.
        """
        self._add_role("addInputRole", INPUT, compilation, index, frequency)

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksMemoryDesc_addOutputRole")
    def add_output_role(self, compilation, index: int, frequency: float) -> None:
        """The memory may be output ``index`` of ``compilation``; raises as :meth:`add_input_role`."""
        self._add_role("addOutputRole", OUTPUT, compilation, index, frequency)

    def _add_role(self, call: str, kind: str, compilation, index, frequency) -> None:
        checks.not_null(compilation, call, "compilation")
        self._check_mutable(call)
        plan = getattr(compilation, "plan", None)  # a Compilation (this module sits below it)
        if not hasattr(compilation, "check_executable"):
            raise checks.bad(call, f"expected a Compilation, got {type(compilation).__name__}")
        if not isinstance(plan, ExecutionPlan):
            raise checks.bad(call, "the compilation is not finished (or its finish failed)")
        graph = compilation.plan.model.main
        indexes = graph.input_indexes if kind == INPUT else graph.output_indexes
        index = checks.index(index, len(indexes), call, f"{kind} index")
        if (compilation, kind, index) in self.roles:
            raise checks.bad(call, f"{kind} {index} of this compilation is already a role")
        operand = graph.operands[indexes[index]]
        if self.operand is not None and _metadata(operand) != _metadata(self.operand):
            raise checks.bad(call, f"{kind} {index} is {operand.type.name} (scale {operand.scale}, "
                             f"zero point {operand.zero_point}), incompatible with the other roles")
        dims = _merged(operand, self.dimensions, call)
        frequency = _frequency(frequency, call)
        self.roles[(compilation, kind, index)] = frequency
        self.step_roles += _step_roles(compilation.plan, kind, index, frequency)
        self.operand, self.dimensions = operand, dims

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksMemoryDesc_setDimensions")
    def set_dimensions(self, dimensions) -> None:
        """Dimensions of the memory (0 = unknown), merged with the roles' operands.

        Raises:
            NnError: BAD_STATE after finish; BAD_DATA for malformed dimensions, dimensions
                for a scalar, or ones conflicting with the roles or earlier dimensions.
        """
        call = "setDimensions"
        self._check_mutable(call)
        dims = checks.dimensions(dimensions, call)
        if self.operand is not None:
            dims = _merged(Operand(self.operand.type, self.dimensions), dims, call)
        elif self.dimensions:
            merged = merge_dimensions(self.dimensions, dims)
            if merged is None:
                raise checks.bad(call, f"dimensions {list(dims)} conflict with {list(self.dimensions)}")
            dims = merged
        self.dimensions = dims

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksMemoryDesc_finish")
    def finish(self) -> None:
        """Finish the descriptor and choose its allocator.

        Raises:
            NnError: BAD_STATE when already finished; BAD_DATA without a role.
        """
        self._check_mutable("finish")
        if not self.roles:
            raise checks.bad("finish", "the descriptor has no role")
        self.finished = True
        devices = {id(device): device for _, device, _, _, _ in self.step_roles}
        simple = all(compilation.plan.simple for compilation, _, _ in self.roles)
        device = next(iter(devices.values())) if len(devices) == 1 and simple else None
        self.allocator = device if device is not None and device.allocates_memory else None
        vlog.log("compilation", "MemoryBuilder", "MemoryDesc_finish: %d role(s), %s %s, allocator %s",
                 len(self.roles), self.operand.type.name, list(self.dimensions),
                 self.allocator.name if self.allocator is not None else "none (runtime memory)")

    @tracing.runtime(Phase.TERMINATION, "ANeuralNetworksMemoryDesc_free")
    def free(self) -> None:
        """Release the descriptor (ANeuralNetworksMemoryDesc_free); memories made stay valid."""
        self.step_roles = []

    def _check_mutable(self, call: str) -> None:
        if self.finished:
            raise NnError(ResultCode.BAD_STATE, f"{call}: the descriptor is finished")

    def validator(self) -> DescValidator:
        return DescValidator(frozenset(self.roles), self.operand, self.dimensions)


def _metadata(operand: Operand) -> tuple:
    return operand.type, operand.scale, operand.zero_point, operand.channel_quant


def _merged(operand: Operand, dims, call: str) -> tuple[int, ...]:
    if is_scalar(operand.type) and (dims or operand.dimensions):
        raise checks.bad(call, f"a scalar {operand.type.name} takes no dimensions, got {list(dims)}")
    merged = merge_dimensions(operand.dimensions, dims)
    if merged is None:
        raise checks.bad(call, f"dimensions {list(dims)} are incompatible with "
                         f"{list(operand.dimensions)}")
    return merged


def _frequency(value, call: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or not 0.0 < value <= 1.0:
        raise checks.bad(call, f"frequency must be in (0, 1], got {value!r}")
    return float(value)


def _step_roles(plan, kind: str, index: int, frequency: float) -> list:
    """The steps' roles for model ``kind`` ``index`` (AOSP ``forEachStepRoleOf...``)."""
    if plan.simple:
        step = plan.steps[0]
        return [(step.prepared, step.device, kind, index, frequency)]
    wanted = MODEL_INPUT if kind == INPUT else MODEL_OUTPUT
    roles = []
    for step in plan.steps:
        sources = step.input_sources if kind == INPUT else step.output_sources
        roles += [(step.prepared, step.device, kind, position, frequency)
                  for position, source in enumerate(sources)
                  if source.kind == wanted and source.position == index]
    return roles


class DescValidator:
    """What a memory made from a descriptor checks (AOSP ``DeviceMemoryValidator``): its roles,
    operand and dimensions, and whether it holds data (``initialized``)."""

    def __init__(self, roles: frozenset, operand: Operand, dimensions: tuple[int, ...]):
        self.roles = roles
        self.operand = operand
        self.dimensions = dimensions
        self.initialized = False

    def compatible(self, other: DescValidator | None, size: int, other_size: int) -> bool:
        """Whether a copy between this memory and ``other`` (None: a plain memory) is allowed."""
        if size != other_size:
            return False
        return other is None or (_metadata(self.operand) == _metadata(other.operand)
                                 and merge_dimensions(self.dimensions, other.dimensions) is not None)


def region(memory, compilation, kind: str, index: int, offset, length, dims, where: str):
    """``(offset, length, dims)`` of an execution argument on ``memory``. A memory made from a
    descriptor must have this role and be used whole (offset and length 0, as NNAPI), with
    dimensions compatible with its own; BAD_DATA otherwise."""
    desc = memory.desc
    if desc is None:
        return (*checks.buffer_region(offset, length, memory.size, where), dims)
    if (compilation, kind, index) not in desc.roles:
        raise checks.bad(where, f"the memory was not described with this compilation's {kind} {index}")
    if offset != 0 or length != 0:
        raise checks.bad(where, "a memory from a descriptor is used whole: offset and length must be 0")
    merged = merge_dimensions(desc.dimensions, dims or ())
    if merged is None:
        raise checks.bad(where, f"dimensions {list(dims)} do not match the memory's "
                         f"{list(desc.dimensions)}")
    return 0, memory.size, merged


def check_inputs(pools, slots, n_inputs: int) -> None:
    """OP_FAILED when an input memory made from a descriptor holds no data yet."""
    for slot in slots:
        if slot < n_inputs and not pools[slot].desc.initialized:
            raise NnError(ResultCode.OP_FAILED, f"compute: input {slot} uses an uninitialised "
                          "memory (write it by an execution output or Memory.copy first)")


def mark_outputs(pools, slots, n_inputs: int, result) -> None:
    """Output memories made from a descriptor hold data after a success, none after a failure."""
    ok = result is not None and not result.status
    for slot in slots:
        if slot >= n_inputs:
            pools[slot].desc.initialized = ok
