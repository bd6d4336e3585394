"""``Model``: build an NNAPI graph of operands and operations (ANeuralNetworksModel).

Operands are added in order (their index is their position); operations reference operand
indexes; ``finish()`` validates the graph (``runtime.hal.validate`` plus each operation's
registry check), sorts operations into run order and freezes the model into a
:class:`~runtime.hal.types.HalModel`. After ``finish()`` every mutator raises BAD_STATE.

Example:
    >>> import numpy as np
    >>> from runtime.hal.types import OperandType as T, OperationType as Op
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
from typing import Sequence

import numpy as np

import tracing
import vlog
from runtime import _modelparts as parts
from runtime.api import NnError, ResultCode, from_hal_error
from runtime.hal.errors import HalError
from runtime.hal.types import (ChannelQuant, HalModel, Operand, OperandLifetime as L, OperandType,
                               Operation, OperationType)
from runtime.hal.validate import operand_type_problem, validate_model
from runtime.memory import Memory
from tracing import Phase

#: Values up to this size are copied into the model (CONSTANT_COPY); larger ones go to a pool.
MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES = parts.MAX_IMMEDIATE

_names = itertools.count()


class Model:
    """A graph under construction, then (after :meth:`finish`) an immutable model.

    Args:
        name: A label used in logs, traces and graph dumps.
    """

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_create")
    def __init__(self, name: str | None = None):
        self.name = name or f"model{next(_names)}"
        self._operands: list[Operand] = []
        self._operations: list[Operation] = []
        self._values: dict[int, parts.Value] = {}
        self._inputs: tuple[int, ...] = ()
        self._outputs: tuple[int, ...] = ()
        self._relaxed = False
        self._hal: HalModel | None = None

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
            NnError: BAD_STATE after finish, BAD_DATA for an invalid type/shape/quantization.
        """
        self._check_mutable("addOperand")
        index = len(self._operands)
        try:
            operand = Operand(OperandType(type), tuple(int(d) for d in dimensions or ()),
                              float(scale), int(zero_point))
        except (ValueError, TypeError) as error:
            raise NnError(ResultCode.BAD_DATA, f"addOperand: operand {index}: {error}") from None
        problem = operand_type_problem(operand)
        if problem:
            raise NnError(ResultCode.BAD_DATA, f"addOperand: operand {index}: {problem}")
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
        operand = self._mutable_operand("setOperandValue", index)
        self._values[index] = parts.immediate_value(index, operand, value)

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_setOperandValueFromMemory")
    def set_operand_value_from_memory(self, index: int, memory: Memory, offset: int, length: int) -> None:
        """Use ``length`` bytes of ``memory`` at ``offset`` as operand ``index``'s value.

        The memory must stay alive (not freed) while the model is used.

        Raises:
            NnError: BAD_DATA for a wrong index, region or size; BAD_STATE after finish.
        """
        operand = self._mutable_operand("setOperandValueFromMemory", index)
        self._values[index] = parts.memory_value(index, operand, memory, offset, length)

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_setOperandValueFromModel")
    def set_operand_value_from_model(self, index: int, model: Model) -> None:
        """Make SUBGRAPH operand ``index`` refer to a finished ``model`` (for IF / WHILE).

        Raises:
            NnError: BAD_DATA if the operand is not SUBGRAPH, BAD_STATE if ``model`` is not finished.
        """
        operand = self._mutable_operand("setOperandValueFromModel", index)
        if operand.type != OperandType.SUBGRAPH:
            raise NnError(ResultCode.BAD_DATA, f"setOperandValueFromModel: operand {index} is "
                          f"{operand.type.name}, not SUBGRAPH")
        if not isinstance(model, Model) or model._hal is None:
            raise NnError(ResultCode.BAD_STATE, f"setOperandValueFromModel: operand {index}: "
                          f"the referenced model must be a finished Model")
        self._values[index] = parts.Value(L.SUBGRAPH, model=model._hal)

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_setOperandSymmPerChannelQuantParams")
    def set_operand_symm_per_channel_quant_params(self, index: int, scales: Sequence[float],
                                                  channel_dim: int) -> None:
        """Set per-channel scales of a TENSOR_QUANT8_SYMM_PER_CHANNEL operand.

        Raises:
            NnError: BAD_DATA for a wrong type, channel dimension or scale count.
        """
        operand = self._mutable_operand("setOperandSymmPerChannelQuantParams", index)
        updated = dataclasses.replace(operand, channel_quant=ChannelQuant(
            tuple(float(s) for s in scales), int(channel_dim)))
        problem = None if operand.type == OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL else \
            f"is {operand.type.name}, not TENSOR_QUANT8_SYMM_PER_CHANNEL"
        problem = problem or operand_type_problem(updated)
        if problem:
            raise NnError(ResultCode.BAD_DATA,
                          f"setOperandSymmPerChannelQuantParams: operand {index}: {problem}")
        self._operands[index] = updated

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_addOperation")
    def add_operation(self, type: int, inputs: Sequence[int], outputs: Sequence[int]) -> int:
        """Add an operation (ANeuralNetworksModel_addOperation); return its index.

        Raises:
            NnError: BAD_DATA for an unknown type or operand index out of range; BAD_STATE after finish.
        """
        self._check_mutable("addOperation")
        index = len(self._operations)
        try:
            kind = OperationType(type)
        except ValueError:
            raise NnError(ResultCode.BAD_DATA,
                          f"addOperation: operation {index}: unknown operation type {type!r}") from None
        ins, outs = self._indexes(f"addOperation: operation {index} ({kind.name}) input", inputs), \
            self._indexes(f"addOperation: operation {index} ({kind.name}) output", outputs)
        self._operations.append(Operation(kind, ins, outs))
        return index

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_identifyInputsAndOutputs")
    def identify_inputs_and_outputs(self, inputs: Sequence[int], outputs: Sequence[int]) -> None:
        """Declare the model's inputs and outputs, in order.

        Raises:
            NnError: BAD_DATA for an index out of range, a duplicate, or a constant operand.
        """
        self._check_mutable("identifyInputsAndOutputs")
        ins = self._indexes("identifyInputsAndOutputs: input", inputs)
        outs = self._indexes("identifyInputsAndOutputs: output", outputs)
        for kind, indexes in (("input", ins), ("output", outs)):
            if len(set(indexes)) != len(indexes):
                raise NnError(ResultCode.BAD_DATA, f"identifyInputsAndOutputs: duplicate {kind} operand")
            for index in indexes:
                if index in self._values:
                    raise NnError(ResultCode.BAD_DATA, f"identifyInputsAndOutputs: operand {index} "
                                  f"has a value and cannot be a model {kind}")
        self._inputs, self._outputs = ins, outs

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_relaxComputationFloat32toFloat16")
    def relax_computation_float32_to_float16(self, allow: bool = True) -> None:
        """Allow float32 to be computed with float16 range and precision."""
        self._check_mutable("relaxComputationFloat32toFloat16")
        self._relaxed = bool(allow)

    @tracing.runtime(Phase.PREPARATION, "ANeuralNetworksModel_finish")
    def finish(self) -> None:
        """Validate and freeze the model.

        Raises:
            NnError: BAD_DATA naming the bad operand/operation; BAD_STATE if already finished.
        """
        self._check_mutable("finish")
        hal = parts.assemble(self._operands, self._operations, self._values, self._inputs,
                             self._outputs, self._relaxed)
        self._hal = _validated(hal, "finish")
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
            model._hal = _validated(hal_model, "from_hal")
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
        """Per operation, whether any of ``devices`` supports it."""
        with tracing.runtime(Phase.COMPILATION, "ANeuralNetworksModel_getSupportedOperationsForDevices"):
            hal = self.to_hal()
            flags = [False] * len(hal.main.operations)
            for device in devices:
                flags = [a or b for a, b in zip(flags, device.supported_operations(hal))]
            return flags

    def free(self) -> None:
        """Release the model (ANeuralNetworksModel_free)."""
        with tracing.runtime(Phase.TERMINATION, "ANeuralNetworksModel_free"):
            self._values.clear()

    # ------------------------------------------------------------------ helpers
    def _check_mutable(self, call: str) -> None:
        if self._hal is not None:
            raise NnError(ResultCode.BAD_STATE, f"{call}: model {self.name} is already finished")

    def _mutable_operand(self, call: str, index: int) -> Operand:
        self._check_mutable(call)
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(self._operands):
            raise NnError(ResultCode.BAD_DATA, f"{call}: operand index {index} out of range "
                          f"(model has {len(self._operands)} operands)")
        if index in self._inputs or index in self._outputs:
            raise NnError(ResultCode.BAD_DATA, f"{call}: operand {index} is a model input/output")
        return self._operands[index]

    def _indexes(self, where: str, indexes: Sequence[int]) -> tuple[int, ...]:
        result = []
        for position, index in enumerate(indexes):
            if not isinstance(index, (int, np.integer)) or not 0 <= index < len(self._operands):
                raise NnError(ResultCode.BAD_DATA, f"{where} {position}: operand index {index} out "
                              f"of range (model has {len(self._operands)} operands)")
            result.append(int(index))
        return tuple(result)

    def __repr__(self) -> str:
        state = "finished" if self.finished else "building"
        return (f"Model({self.name!r}, {len(self.operands)} operands, "
                f"{len(self.operations)} operations, {state})")


def check_operation(operation: Operation, inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    """The op registry's signature check (no-op for operations without a record)."""
    from runtime.ops import registry  # noqa: PLC0415 - kernels load on first finish
    record = registry.get(operation.type)
    if record is not None:
        record.validate(inputs, outputs)


def _validated(hal: HalModel, call: str) -> HalModel:
    try:
        order = validate_model(hal, check_operation)
    except HalError as error:
        raise from_hal_error(error, call) from None
    return parts.in_run_order(hal, order)


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

