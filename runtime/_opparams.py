"""Internal: the names NNAPI gives the scalar parameters of an operation, for graph labels.

``NeuralNetworks.h`` documents each operation's inputs by position; the same operation
may take its padding explicitly (four pads) or implicitly (a padding code), told apart
by the input count and, where counts collide, by an operand's type (AOSP's
``Conv2DOperation`` does the same). :func:`describe` turns the inline values of one
operation into ``stride 2x2``, ``padding SAME``, ``fuse RELU6``...; positions it has no
name for are returned unnamed. :func:`input_name` names one input, a weight for instance
(``filter``, ``bias``, ``paddings``), as ``NeuralNetworks.h`` does, and an input the header
does not name ``input<position>`` (its ``input0``, ``input1``).

Example:
    >>> describe("CONV_2D", [OperandType.TENSOR_FLOAT32] * 3 + [OperandType.INT32] * 4,
    ...          {3: 1, 4: 2, 5: 2, 6: 3})
    ([(3, 'padding SAME'), (4, 'stride 2x2'), (6, 'fuse RELU6')], [])
    >>> input_name("CONV_2D", [], 1), input_name("ADD", [], 1)
    ('filter', 'input1')
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from nnscope.runtime.hal.types import FuseCode, OperandType, PaddingCode

#: ``(label, positions)``: one position, or two (width, height) shown as ``WxH``, or
#: four explicit pads (left, right, top, bottom).
Layout = tuple[tuple[str, tuple[int, ...]], ...]

_PADS = ("pad", (3, 4, 5, 6))
_CONV_EXPLICIT = (_PADS, ("stride", (7, 8)), ("fuse", (9,)), ("layout", (10,)), ("dilation", (11, 12)))
_CONV_IMPLICIT = (("padding", (3,)), ("stride", (4, 5)), ("fuse", (6,)), ("layout", (7,)),
                  ("dilation", (8, 9)))
_DEPTHWISE_EXPLICIT = (_PADS, ("stride", (7, 8)), ("multiplier", (9,)), ("fuse", (10,)),
                       ("layout", (11,)), ("dilation", (12, 13)))
_DEPTHWISE_IMPLICIT = (("padding", (3,)), ("stride", (4, 5)), ("multiplier", (6,)), ("fuse", (7,)),
                       ("layout", (8,)), ("dilation", (9, 10)))
_POOL_EXPLICIT = (("pad", (1, 2, 3, 4)), ("stride", (5, 6)), ("filter", (7, 8)), ("fuse", (9,)),
                  ("layout", (10,)))
_POOL_IMPLICIT = (("padding", (1,)), ("stride", (2, 3)), ("filter", (4, 5)), ("fuse", (6,)),
                  ("layout", (7,)))
_TRANSPOSE_EXPLICIT = (_PADS, ("stride", (7, 8)), ("fuse", (9,)), ("layout", (10,)))
_TRANSPOSE_IMPLICIT = (("output shape", (3,)), ("padding", (4,)), ("stride", (5, 6)), ("fuse", (7,)),
                       ("layout", (8,)))
_FUSE_AT_2, _FUSE_AT_3 = (("fuse", (2,)),), (("fuse", (3,)),)
_CONV_TENSORS = {1: "filter", 2: "bias"}
_LSTM_TENSORS = dict(enumerate((
    "input-to-input weights", "input-to-forget weights", "input-to-cell weights",
    "input-to-output weights", "recurrent-to-input weights", "recurrent-to-forget weights",
    "recurrent-to-cell weights", "recurrent-to-output weights", "cell-to-input weights",
    "cell-to-forget weights", "cell-to-output weights", "input gate bias", "forget gate bias",
    "cell bias", "output gate bias", "projection weights", "projection bias",
    "output state in", "cell state in"), start=1))
#: The tensor inputs ``NeuralNetworks.h`` names, by operation and position.
_TENSOR_INPUTS = {
    "CONV_2D": _CONV_TENSORS, "DEPTHWISE_CONV_2D": _CONV_TENSORS,
    "GROUPED_CONV_2D": _CONV_TENSORS, "TRANSPOSE_CONV_2D": _CONV_TENSORS,
    "FULLY_CONNECTED": {1: "weights", 2: "bias"}, "PRELU": {1: "alpha"},
    "PAD": {1: "paddings"}, "PAD_V2": {1: "paddings", 2: "pad value"},
    "TRANSPOSE": {1: "perm"}, "TILE": {1: "multiples"}, "SQUEEZE": {1: "squeeze dims"},
    "SLICE": {1: "begin", 2: "size"},
    "STRIDED_SLICE": {1: "begin", 2: "end", 3: "strides", 4: "begin mask", 5: "end mask",
                      6: "shrink axis mask"},
    "GATHER": {1: "axis", 2: "indices"}, "BATCH_TO_SPACE_ND": {1: "block size"},
    "SPACE_TO_BATCH_ND": {1: "block size", 2: "paddings"},
    "EMBEDDING_LOOKUP": {0: "lookups", 1: "values"},
    "HASHTABLE_LOOKUP": {0: "lookups", 1: "keys", 2: "values"},
    "RNN": {1: "weights", 2: "recurrent weights", 3: "bias", 4: "hidden state in"},
    "SVDF": {1: "weights feature", 2: "weights time", 3: "bias", 4: "state in"},
    "LSTM": _LSTM_TENSORS,
}


def _layout(op_type: str, types: Sequence[OperandType]) -> Layout:
    """The parameter layout of ``op_type`` with inputs of ``types`` (empty when unknown)."""
    count = len(types)
    if op_type == "CONV_2D":  # 10 inputs: explicit, or implicit with layout and dilation
        explicit = count >= 10 and types[7] != OperandType.BOOL
        return _CONV_EXPLICIT if explicit else _CONV_IMPLICIT
    if op_type == "DEPTHWISE_CONV_2D":
        explicit = count >= 11 and types[8] != OperandType.BOOL
        return _DEPTHWISE_EXPLICIT if explicit else _DEPTHWISE_IMPLICIT
    if op_type in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"):
        return _POOL_EXPLICIT if count >= 10 else _POOL_IMPLICIT
    if op_type == "TRANSPOSE_CONV_2D":
        return _TRANSPOSE_EXPLICIT if count == 11 else _TRANSPOSE_IMPLICIT
    if op_type in ("ADD", "SUB", "MUL", "DIV"):
        return _FUSE_AT_2
    if op_type == "FULLY_CONNECTED":
        return _FUSE_AT_3
    if op_type == "SOFTMAX":
        return (("beta", (1,)), ("axis", (2,)))
    if op_type == "CONCATENATION":
        return (("axis", (count - 1,)),)
    if op_type == "RESHAPE":
        return (("shape", (1,)),)
    if op_type in ("MEAN", "REDUCE_SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"):
        return (("axes", (1,)), ("keep dims", (2,)))
    if op_type in ("L2_NORMALIZATION",):
        return (("axis", (1,)),)
    return ()


def _code(kind: type) -> Callable:
    def name(value) -> str:
        try:
            return kind(int(value)).name
        except (ValueError, TypeError):
            return str(value)
    return name


_NAMED = {"padding": _code(PaddingCode), "fuse": _code(FuseCode),
          "layout": lambda value: "NCHW" if value in (True, 1, "true", "1") else "NHWC"}


def describe(op_type: str, types: Sequence[OperandType],
             values: Mapping[int, object]) -> tuple[list[tuple[int, str]], list[int]]:
    """``([(first position, named parameter), ...], positions left unnamed)`` for the inline
    ``values`` (position -> value) of one operation whose inputs have ``types``. A pair or
    pad group is named only when all its positions are in ``values``."""
    named, used = [], set()
    for label, positions in _layout(op_type, types):
        if not all(p in values for p in positions):
            continue
        shown = [values[p] for p in positions]
        if len(positions) == 1:
            text = _NAMED.get(label, _plain)(shown[0])
        elif len(positions) == 2:
            text = "x".join(_plain(v) for v in shown)
        else:
            text = ",".join(_plain(v) for v in shown)
        named.append((positions[0], f"{label} {text}"))
        used.update(positions)
    return named, [p for p in values if p not in used]


def input_name(op_type: str, types: Sequence[OperandType], position: int) -> str:
    """The name ``NeuralNetworks.h`` gives input ``position`` of ``op_type`` (``filter``,
    ``bias``, ``stride``...), else ``input<position>``, as the header calls the rest."""
    name = _TENSOR_INPUTS.get(op_type, {}).get(position)
    if name is None:
        name = next((label for label, positions in _layout(op_type, types)
                     if positions == (position,)), None)
    return name or f"input{position}"


def _plain(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
