"""NNAPI ``HalModel`` -> TFLite flatbuffer: the reverse of :mod:`runtime.tflite.loader`.

``_translate.translate`` writes ``model.main`` as one TFLite subgraph: every tensor operand becomes a
tensor (constants with their bytes, quantisation per tensor or per channel, unknown dimensions
as -1 in the shape signature), every operation one or more builtin operators
(``_writer_ops.TRANSLATORS``); scalar operands become operator options. ``_translate.supported``
answers per operation, for ``getSupportedOperations``: it translates the operation alone.
Anything without a LiteRT builtin raises :class:`Untranslatable`.

Example:
    >>> import numpy as np
    >>> from ai_edge_litert.interpreter import Interpreter
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.tflite._translate import translate
    >>> translation = translate(tiny_add().to_hal())  # output = input0 + input1
    >>> interpreter = Interpreter(model_content=translation.flatbuffer, num_threads=1)
    >>> interpreter.allocate_tensors()
    >>> for detail in interpreter.get_input_details():
    ...     interpreter.set_tensor(detail["index"], np.ones((1, 4), np.float32))
    >>> interpreter.invoke()
    >>> interpreter.get_tensor(interpreter.get_output_details()[0]["index"]).tolist()
    [[2.0, 2.0, 2.0, 2.0]]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnscope.runtime.hal.types import (HalModel, OperandLifetime as L, OperandType as T, Subgraph,
                               is_scalar, numpy_dtype)
from nnscope.runtime.ops.executor import read_constant
from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph, Quant

#: NNAPI tensor type -> TFLite TensorType name.
TENSOR_TYPES = {T.TENSOR_FLOAT32: "FLOAT32", T.TENSOR_FLOAT16: "FLOAT16", T.TENSOR_INT32: "INT32",
                T.TENSOR_QUANT8_ASYMM: "UINT8", T.TENSOR_QUANT8_ASYMM_SIGNED: "INT8",
                T.TENSOR_QUANT8_SYMM_PER_CHANNEL: "INT8", T.TENSOR_BOOL8: "BOOL"}
CONSTANT_LIFETIMES = (L.CONSTANT_COPY, L.CONSTANT_REFERENCE)


class Untranslatable(ValueError):
    """An operation (or an operand of it) has no LiteRT builtin form."""


@dataclass(frozen=True)
class Translation:
    """The flatbuffer and, per model input/output, its TFLite tensor index; ``quantized``:
    whether any tensor is quantized (uint8/int8)."""

    flatbuffer: bytes
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    quantized: bool = False


class Writer:
    """Translation state of one graph: the operand -> tensor map and the flatbuffer graph."""

    def __init__(self, model: HalModel, graph: Subgraph | None = None) -> None:
        self.model = model
        self.graph = graph or model.main
        self.out = FlatbufferGraph()
        self._tensors: dict[int, int] = {}

    # ------------------------------------------------------------------ operands
    def operand(self, index: int):
        return self.graph.operands[index]

    def is_constant(self, index: int) -> bool:
        return self.operand(index).lifetime in CONSTANT_LIFETIMES

    def scalar(self, index: int):
        """The value of constant scalar operand ``index`` (a non-constant one: Untranslatable)."""
        operand = self.operand(index)
        if not is_scalar(operand.type) or not self.is_constant(index):
            raise Untranslatable(f"operand {index} must be a constant scalar")
        return read_constant(self.model, operand)

    def value(self, index: int) -> np.ndarray:
        """The array of constant tensor operand ``index``."""
        if not self.is_constant(index):
            raise Untranslatable(f"operand {index} must be a constant")
        return np.asarray(read_constant(self.model, self.operand(index)))

    def tensor(self, index: int) -> int:
        """The TFLite tensor of operand ``index``, created on first use."""
        if index not in self._tensors:
            self._tensors[index] = self._new_tensor(index)
        return self._tensors[index]

    def _new_tensor(self, index: int) -> int:
        operand = self.operand(index)
        type_name, quant = tensor_type(operand)
        if not operand.dimensions:
            raise Untranslatable(f"operand {index} has an unknown rank")
        data = None
        if operand.lifetime in CONSTANT_LIFETIMES:
            data = np.ascontiguousarray(self.value(index), numpy_dtype(operand.type)).tobytes()
        elif operand.lifetime == L.NO_VALUE:
            raise Untranslatable(f"operand {index} is omitted")
        dims = operand.dimensions
        signature = tuple(d if d else -1 for d in dims) if 0 in dims else None
        return self.out.tensor(f"t{index}", tuple(d or 1 for d in dims), type_name, data, quant, signature)

    def new(self, like: int, shape, type_name: str | None = None) -> int:
        """A temporary tensor with operand ``like``'s type and quantisation (or ``type_name``)."""
        like_type, quant = tensor_type(self.operand(like))
        return self.out.tensor(f"tmp{len(self.out.tensors)}", tuple(d or 1 for d in shape),
                               type_name or like_type, None, None if type_name else quant)

    def constant(self, array, type_name: str, quant: Quant | None = None) -> int:
        array = np.ascontiguousarray(array)
        return self.out.tensor(f"c{len(self.out.tensors)}", array.shape, type_name, array.tobytes(), quant)

    def int32(self, values) -> int:
        return self.constant(np.asarray(values, np.int32), "INT32")

    def emit(self, builtin: str, inputs, outputs, options: str | None = None, **fields) -> None:
        self.out.operator(builtin, inputs, outputs, options, **fields)

    # ------------------------------------------------------------------ NCHW layout
    def nhwc_in(self, index: int, nchw: bool) -> int:
        """Operand ``index`` as an NHWC tensor (through a TRANSPOSE when ``nchw``)."""
        source = self.tensor(index)
        if not nchw:
            return source
        n, c, h, w = self.operand(index).dimensions
        target = self.new(index, (n, h, w, c))
        self.emit("TRANSPOSE", [source, self.int32([0, 2, 3, 1])], [target])
        return target

    def nhwc_out(self, index: int, nchw: bool) -> tuple[int, callable]:
        """(tensor to write, finish()) for output ``index``; finish transposes back to NCHW."""
        target = self.tensor(index)
        if not nchw:
            return target, lambda: None
        n, c, h, w = self.operand(index).dimensions
        staged = self.new(index, (n, h, w, c))
        return staged, lambda: self.emit("TRANSPOSE", [staged, self.int32([0, 3, 1, 2])], [target])


def tensor_type(operand) -> tuple[str, Quant | None]:
    """(TFLite type name, quantisation) of an NNAPI tensor operand."""
    try:
        type_name = TENSOR_TYPES[operand.type]
    except KeyError:
        raise Untranslatable(f"operand type {operand.type!r} has no LiteRT tensor type") from None
    if operand.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        cq = operand.channel_quant
        if cq is None:
            raise Untranslatable("per-channel operand without channel quantisation")
        return type_name, Quant(tuple(cq.scales), (0,) * len(cq.scales), cq.channel_dim)
    if operand.type in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED) or \
            (operand.type == T.TENSOR_INT32 and operand.scale):
        return type_name, Quant((float(operand.scale),), (int(operand.zero_point),))
    return type_name, None


#: Tensor types LiteRT computes as NNAPI does, by family.
F32 = frozenset({T.TENSOR_FLOAT32})
Q8 = frozenset({T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED})
ANY = F32 | Q8


def check_types(w: Writer, op, allowed, inputs: int = 1) -> None:
    """The first ``inputs`` inputs and every output have a type in ``allowed``, and one type."""
    types = {w.operand(i).type for i in (*op.inputs[:inputs], *op.outputs)}
    if len(types) != 1 or not types <= allowed:
        raise Untranslatable(f"{op.type.name} on {sorted(t.name for t in types)}")


def layout(w: Writer, op, position: int) -> bool:
    return bool(w.scalar(op.inputs[position])) if len(op.inputs) > position else False
