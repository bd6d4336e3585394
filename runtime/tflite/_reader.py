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
    """Parse the model's first subgraph."""
    model = tflite.Model.GetRootAs(data, 0)
    if model.SubgraphsLength() < 1:
        raise ValueError("the .tflite model has no subgraph")
    graph = model.Subgraphs(0)
    tensors = tuple(_tensor(model, graph.Tensors(i), data) for i in range(graph.TensorsLength()))
    operators = tuple(_operator(model, graph.Operators(i)) for i in range(graph.OperatorsLength()))
    return TfliteGraph(tensors, operators, _ints(graph.InputsAsNumpy()),
                       _ints(graph.OutputsAsNumpy()))


def _ints(values) -> tuple[int, ...]:
    return tuple(int(v) for v in values) if not isinstance(values, int) else ()


def _buffer_bytes(model, index: int, data: bytes) -> bytes | None:
    if index <= 0 or index >= model.BuffersLength():
        return None
    buffer = model.Buffers(index)
    if buffer.Offset() > 1:  # large models keep the bytes after the flatbuffer
        return bytes(data[buffer.Offset():buffer.Offset() + buffer.Size()])
    if buffer.DataIsNone() or buffer.DataLength() == 0:
        return None
    return buffer.DataAsNumpy().tobytes()


def _tensor(model, tensor, data: bytes) -> TfliteTensor:
    type_name = TENSOR_TYPE_NAMES.get(tensor.Type(), f"TYPE_{tensor.Type()}")
    quant = tensor.Quantization()
    scales, zero_points, dim = (), (), 0
    if quant is not None and not quant.ScaleIsNone() and quant.ScaleLength() > 0:
        scales = tuple(float(s) for s in quant.ScaleAsNumpy())
        zero_points = _ints(quant.ZeroPointAsNumpy()) if not quant.ZeroPointIsNone() else ()
        dim = quant.QuantizedDimension()
    name, shape = tensor.Name().decode("utf-8", "replace"), _ints(tensor.ShapeAsNumpy())
    payload = _buffer_bytes(model, tensor.Buffer(), data)
    if payload is not None and tensor.Sparsity() is not None:
        payload = _densified(name, shape, type_name, payload, tensor.Sparsity())
    return TfliteTensor(name, shape, type_name, payload, scales, zero_points, dim)


def _densified(name: str, shape, type_name: str, payload: bytes, params) -> bytes:
    try:
        values = np.frombuffer(payload, element_dtype(type_name))
        return densify(values, shape, _sparsity(params)).tobytes()
    except (TypeError, ValueError, IndexError) as error:
        raise ValueError(f"tensor {name!r}: {error}") from None


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
        raise ValueError("a SPARSE_CSR dimension without its segments or indices")
    vector = _INDEX_VECTORS[kind]()
    vector.Init(table.Bytes, table.Pos)
    return _ints(vector.ValuesAsNumpy())


def _operator(model, operator) -> TfliteOperator:
    code = model.OperatorCodes(operator.OpcodeIndex())
    number = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if number == tflite.BuiltinOperator.CUSTOM:
        name = f"CUSTOM:{(code.CustomCode() or b'').decode('utf-8', 'replace')}"
    else:
        name = BUILTIN_OPCODE2NAME.get(number, f"BUILTIN_{number}")
    return TfliteOperator(name, _ints(operator.InputsAsNumpy()),
                          _ints(operator.OutputsAsNumpy()), _options(operator))


def _options(operator):
    option_class = _OPTION_CLASSES.get(operator.BuiltinOptionsType())
    table = operator.BuiltinOptions()
    if option_class is None or table is None:
        return None
    options = option_class()
    options.Init(table.Bytes, table.Pos)
    return options
