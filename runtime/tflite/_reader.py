"""Read a .tflite flatbuffer into plain records (tensors, operators) with the ``tflite`` package.

Only the first subgraph is read. Buffers are returned as raw bytes (a sparse constant's values
are densified here, see ``_sparsity``); options are the generated ``tflite.*Options`` table
objects (or None), ready for the operator converters.

Example:
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.tflite._translate import translate
    >>> data = translate(tiny_add().to_hal()).flatbuffer  # or open("model.tflite", "rb").read()
    >>> graph = read_graph(data)
    >>> graph.operators[0].name, graph.tensors[graph.inputs[0]].name, graph.tensors[graph.inputs[0]].shape
    ('ADD', 't0', (1, 4))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from nnscope.runtime.tflite._sparsity import SparseLevel, Sparsity, densify
from nnscope.runtime.tflite._verify import TfliteFormatError, verify

#: TFLite TensorType number -> name (FLOAT32, FLOAT16, INT32, UINT8, INT8, ...).
TENSOR_TYPE_NAMES = {value: name for name, value in vars(tflite.TensorType).items()
                     if not name.startswith("_")}
_OPTION_CLASSES = {value: getattr(tflite, name, None)
                   for name, value in vars(tflite.BuiltinOptions).items()
                   if not name.startswith("_")}


@dataclass(frozen=True)
class TfliteTensor:
    """One tensor: ``data`` is None for non-constants; ``scales`` empty when not quantized."""

    name: str
    shape: tuple[int, ...]
    type_name: str
    data: bytes | None
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    quantized_dimension: int = 0

    def array(self) -> np.ndarray:
        """The constant's value as a numpy array of its element type and shape."""
        if self.data is None:
            raise ValueError(f"tensor {self.name!r} is not a constant")
        return np.frombuffer(self.data, element_dtype(self.type_name)).reshape(self.shape)


def element_dtype(type_name: str) -> np.dtype:
    """The numpy dtype of a TFLite tensor type name (BOOL -> bool)."""
    return np.dtype(np.bool_) if type_name == "BOOL" else np.dtype(type_name.lower())


@dataclass(frozen=True)
class TfliteOperator:
    """One operator: builtin name (or ``CUSTOM:<code>``), tensor indexes (-1 = omitted)."""

    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: Any = None

    @property
    def label(self) -> str:
        """How errors name it: ``CONV_2D`` or ``CUSTOM 'foo'``."""
        if self.name.startswith("CUSTOM:"):
            return f"CUSTOM '{self.name[len('CUSTOM:'):]}'"
        return self.name


@dataclass(frozen=True)
class TfliteGraph:
    tensors: tuple[TfliteTensor, ...]
    operators: tuple[TfliteOperator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def read_graph(data: bytes) -> TfliteGraph:
    """Parse the model's first subgraph.

    Raises:
        TfliteFormatError: ``data`` is truncated or corrupt: an offset or length outside it
            (:func:`_verify.verify`, before anything is read), or a tensor, buffer or operator
            code that does not exist, or a constant whose bytes do not fill its shape.
    """
    verify(data)
    model = tflite.Model.GetRootAs(data, 0)
    if model.SubgraphsLength() < 1:
        raise TfliteFormatError("the .tflite model has no subgraph")
    graph = model.Subgraphs(0)
    tensors = tuple(_tensor(model, graph.Tensors(i), i, data) for i in range(graph.TensorsLength()))
    operators = tuple(_operator(model, graph.Operators(i), i, len(tensors))
                      for i in range(graph.OperatorsLength()))
    inputs, outputs = _ints(graph.InputsAsNumpy()), _ints(graph.OutputsAsNumpy())
    _check_indexes("the model's inputs", inputs, len(tensors))
    _check_indexes("the model's outputs", outputs, len(tensors))
    return TfliteGraph(tensors, operators, inputs, outputs)


def _check_indexes(what: str, indexes: tuple[int, ...], count: int, omitted_ok: bool = False) -> None:
    """Every tensor index in ``indexes`` names one of the ``count`` tensors (-1, an omitted
    optional input, only where ``omitted_ok``)."""
    for index in indexes:
        if not (-1 if omitted_ok else 0) <= index < count:
            raise TfliteFormatError(f"{what} name tensor {index}; the subgraph has {count}")


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values) if not isinstance(values, int) else ()


def _buffer_bytes(model, index: int, data: bytes, tensor: str) -> bytes | None:
    if index == 0:
        return None
    if index >= model.BuffersLength():
        raise TfliteFormatError(f"tensor {tensor} names buffer {index}; the model has "
                                f"{model.BuffersLength()}")
    buffer = model.Buffers(index)
    if buffer.Offset() > 1:  # large models keep the bytes after the flatbuffer
        if buffer.Offset() + buffer.Size() > len(data):
            raise TfliteFormatError(f"truncated or corrupt: buffer {index} at byte "
                                    f"{buffer.Offset()} (+{buffer.Size()}) is outside the "
                                    f"{len(data)}-byte file")
        return bytes(data[buffer.Offset():buffer.Offset() + buffer.Size()])
    if buffer.DataIsNone() or buffer.DataLength() == 0:
        return None
    return buffer.DataAsNumpy().tobytes()


def _tensor(model, tensor, index: int, data: bytes) -> TfliteTensor:
    number = tensor.Type()
    if number not in TENSOR_TYPE_NAMES:
        raise TfliteFormatError(f"tensor {index} has type {number}, which TFLite does not define")
    type_name = TENSOR_TYPE_NAMES[number]
    quant = tensor.Quantization()
    scales, zero_points, dim = (), (), 0
    if quant is not None and not quant.ScaleIsNone() and quant.ScaleLength() > 0:
        scales = tuple(float(s) for s in quant.ScaleAsNumpy())
        zero_points = _ints(quant.ZeroPointAsNumpy()) if not quant.ZeroPointIsNone() else ()
        dim = quant.QuantizedDimension()
    name, shape = (tensor.Name() or b"").decode("utf-8", "replace"), _ints(tensor.ShapeAsNumpy())
    if any(d < 0 for d in shape):
        raise TfliteFormatError(f"tensor {index} ({name!r}) has shape {list(shape)}")
    payload = _buffer_bytes(model, tensor.Buffer(), data, f"{index} ({name!r})")
    if payload is not None and tensor.Sparsity() is not None:
        payload = _densified(name, shape, type_name, payload, tensor.Sparsity())
    if payload is not None:
        _check_size(index, name, shape, type_name, len(payload))
    return TfliteTensor(name, shape, type_name, payload, scales, zero_points, dim)


def _check_size(index: int, name: str, shape, type_name: str, size: int) -> None:
    """A dense constant's bytes fill its shape exactly (as TFLite's own reader requires);
    types without a numpy form (STRING, INT4, ...) are left to the converters."""
    try:
        itemsize = element_dtype(type_name).itemsize
    except TypeError:
        return
    needed = int(np.prod(shape, dtype=np.int64)) * itemsize
    if size != needed:
        raise TfliteFormatError(f"constant tensor {index} ({name!r}) of shape {list(shape)} "
                                f"{type_name} has {size} bytes, not {needed}")


def _densified(name: str, shape, type_name: str, payload: bytes, params) -> bytes:
    try:
        values = np.frombuffer(payload, element_dtype(type_name))
        return densify(values, shape, _sparsity(params)).tobytes()
    except (TypeError, ValueError, IndexError) as error:
        raise TfliteFormatError(f"tensor {name!r}: {error}") from None


def _sparsity(params) -> Sparsity:
    levels = []
    for i in range(params.DimMetadataLength()):
        meta = params.DimMetadata(i)
        if meta.Format() == tflite.DimensionType.DENSE:
            levels.append(SparseLevel(dense_size=int(meta.DenseSize())))
        else:
            levels.append(SparseLevel(segments=_index_vector(meta.ArraySegmentsType(),
                                                             meta.ArraySegments()),
                                      indices=_index_vector(meta.ArrayIndicesType(),
                                                            meta.ArrayIndices())))
    return Sparsity(_ints(params.TraversalOrderAsNumpy()), _ints(params.BlockMapAsNumpy()),
                    tuple(levels))


_INDEX_VECTORS = {tflite.SparseIndexVector.Int32Vector: tflite.Int32Vector,
                  tflite.SparseIndexVector.Uint16Vector: tflite.Uint16Vector,
                  tflite.SparseIndexVector.Uint8Vector: tflite.Uint8Vector}


def _index_vector(kind: int, table) -> tuple[int, ...]:
    if kind not in _INDEX_VECTORS or table is None:
        raise TfliteFormatError("a SPARSE_CSR dimension without its segments or indices")
    vector = _INDEX_VECTORS[kind]()
    vector.Init(table.Bytes, table.Pos)
    return _ints(vector.ValuesAsNumpy())


def _operator(model, operator, index: int, tensors: int) -> TfliteOperator:
    opcode = operator.OpcodeIndex()
    if opcode >= model.OperatorCodesLength():
        raise TfliteFormatError(f"operator {index} names operator code {opcode}; the model has "
                                f"{model.OperatorCodesLength()}")
    code = model.OperatorCodes(opcode)
    number = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if number == tflite.BuiltinOperator.CUSTOM:
        name = f"CUSTOM:{(code.CustomCode() or b'').decode('utf-8', 'replace')}"
    else:
        name = BUILTIN_OPCODE2NAME.get(number, f"BUILTIN_{number}")
    inputs, outputs = _ints(operator.InputsAsNumpy()), _ints(operator.OutputsAsNumpy())
    _check_indexes(f"operator {index}'s inputs", inputs, tensors, omitted_ok=True)
    _check_indexes(f"operator {index}'s outputs", outputs, tensors)
    return TfliteOperator(name, inputs, outputs, _options(operator))


def _options(operator):
    option_class = _OPTION_CLASSES.get(operator.BuiltinOptionsType())
    table = operator.BuiltinOptions()
    if option_class is None or table is None:
        return None
    options = option_class()
    options.Init(table.Bytes, table.Pos)
    return options
