"""Assemble a HalModel from TFLite tensors: operands, the constant blob, operations.

TFLite tensors become operands on first use (inputs SUBGRAPH_INPUT, outputs SUBGRAPH_OUTPUT,
tensors with a buffer CONSTANT_COPY, the rest TEMPORARY_VARIABLE). Converters add NNAPI scalar
operands through :meth:`GraphBuilder.scalar` (deduplicated) and may replace a tensor by a folded
constant (DEQUANTIZE of constant weights becomes float32, DENSIFY keeps the tensor's type).

Example:
    >>> from nnscope.runtime.tflite._reader import TfliteGraph, TfliteTensor
    >>> x, y = TfliteTensor("x", (1, 4), "FLOAT32", None), TfliteTensor("y", (1, 4), "FLOAT32", None)
    >>> builder = GraphBuilder(TfliteGraph(tensors=(x, y), operators=(), inputs=(0,), outputs=(1,)))
    >>> builder.add(OperationType.RELU, [builder.tensor(0)], [builder.tensor(1)])
    >>> model = builder.finish()
    >>> [(operand.lifetime.name, operand.dimensions) for operand in model.main.operands]
    [('SUBGRAPH_INPUT', (1, 4)), ('SUBGRAPH_OUTPUT', (1, 4))]
    >>> model.main.operations
    (Operation(type=<OperationType.RELU: 19>, inputs=(0,), outputs=(1,)),)
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import (ChannelQuant, DataLocation, HalModel, Operand, OperandLifetime,
                               OperandType, Operation, OperationType, ResultCode, Subgraph,
                               numpy_dtype)
from nnscope.runtime.tflite._reader import TfliteGraph, TfliteTensor, element_dtype


class UnsupportedOperator(ValueError):
    """A TFLite operator (or one of its options) has no NNAPI mapping.

    ``result_code`` is NNAPI's BAD_DATA: the model cannot be built, as
    ``ANeuralNetworksModel_addOperation`` would refuse it.
    """

    result_code = ResultCode.BAD_DATA


_T = OperandType
_PLAIN_TYPES = {"FLOAT32": _T.TENSOR_FLOAT32, "FLOAT16": _T.TENSOR_FLOAT16,
                "INT32": _T.TENSOR_INT32, "INT64": _T.TENSOR_INT32, "UINT8": _T.TENSOR_QUANT8_ASYMM,
                "INT16": _T.TENSOR_QUANT16_SYMM, "BOOL": _T.TENSOR_BOOL8}
_SCALAR_TYPES = {int: _T.INT32, float: _T.FLOAT32, bool: _T.BOOL}
_ALIGN = 16


def operand_type(tensor: TfliteTensor) -> OperandType:
    """NNAPI operand type of a TFLite tensor (INT8 is per-channel when it has several scales)."""
    if tensor.type_name == "INT8":
        return _T.TENSOR_QUANT8_SYMM_PER_CHANNEL if len(tensor.scales) > 1 else \
            _T.TENSOR_QUANT8_ASYMM_SIGNED
    try:
        return _PLAIN_TYPES[tensor.type_name]
    except KeyError:
        raise UnsupportedOperator(f"tensor {tensor.name!r} of TFLite type {tensor.type_name}") \
            from None


def _quant_params(tensor: TfliteTensor, op_type: OperandType):
    if op_type == _T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        return 0.0, 0, ChannelQuant(tensor.scales, tensor.quantized_dimension)
    if len(tensor.scales) == 1:
        zero_point = tensor.zero_points[0] if tensor.zero_points else 0
        return tensor.scales[0], int(zero_point), None
    if op_type in (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_QUANT16_SYMM):
        return 1.0, 0, None  # raw integers (e.g. HASHTABLE_LOOKUP's hits): real value = q
    return 0.0, 0, None


class GraphBuilder:
    """Collects operands/operations while the operator converters walk the TFLite graph.

    ``feature_level`` is the NNAPI feature level (Android API level) the model is built for:
    a converter builds an operator newer than it from older operations, as the NNAPI delegate
    does (None: the newest, every operator as its own NNAPI operation)."""

    def __init__(self, graph: TfliteGraph, feature_level: int | None = None) -> None:
        self.graph = graph
        self.feature_level = feature_level
        self.operands: list[Operand] = []
        self.operations: list[Operation] = []
        self._blob = bytearray()
        self._by_tensor: dict[int, int] = {}
        self._scalars: dict[tuple, int] = {}
        self._folded: dict[int, tuple[np.ndarray, bool]] = {}

    # ------------------------------------------------------------------ operands
    def _append(self, operand: Operand) -> int:
        self.operands.append(operand)
        return len(self.operands) - 1

    def _store(self, array: np.ndarray) -> DataLocation:
        self._blob.extend(b"\0" * (-len(self._blob) % _ALIGN))
        location = DataLocation(-1, len(self._blob), array.nbytes)
        self._blob.extend(np.ascontiguousarray(array).tobytes())
        return location

    def constant(self, array: np.ndarray, op_type: OperandType, scale: float = 0.0,
                 zero_point: int = 0, channel_quant: ChannelQuant | None = None) -> int:
        """A CONSTANT_COPY tensor operand holding ``array`` (cast to the type's dtype)."""
        array = np.asarray(array, numpy_dtype(op_type))
        return self._append(Operand(op_type, tuple(array.shape), scale, zero_point,
                                    OperandLifetime.CONSTANT_COPY, self._store(array),
                                    channel_quant))

    def scalar(self, value) -> int:
        """A constant INT32/FLOAT32/BOOL scalar operand (shared between operations)."""
        op_type = _SCALAR_TYPES[type(value)]
        key = (op_type, value)
        if key not in self._scalars:
            array = np.array(value, numpy_dtype(op_type))
            self._scalars[key] = self._append(
                Operand(op_type, (), lifetime=OperandLifetime.CONSTANT_COPY,
                        location=self._store(array)))
        return self._scalars[key]

    def temporary(self, like: int, dimensions: tuple[int, ...] | None = None,
                  quantization: tuple[float, int] | None = None) -> int:
        """A new temporary with the type/quantisation of operand ``like`` (or its type with
        ``quantization``: (scale, zero point))."""
        base = self.operands[like]
        dims = base.dimensions if dimensions is None else tuple(dimensions)
        scale, zero_point = quantization or (base.scale, base.zero_point)
        return self._append(Operand(base.type, dims, scale, zero_point))

    def omitted(self, op_type: OperandType) -> int:
        """An omitted optional input (NO_VALUE), e.g. an LSTM's absent peephole weights."""
        return self._append(Operand(op_type, (), lifetime=OperandLifetime.NO_VALUE))

    def float_temporary(self, dimensions: tuple[int, ...]) -> int:
        """A new float32 temporary (a requantisation goes through one)."""
        return self._append(Operand(_T.TENSOR_FLOAT32, tuple(dimensions)))

    def fold(self, tensor_index: int, array: np.ndarray, keep_type: bool = False) -> None:
        """Make ``tensor_index`` a constant (it must not have an operand yet): float32, or of
        the tensor's own type and quantisation with ``keep_type``."""
        if tensor_index in self.graph.outputs:
            raise UnsupportedOperator("a model output computed from constants only")
        dtype = np.asarray(array).dtype if keep_type else np.float32
        self._folded[tensor_index] = (np.asarray(array, dtype), keep_type)

    def is_constant(self, tensor_index: int) -> bool:
        return self.graph.tensors[tensor_index].data is not None or tensor_index in self._folded

    def value(self, tensor_index: int) -> np.ndarray | None:
        """The constant value of a tensor (its buffer or a folded value), else None."""
        if tensor_index in self._folded:
            return self._folded[tensor_index][0]
        tensor = self.graph.tensors[tensor_index]
        if tensor.data is None:
            return None
        try:
            element_dtype(tensor.type_name)
        except TypeError:  # STRING, INT4, BFLOAT16, ...
            raise UnsupportedOperator(f"constant tensor {tensor.name!r} of TFLite type "
                                      f"{tensor.type_name}") from None
        return tensor.array()

    def constant_input(self, op, position: int, what: str) -> np.ndarray:
        """The constant value of ``op``'s input ``position`` (its ``what``, for the error)."""
        value = self.value(op.inputs[position])
        if value is None:
            raise UnsupportedOperator(f"{op.name} with a non-constant {what}")
        return value

    def dequantized(self, tensor_index: int) -> np.ndarray:
        """The float32 value of a constant: ``(q - zero_point) * scale``, per channel too."""
        tensor, values = self.graph.tensors[tensor_index], self.value(tensor_index)
        values = values.astype(np.float32)
        if not tensor.scales:
            return values
        shape = [1] * values.ndim
        if len(tensor.scales) > 1:
            shape[tensor.quantized_dimension] = -1
        zero_points = np.array(tensor.zero_points or [0], np.float32).reshape(shape)
        return (values - zero_points) * np.array(tensor.scales, np.float32).reshape(shape)

    def fold_hybrid_weights(self, inputs) -> None:
        """A hybrid operator (a float32 activation, int8/uint8 constant weights) reads its
        weights as float32 constants, as the NNAPI delegate dequantizes them."""
        tensors = self.graph.tensors
        if not any(i >= 0 and tensors[i].type_name == "FLOAT32" and not self.is_constant(i)
                   for i in inputs):
            return
        for i in inputs:
            if i >= 0 and tensors[i].type_name in ("INT8", "UINT8") and tensors[i].scales and \
                    i not in self._by_tensor and i not in self._folded and \
                    self.value(i) is not None:
                self._folded[i] = (self.dequantized(i), False)

    def constant_like(self, tensor_index: int, array: np.ndarray) -> int:
        """A constant with the type and quantisation of TFLite tensor ``tensor_index``."""
        tensor = self.graph.tensors[tensor_index]
        op_type = operand_type(tensor)
        return self.constant(array, op_type, *_quant_params(tensor, op_type))

    def tensor(self, index: int) -> int:
        """The operand of TFLite tensor ``index``, created on first use."""
        if index not in self._by_tensor:
            self._by_tensor[index] = self._new_tensor_operand(index)
        return self._by_tensor[index]

    def _new_tensor_operand(self, index: int) -> int:
        tensor = self.graph.tensors[index]
        if index in self._folded:
            array, keep_type = self._folded[index]
            if keep_type:
                return self.constant_like(index, array)
            return self.constant(array, _T.TENSOR_FLOAT32)
        op_type = operand_type(tensor)
        scale, zero_point, channel_quant = _quant_params(tensor, op_type)
        if tensor.data is not None:
            array = tensor.array()
            if tensor.type_name == "INT64" and array.size and \
                    (array.min() < -2**31 or array.max() >= 2**31):
                raise UnsupportedOperator(f"INT64 constant {tensor.name!r} outside the INT32 range")
            return self.constant(array, op_type, scale, zero_point, channel_quant)
        lifetime = (OperandLifetime.SUBGRAPH_INPUT if index in self.graph.inputs else
                    OperandLifetime.SUBGRAPH_OUTPUT if index in self.graph.outputs else
                    OperandLifetime.TEMPORARY_VARIABLE)
        return self._append(Operand(op_type, tensor.shape, scale, zero_point, lifetime,
                                    channel_quant=channel_quant))

    # ------------------------------------------------------------------ operations / model
    def add(self, op_type: OperationType, inputs, outputs) -> None:
        self.operations.append(Operation(op_type, tuple(inputs), tuple(outputs)))

    def finish(self) -> HalModel:
        """The HalModel with the TFLite graph's inputs/outputs as model inputs/outputs."""
        inputs = tuple(self.tensor(i) for i in self.graph.inputs)
        outputs = tuple(self.tensor(i) for i in self.graph.outputs)
        main = Subgraph(tuple(self.operands), tuple(self.operations), inputs, outputs)
        return HalModel(main, operand_values=bytes(self._blob))
