"""``Model``: build an NNAPI graph of operands and operations (ANeuralNetworksModel).

Operands are added in order (their index is their position); operations reference operand
indexes; ``finish()`` validates the graph (``runtime.hal.validate`` plus each operation's
registry check), sorts operations into run order and freezes the model into a
:class:`~runtime.hal.types.HalModel`. Each operation's signature is checked when it is added.
After ``finish()`` every mutator raises BAD_STATE, also after a failed ``finish()`` (the model
is then invalid, as in NNAPI).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
    >>> model = Model("add")
    >>> a, b = model.add_operand(T.TENSOR_FLOAT32, (1, 4)), model.add_operand(T.TENSOR_FLOAT32, (1, 4))
    >>> act, out = model.add_operand(T.INT32), model.add_operand(T.TENSOR_FLOAT32, (1, 4))
    >>> model.set_operand_value(act, 0)
    >>> model.add_operation(Op.ADD, [a, b, act], [out])
    0
    >>> model.identify_inputs_and_outputs([a, b], [out]); model.finish()
    >>> model.to_hal().main.operations[0].type.name
    'ADD'
"""
from __future__ import annotations

import dataclasses
import itertools
import mmap
from typing import Sequence

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime import _checks as checks
from nnscope.runtime import _modelcheck as mc
from nnscope.runtime import _modelparts as parts, manager
from nnscope.runtime._modelcheck import check_operation  # noqa: F401 - part of this module's API
from nnscope.runtime._lifecycle import BuilderState
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.drivers.base import Device
from nnscope.runtime.extensions import OPERAND, OPERATION, ModelExtensions
from nnscope.runtime.hal.extensions import is_extension
from nnscope.runtime.hal.types import (ChannelQuant, HalModel, Operand, OperandLifetime as L, OperandType,
                               Operation, OperationType)
from nnscope.runtime.hal.validate import operand_type_problem
from nnscope.runtime.memory import Memory
from nnscope.tracing import Phase

#: Values up to this size are copied into the model (CONSTANT_COPY); larger ones go to a pool.
MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES = parts.MAX_IMMEDIATE

_names = itertools.count()


class Model:
    """A graph under construction, then (after :meth:`finish`) an immutable model.

    Arguments and state are checked at each call with NNAPI's codes (see :mod:`runtime._checks`
    and :mod:`runtime._lifecycle`): None where C passes NULL is UNEXPECTED_NULL, bad values
    BAD_DATA, mutating a finished model (or one whose finish failed) BAD_STATE.

    Args:
        name: A label used in logs, traces and graph dumps.
    """

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_create")
    def __init__(self, name: str | None = None):
        if name is not None and not isinstance(name, str):
            raise checks.bad("Model", f"name must be a string, got {type(name).__name__}")
        self.name = name or f"model{next(_names)}"
        self._state = BuilderState(f"model {self.name}")
        self._operands: list[Operand] = []
        self._operations: list[Operation] = []
        self._values: dict[int, parts.Value] = {}
        self._inputs: tuple[int, ...] = ()
        self._outputs: tuple[int, ...] = ()
        self._identified: set[int] = set()  # every operand an identify call made an input/output
        self._relaxed = False
        self._hal: HalModel | None = None
        self._order: tuple[int, ...] = ()  # run position -> index the operation was added at
        self._extensions = ModelExtensions(manager.devices)

    # ------------------------------------------------------------------ construction
    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_addOperand")
    def add_operand(self, type: int, dimensions: Sequence[int] | None = None, scale: float = 0.0,
                    zero_point: int = 0) -> int:
        """Add an operand (ANeuralNetworksModel_addOperand).

        Args:
            type: An :class:`OperandType` (or its NNAPI number).
            dimensions: The shape; ``()``/None for scalars, 0 for an unknown dimension.
            scale: Quantization scale (quantized types only).
            zero_point: Quantization zero point (quantized types only).

        Returns:
            The new operand's index.

        Raises:
            NnError: UNEXPECTED_NULL for a None type; BAD_STATE after finish; BAD_DATA for an
                invalid type/shape/quantization or a byte size that overflows uint32.
        """
        call = "addOperand"
        checks.not_null(type, call, "operand type")
        self._state.check_mutable(call)
        index = len(self._operands)
        where = f"{call}: operand {index}"
        if mc.known(OperandType, type):
            kind = OperandType(int(type))
        elif mc.is_int(type) and is_extension(int(type)):
            kind = self._extensions.known(int(type), OPERAND, where)
        else:
            raise checks.bad(where, f"unknown operand type {type!r}")
        dims = checks.dimensions(dimensions, where)
        operand = Operand(kind, dims, checks.real(scale, where, "scale"),
                          checks.integer(zero_point, where, "zero point"))
        problem = operand_type_problem(operand, self._extensions.by_prefix)
        if problem:
            raise checks.bad(where, problem)
        if checks.size_overflows(kind, dims):
            raise checks.bad(where, f"{kind.name}{list(dims)}: byte size overflows uint32")
        self._operands.append(operand)
        return index

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_setOperandValue")
    def set_operand_value(self, index: int, value) -> None:
        """Give operand ``index`` a constant value (ANeuralNetworksModel_setOperandValue).

        Args:
            index: The operand.
            value: A numpy array of the operand's dtype, a Python scalar/sequence (converted),
                bytes-like, or None to mark an omitted optional operand (NO_VALUE). Values up to
                128 bytes are copied into the model; larger ones go to a shared-memory pool.

        Raises:
            NnError: BAD_DATA for a wrong index, dtype or size; BAD_STATE after finish.
        """
        operand = self._operand_to_set("setOperandValue", index)
        self._values[index] = parts.immediate_value(index, operand, value, self._extensions.is_tensor)

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_setOperandValueFromMemory")
    def set_operand_value_from_memory(self, index: int, memory: Memory, offset: int, length: int) -> None:
        """Use ``length`` bytes of ``memory`` at ``offset`` as operand ``index``'s value.

        The memory must stay alive (not freed) while the model is used.

        Raises:
            NnError: UNEXPECTED_NULL for a None memory; BAD_STATE after finish; BAD_DATA for a
                wrong index, region or size, a memory without PROT_READ or from a MemoryDesc.
        """
        call = "setOperandValueFromMemory"
        checks.not_null(memory, call, "memory")
        operand = self._operand_to_set(call, index)
        memory = Memory.checked(memory, f"{call}: operand {index}", mmap.PROT_READ)
        self._values[index] = parts.memory_value(index, operand, memory, offset, length)

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_setOperandValueFromModel")
    def set_operand_value_from_model(self, index: int, model: Model) -> None:
        """Make SUBGRAPH operand ``index`` refer to a finished ``model`` (for IF / WHILE).

        Raises:
            NnError: UNEXPECTED_NULL for a None model; BAD_STATE after finish or if ``model`` is
                not finished (or invalid); BAD_DATA for a wrong index or a non-SUBGRAPH operand.
        """
        call = "setOperandValueFromModel"
        checks.not_null(model, call, "model")
        self._state.check_mutable(call)
        if not isinstance(model, Model):
            raise checks.bad(call, f"expected a Model, got {type(model).__name__}")
        model._state.check_usable(call, "a reference to it")
        operand = self._operand_to_set(call, index)
        if operand.type != OperandType.SUBGRAPH:
            raise checks.bad(call, f"operand {index} is {operand.type.name}, not SUBGRAPH")
        if model._hal.extension_name_to_prefix:
            raise checks.bad(call, "referenced models with extension types are not supported")
        self._values[index] = parts.Value(L.SUBGRAPH, model=model._hal)

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_setOperandSymmPerChannelQuantParams")
    def set_operand_symm_per_channel_quant_params(self, index: int, scales: Sequence[float],
                                                  channel_dim: int) -> None:
        """Set per-channel scales of a TENSOR_QUANT8_SYMM_PER_CHANNEL operand.

        Raises:
            NnError: UNEXPECTED_NULL for None scales; BAD_STATE after finish; BAD_DATA for a
                wrong index, type, channel dimension or scale count.
        """
        call = "setOperandSymmPerChannelQuantParams"
        checks.not_null(scales, call, "scales")
        operand = self._operand_to_set(call, index)
        where = f"{call}: operand {index}"
        values = tuple(checks.real(s, where, f"scales[{i}]")
                       for i, s in enumerate(checks.sequence(scales, where, "scales")))
        updated = dataclasses.replace(operand, channel_quant=ChannelQuant(
            values, checks.integer(channel_dim, where, "channel dimension")))
        problem = None if operand.type == OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL else \
            f"is {operand.type.name}, not TENSOR_QUANT8_SYMM_PER_CHANNEL"
        problem = problem or operand_type_problem(updated)
        if problem:
            raise checks.bad(where, problem)
        self._operands[index] = updated

    # ------------------------------------------------------------------ vendor extensions
    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_getExtensionOperandType")
    def get_extension_operand_type(self, extension_name: str, type_within_extension: int) -> int:
        """The operand type ``type_within_extension`` of ``extension_name`` in this model.

        Raises:
            NnError: BAD_DATA for a bad name/type or when the allowlist refuses extensions
                (see ``runtime.extensions``); BAD_STATE after finish.
        """
        self._state.check_mutable("getExtensionOperandType")
        return self._extensions.type_of(extension_name, type_within_extension, OPERAND,
                                        "getExtensionOperandType")

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_getExtensionOperationType")
    def get_extension_operation_type(self, extension_name: str, type_within_extension: int) -> int:
        """The operation type ``type_within_extension`` of ``extension_name`` (as above)."""
        self._state.check_mutable("getExtensionOperationType")
        return self._extensions.type_of(extension_name, type_within_extension, OPERATION,
                                        "getExtensionOperationType")

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_setOperandExtensionData")
    def set_operand_extension_data(self, index: int, data: bytes | None) -> None:
        """Attach an opaque blob (any size; None clears it) to extension operand ``index``.

        Raises:
            NnError: BAD_DATA for a wrong index or a non-extension operand; BAD_STATE after finish.
        """
        call = "setOperandExtensionData"
        operand = self._operand_to_set(call, index)
        if not is_extension(operand.type):
            raise checks.bad(call, f"operand {index} is {operand.type.name}, not an extension type")
        if data is not None and not isinstance(data, (bytes, bytearray, memoryview)):
            raise checks.bad(call, f"data must be bytes-like, got {type(data).__name__}")
        self._operands[index] = dataclasses.replace(
            operand, extension_data=None if data is None else bytes(data))

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_addOperation")
    def add_operation(self, type: int, inputs: Sequence[int], outputs: Sequence[int]) -> int:
        """Add an operation (ANeuralNetworksModel_addOperation); return its index.

        The operation's signature (operand count and types) is validated here, as AOSP's
        ``ModelBuilder::addOperation`` does; graph-level checks (writers, cycles) wait for finish.

        Raises:
            NnError: UNEXPECTED_NULL for None lists; BAD_STATE after finish; BAD_DATA for an
                unknown type, an operand index out of range or an invalid signature.
        """
        call = "addOperation"
        checks.not_null(inputs, call, "inputs")
        checks.not_null(outputs, call, "outputs")
        self._state.check_mutable(call)
        index = len(self._operations)
        if mc.known(OperationType, type):
            kind = OperationType(int(type))
        elif mc.is_int(type) and is_extension(int(type)):
            kind = self._extensions.known(int(type), OPERATION, f"{call}: operation {index}")
        else:
            raise checks.bad(call, f"operation {index}: unknown operation type {type!r}")
        where = f"{call}: operation {index} ({kind.name})"
        count = len(self._operands)
        operation = Operation(kind, checks.index_list(inputs, count, where, "input"),
                              checks.index_list(outputs, count, where, "output"))
        mc.check_signature(operation, self._operands, where)
        self._operations.append(operation)
        return index

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_identifyInputsAndOutputs")
    def identify_inputs_and_outputs(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """Declare the model's inputs and outputs, in order.

        As in NNAPI an operand becomes an input/output once: one listed twice, in both lists,
        already identified by an earlier call, or holding a value is BAD_DATA.

        Raises:
            NnError: UNEXPECTED_NULL for None lists; BAD_STATE after finish; BAD_DATA as above
                or for an index out of range.
        """
        call = "identifyInputsAndOutputs"
        checks.not_null(inputs, call, "inputs")
        checks.not_null(outputs, call, "outputs")
        self._state.check_mutable(call)
        count = len(self._operands)
        ins = checks.index_list(inputs, count, call, "input")
        outs = checks.index_list(outputs, count, call, "output")
        taken = set(self._identified)
        for kind, indexes in (("input", ins), ("output", outs)):
            for index in indexes:
                if index in self._values:
                    raise checks.bad(call, f"operand {index} has a value and cannot be a model {kind}")
                if index in taken:
                    raise checks.bad(call, f"operand {index} is already a model input or output "
                                     f"(duplicate {kind})")
                taken.add(index)
        self._inputs, self._outputs, self._identified = ins, outs, taken

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_relaxComputationFloat32toFloat16")
    def relax_computation_float32_to_float16(self, allow: bool = True) -> None:
        """Allow float32 to be computed with float16 range and precision."""
        call = "relaxComputationFloat32toFloat16"
        self._state.check_mutable(call)
        self._relaxed = checks.flag(allow, call, "allow")

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_finish")
    def finish(self) -> None:
        """Validate and freeze the model.

        Raises:
            NnError: BAD_DATA naming the bad operand/operation (the model is then invalid:
                every later call on it is BAD_STATE); BAD_STATE if already finished or invalid.
        """
        self._state.check_mutable("finish")
        try:
            mc.check_lifetimes(self._inputs, self._outputs, self._values, self._identified)
            hal = dataclasses.replace(parts.assemble(
                self._operands, self._operations, self._values, self._inputs, self._outputs,
                self._relaxed), extension_name_to_prefix=self._extensions.pairs)
            self._hal, self._order = mc.validated(hal, "finish")
        except NnError as error:
            if error.code == ResultCode.BAD_DATA:
                self._state.invalidate()
            raise
        self._state.finish()
        _log_summary(self)

    # ------------------------------------------------------------------ finished models
    @classmethod
    def from_hal(cls, hal_model: HalModel, name: str | None = None) -> Model:
        """A finished Model from a HAL model (CTS vectors, tflite import).

        Raises:
            NnError: BAD_DATA when ``hal_model`` is invalid.
        """
        model = cls(name)
        with tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_finish"):
            if not isinstance(hal_model, HalModel):
                raise checks.bad("from_hal", f"expected a HalModel, got {type(hal_model).__name__}")
            model._hal, model._order = mc.validated(hal_model, "from_hal")
            model._state.finish()
            _log_summary(model)
        return model

    def to_hal(self) -> HalModel:
        """The finished HAL model. Raises NnError BAD_STATE before :meth:`finish`."""
        if self._hal is None:
            raise NnError(ResultCode.BAD_STATE, f"model {self.name}: not finished")
        return self._hal

    @property
    def finished(self) -> bool:
        return self._hal is not None

    @property
    def operands(self) -> tuple[Operand, ...]:
        return self._hal.main.operands if self._hal else tuple(self._operands)

    @property
    def operations(self) -> tuple[Operation, ...]:
        return self._hal.main.operations if self._hal else tuple(self._operations)

    @property
    def inputs(self) -> tuple[int, ...]:
        return self._hal.main.input_indexes if self._hal else self._inputs

    @property
    def outputs(self) -> tuple[int, ...]:
        return self._hal.main.output_indexes if self._hal else self._outputs

    @property
    def relaxed(self) -> bool:
        return self._hal.relax_float32_to_float16 if self._hal else self._relaxed

    def get_supported_operations_for_devices(self, devices: Sequence) -> list[bool]:
        """Per operation, in the order they were added, whether any of ``devices`` supports it.

        Raises:
            NnError: UNEXPECTED_NULL for a None list or entry; BAD_DATA for an empty list, a
                duplicate or a non-device; BAD_STATE unless the model finished successfully.
        """
        call = "getSupportedOperationsForDevices"
        with tracing.runtime(Phase.COMPILATION, "ANeuralNetworksModel_getSupportedOperationsForDevices"):
            if not checks.sequence(devices, call, "devices"):
                raise checks.bad(call, "empty device list")
            self._state.check_usable(call, "a support query")
            selected = checks.devices(devices, call, Device)
            hal = self.to_hal()
            flags = [False] * len(hal.main.operations)
            for device in selected:
                for position, supported in enumerate(device.supported_operations(hal)):
                    flags[self._order[position]] |= bool(supported)
            return flags

    def free(self) -> None:
        """Release the model (ANeuralNetworksModel_free)."""
        with tracing.runtime(Phase.TERMINATION, "ANeuralNetworksModel_free"):
            self._values.clear()

    # ------------------------------------------------------------------ helpers
    def _operand_to_set(self, call: str, index: int) -> Operand:
        """The operand a value/parameter setter targets (state, then index)."""
        self._state.check_mutable(call)
        return self._operands[checks.index(index, len(self._operands), call, "operand index")]

    def __repr__(self) -> str:
        state = "finished" if self.finished else self._state.value
        return (f"Model({self.name!r}, {len(self.operands)} operands, "
                f"{len(self.operations)} operations, {state})")


def _log_summary(model: Model) -> None:
    if vlog.is_on("model"):
        hal = model.to_hal()
        vlog.log("model", "ModelBuilder", "model %s finished: %d operands, %d operations, "
                 "inputs %s, outputs %s, %d referenced subgraphs, %d pools, relaxed=%s",
                 model.name, len(hal.main.operands), len(hal.main.operations),
                 list(hal.main.input_indexes), list(hal.main.output_indexes),
                 len(hal.referenced), len(hal.pools), hal.relax_float32_to_float16)
        kinds = {}
        for op in hal.main.operations:
            kinds[op.type.name] = kinds.get(op.type.name, 0) + 1
        vlog.log("model", "ModelBuilder", "model %s operations: %s", model.name,
                 ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items())))

