"""Assemble a TFLite flatbuffer from plain records: the writing half of ``_reader``.

:class:`FlatbufferGraph` collects tensors (shape, type, constant bytes, quantisation),
operators (builtin name, tensor indexes, options as field values) and the graph's inputs and
outputs; :meth:`FlatbufferGraph.serialize` writes them with ``flatbuffers`` and the generated
``tflite`` schema functions (``ModelStart``, ``Conv2DOptionsAddPadding``, ...). Constant
buffers are 16-byte aligned, as LiteRT's kernels and XNNPACK read weights in place.

Example:
    >>> g = FlatbufferGraph()
    >>> x = g.tensor("x", (1, 4), "FLOAT32", signature=(-1, 4))
    >>> y = g.tensor("y", (1, 4), "FLOAT32")
    >>> g.operator("RELU", [x], [y])
    >>> g.inputs, g.outputs = [x], [y]
    >>> g.serialize()[4:8]
    b'TFL3'
"""
from __future__ import annotations

from dataclasses import dataclass

import flatbuffers
import numpy as np
import tflite

_ALIGN = 16


@dataclass(frozen=True)
class Quant:
    """TFLite quantisation: one scale per tensor, or per channel along ``dimension``."""

    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    dimension: int = 0


@dataclass(frozen=True)
class _Tensor:
    name: str
    shape: tuple[int, ...]
    type_name: str
    buffer: int
    quant: Quant | None
    signature: tuple[int, ...] | None


@dataclass(frozen=True)
class _Operator:
    code: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: str | None
    fields: tuple[tuple[str, object], ...]
    custom_options: bytes | None = None


class FlatbufferGraph:
    """One subgraph being written: add tensors and operators, then :meth:`serialize`."""

    def __init__(self) -> None:
        self.tensors: list[_Tensor] = []
        self.buffers: list[bytes] = [b""]  # buffer 0: the empty buffer of non-constants
        self.codes: dict[int | str, int] = {}  # BuiltinOperator or custom name -> its index
        self.operators: list[_Operator] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(self, name: str, shape, type_name: str, data: bytes | None = None,
               quant: Quant | None = None, signature=None) -> int:
        """A tensor (constant when ``data`` is given); ``signature``: -1 marks unknown dims."""
        buffer = 0
        if data is not None:
            self.buffers.append(bytes(data))
            buffer = len(self.buffers) - 1
        self.tensors.append(_Tensor(name, tuple(int(d) for d in shape), type_name, buffer, quant,
                                    None if signature is None else tuple(signature)))
        return len(self.tensors) - 1

    def operator(self, builtin: str, inputs, outputs, options: str | None = None, **fields) -> None:
        """An operator ``builtin`` with ``options`` (the schema table name) set from ``fields``."""
        code = getattr(tflite.BuiltinOperator, builtin)
        index = self.codes.setdefault(code, len(self.codes))
        self.operators.append(_Operator(index, tuple(inputs), tuple(outputs), options,
                                        tuple(fields.items())))

    def custom(self, name: str, inputs, outputs, options: bytes = b"") -> None:
        """A custom operator ``name`` (its code's ``custom_code``) with raw ``options``."""
        index = self.codes.setdefault(name, len(self.codes))
        self.operators.append(_Operator(index, tuple(inputs), tuple(outputs), None, (),
                                        bytes(options)))

    # ------------------------------------------------------------------ serialisation
    def serialize(self) -> bytes:
        """The ``.tflite`` bytes (schema version 3, file identifier ``TFL3``)."""
        size = sum(len(b) for b in self.buffers) + 1024 * (len(self.tensors) + len(self.operators) + 1)
        b = flatbuffers.Builder(size)
        buffers = [_buffer(b, data) for data in self.buffers]
        tensors = [_tensor(b, t) for t in self.tensors]
        operators = [_operator(b, op) for op in self.operators]
        codes = [_code(b, code) for code in self.codes]
        name = b.CreateString("nnscope")
        subgraph = _subgraph(b, tensors, operators, self.inputs, self.outputs, name)
        description = b.CreateString("nnscope sample-litert translation")
        model = _model(b, codes, [subgraph], buffers, description)
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())


def _offsets(b: flatbuffers.Builder, start, items: list) -> int:
    start(b, len(items))
    for item in reversed(items):
        b.PrependUOffsetTRelative(item)
    return b.EndVector()


def _numbers(b: flatbuffers.Builder, values, dtype) -> int:
    return b.CreateNumpyVector(np.asarray(values, dtype).reshape(-1))


def _buffer(b: flatbuffers.Builder, data: bytes) -> int:
    vector = None
    if data:
        b.StartVector(1, len(data), _ALIGN)
        b.head -= len(data)
        b.Bytes[b.head:b.head + len(data)] = data
        b.vectorNumElems = len(data)
        vector = b.EndVector()
    tflite.BufferStart(b)
    if vector is not None:
        tflite.BufferAddData(b, vector)
    return tflite.BufferEnd(b)


def _quantization(b: flatbuffers.Builder, quant: Quant) -> int:
    scales = _numbers(b, quant.scales, np.float32)
    zero_points = _numbers(b, quant.zero_points, np.int64)
    tflite.QuantizationParametersStart(b)
    tflite.QuantizationParametersAddScale(b, scales)
    tflite.QuantizationParametersAddZeroPoint(b, zero_points)
    tflite.QuantizationParametersAddQuantizedDimension(b, quant.dimension)
    return tflite.QuantizationParametersEnd(b)


def _tensor(b: flatbuffers.Builder, t: _Tensor) -> int:
    shape = _numbers(b, t.shape, np.int32)
    signature = None if t.signature is None else _numbers(b, t.signature, np.int32)
    quant = None if t.quant is None else _quantization(b, t.quant)
    name = b.CreateString(t.name)
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    if signature is not None:
        tflite.TensorAddShapeSignature(b, signature)
    tflite.TensorAddType(b, getattr(tflite.TensorType, t.type_name))
    tflite.TensorAddBuffer(b, t.buffer)
    tflite.TensorAddName(b, name)
    if quant is not None:
        tflite.TensorAddQuantization(b, quant)
    return tflite.TensorEnd(b)


def _options(b: flatbuffers.Builder, name: str, fields) -> int:
    vectors = {key: _numbers(b, value, np.int32) for key, value in fields
               if isinstance(value, (list, tuple))}
    getattr(tflite, f"{name}Start")(b)
    for key, value in fields:
        getattr(tflite, f"{name}Add{key}")(b, vectors.get(key, value))
    return getattr(tflite, f"{name}End")(b)


def _operator(b: flatbuffers.Builder, op: _Operator) -> int:
    inputs = _numbers(b, op.inputs, np.int32)
    outputs = _numbers(b, op.outputs, np.int32)
    options = None if op.options is None else _options(b, op.options, op.fields)
    custom = None if op.custom_options is None else b.CreateByteVector(op.custom_options)
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, op.code)
    tflite.OperatorAddInputs(b, inputs)
    tflite.OperatorAddOutputs(b, outputs)
    if options is not None:
        tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, op.options))
        tflite.OperatorAddBuiltinOptions(b, options)
    if custom is not None:
        tflite.OperatorAddCustomOptions(b, custom)
    return tflite.OperatorEnd(b)


def _code(b: flatbuffers.Builder, code: int | str) -> int:
    if isinstance(code, str):
        name = b.CreateString(code)
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, tflite.BuiltinOperator.CUSTOM)
        tflite.OperatorCodeAddBuiltinCode(b, tflite.BuiltinOperator.CUSTOM)
        tflite.OperatorCodeAddCustomCode(b, name)
        tflite.OperatorCodeAddVersion(b, 1)
        return tflite.OperatorCodeEnd(b)
    tflite.OperatorCodeStart(b)
    tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
    tflite.OperatorCodeAddBuiltinCode(b, code)
    tflite.OperatorCodeAddVersion(b, 1)
    return tflite.OperatorCodeEnd(b)


def _subgraph(b: flatbuffers.Builder, tensors, operators, inputs, outputs, name) -> int:
    tensor_vector = _offsets(b, tflite.SubGraphStartTensorsVector, tensors)
    operator_vector = _offsets(b, tflite.SubGraphStartOperatorsVector, operators)
    input_vector, output_vector = _numbers(b, inputs, np.int32), _numbers(b, outputs, np.int32)
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tensor_vector)
    tflite.SubGraphAddInputs(b, input_vector)
    tflite.SubGraphAddOutputs(b, output_vector)
    tflite.SubGraphAddOperators(b, operator_vector)
    tflite.SubGraphAddName(b, name)
    return tflite.SubGraphEnd(b)


def _model(b: flatbuffers.Builder, codes, subgraphs, buffers, description) -> int:
    code_vector = _offsets(b, tflite.ModelStartOperatorCodesVector, codes)
    subgraph_vector = _offsets(b, tflite.ModelStartSubgraphsVector, subgraphs)
    buffer_vector = _offsets(b, tflite.ModelStartBuffersVector, buffers)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, code_vector)
    tflite.ModelAddSubgraphs(b, subgraph_vector)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, buffer_vector)
    return tflite.ModelEnd(b)
