"""Per-operator validation as the TFLite NNAPI delegate does it, at a feature level 27..30.

The delegate asks, for each operator of a .tflite model, whether NNAPI at the device's Android
version can run it, and gives each "no" a category (``NNAPIValidationFailureType`` in its
``nnapi_delegate_kernel.h``). :func:`validate_operators` answers the same question for
nnscope: an operator is delegated when

* its builtin has an NNAPI form in nnscope's loader (``runtime.tflite``, which maps what the
  delegate maps); otherwise it is an *unsupported operator* (custom operators, GELU, ...);
* the delegate's own per-operator rules pass (:data:`RULES`: types, ranks, operand values,
  a missing bias, hybrid weights, the Android version an operator needs); and
* every NNAPI operation and operand type the loader emits for it at the feature level exists
  there (27: Android 8.1, NNAPI 1.0; 28: 1.1; 29: 1.2; 30: 1.3). The loader builds the
  model for the level: an operator the delegate builds from older operations below a level
  is built so (HARD_SWISH below 30: MUL, MUL, MUL, ADD). Below 30, an int8 tensor counts as
  the type the delegate passes it as (``int8``: uint8 for the operators it converts).

A verdict lists every failure (the delegate collects them all), the first being the one the
report shows, and a note when the loader lowers the operator into several NNAPI operations.

Example:
    >>> from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph
    >>> from nnscope.runtime.tflite._reader import read_graph
    >>> g = FlatbufferGraph()
    >>> x, y = g.tensor("x", (1, 4), "FLOAT32"), g.tensor("y", (1, 4), "FLOAT32")
    >>> g.operator("ABS", [x], [y]); g.inputs, g.outputs = [x], [y]
    >>> graph = read_graph(g.serialize())
    >>> [v.reason for v in validate_operators(graph, 30)], [v.reason for v in validate_operators(graph, 28)]
    ([''], ['needs a later Android version: ABS needs Android 10 (API 29)'])
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Callable

from nnscope.runtime.delegate.int8 import SIGNED_INT8_LEVEL, int8_operand_type
from nnscope.runtime.hal.types import OperandType, OperationType
from nnscope.runtime.tflite.loader import Lowering, lower_operators
from nnscope.runtime.tflite._reader import TfliteGraph, TfliteOperator

#: The feature levels (Android API levels) the delegate knows: NNAPI 1.0 to 1.3.
FEATURE_LEVELS = (27, 28, 29, 30)
ANDROID = {27: "Android 8.1", 28: "Android 9", 29: "Android 10", 30: "Android 11"}


class Category(enum.IntEnum):
    """Why an operator stays on the CPU: the delegate's ``NNAPIValidationFailureType`` values,
    then nnscope's placement reasons (the devices, the partition limit, a graph with
    dynamic-sized tensors, to which TFLite does not apply the delegate at all)."""

    UNSUPPORTED_OPERATOR = 0
    UNSUPPORTED_ANDROID_VERSION = 1
    UNSUPPORTED_OPERATOR_VERSION = 2
    UNSUPPORTED_INPUT_TYPE = 3
    NOT_RESTRICTED_SCALE_COMPLIANT = 4
    UNSUPPORTED_OUTPUT_TYPE = 5
    UNSUPPORTED_OPERAND_SIZE = 6
    UNSUPPORTED_OPERAND_VALUE = 7
    UNSUPPORTED_HYBRID_OPERATOR = 8
    UNSUPPORTED_QUANTIZATION_TYPE = 9
    MISSING_REQUIRED_OPERAND = 10
    UNSUPPORTED_OPERAND_RANK = 11
    INPUT_TENSOR_SHOULD_HAVE_CONSTANT_SHAPE = 12
    UNSUPPORTED_OPERATOR_VARIANT = 13
    NO_ACTIVATION_EXPECTED = 14
    UNSUPPORTED_QUANTIZATION_PARAMETERS = 15
    NOT_SUPPORTED_BY_DEVICES = 100
    OVER_PARTITION_LIMIT = 101
    DYNAMIC_TENSORS = 102

    @property
    def words(self) -> str:
        return _WORDS.get(self, self.name.lower().replace("_", " "))


_WORDS = {Category.UNSUPPORTED_OPERATOR: "unsupported operator",
          Category.UNSUPPORTED_ANDROID_VERSION: "needs a later Android version",
          Category.UNSUPPORTED_INPUT_TYPE: "unsupported input type",
          Category.UNSUPPORTED_OUTPUT_TYPE: "unsupported output type",
          Category.UNSUPPORTED_OPERAND_VALUE: "unsupported operand value",
          Category.UNSUPPORTED_HYBRID_OPERATOR: "hybrid operator",
          Category.UNSUPPORTED_QUANTIZATION_TYPE: "unsupported quantization",
          Category.MISSING_REQUIRED_OPERAND: "missing required operand",
          Category.UNSUPPORTED_OPERAND_RANK: "unsupported rank",
          Category.NOT_SUPPORTED_BY_DEVICES: "not supported by the chosen devices",
          Category.OVER_PARTITION_LIMIT: "over the partition limit",
          Category.DYNAMIC_TENSORS: "the graph has dynamic-sized tensors"}


@dataclass(frozen=True)
class Failure:
    category: Category
    message: str


@dataclass(frozen=True)
class Verdict:
    """One operator's answer: ``failures`` empty when NNAPI can take it; ``note`` says how
    the loader lowers it; ``operations`` are the NNAPI operations it becomes."""

    index: int
    operator: str
    failures: tuple[Failure, ...] = ()
    note: str = ""
    operations: tuple[str, ...] = ()

    @property
    def supported(self) -> bool:
        return not self.failures

    @property
    def category(self) -> Category | None:
        return self.failures[0].category if self.failures else None

    @property
    def reason(self) -> str:
        """The first failure in words: ``<category>: <message>`` ('' when supported)."""
        if not self.failures:
            return ""
        first = self.failures[0]
        return f"{first.category.words}: {first.message}"


# --------------------------------------------------------------------------- rule context
@dataclass
class _Check:
    """What a rule sees: the graph, the operator, the level; failures collect in order."""

    graph: TfliteGraph
    op: TfliteOperator
    level: int
    failures: list = field(default_factory=list)

    def expect(self, condition: bool, category: Category, message: str) -> bool:
        if not condition:
            self.failures.append(Failure(category, message))
        return bool(condition)

    def tensor(self, position: int, outputs: bool = False):
        indexes = self.op.outputs if outputs else self.op.inputs
        if position >= len(indexes) or indexes[position] < 0:
            return None
        return self.graph.tensors[indexes[position]]

    def type(self, position: int = 0, outputs: bool = False) -> str | None:
        tensor = self.tensor(position, outputs)
        return None if tensor is None else tensor.type_name

    def rank(self, position: int = 0) -> int:
        tensor = self.tensor(position)
        return len(tensor.shape) if tensor is not None else 0

    def constant(self, position: int) -> bool:
        tensor = self.tensor(position)
        return tensor is not None and tensor.data is not None

    def option(self, name: str, default=0):
        options = self.op.options
        return getattr(options, name)() if options is not None and hasattr(options, name) else default

    def min_level(self, level: int) -> None:
        self.expect(self.level >= level, Category.UNSUPPORTED_ANDROID_VERSION,
                    f"{self.op.name} needs {ANDROID[level]} (API {level})")

    def input_type_in(self, *types: str) -> bool:
        return self.expect(self.type(0) in types, Category.UNSUPPORTED_INPUT_TYPE,
                           f"{self.op.name} takes {', '.join(types)}, not {self.type(0)}")

    def hybrid(self, weights: int = 1) -> bool:
        """A float activation with quantized constant weights (the delegate's IsHybridOperator)."""
        return self.type(0) in _FLOAT and self.type(weights) in _QUANT8 and self.constant(weights)


_FLOAT = ("FLOAT32", "FLOAT16")
_QUANT8 = ("UINT8", "INT8")
_FLOAT_OR_QUANT8 = ("FLOAT32", "UINT8", "INT8")


def _int8_from_api_30(c: _Check, position: int = 0, outputs: bool = False) -> None:
    """An operator the delegate does not convert takes int8 here only from API 30."""
    if c.level >= SIGNED_INT8_LEVEL:
        return
    where = "output" if outputs else "input"
    c.expect(c.type(position, outputs) != "INT8",
             Category.UNSUPPORTED_OUTPUT_TYPE if outputs else Category.UNSUPPORTED_INPUT_TYPE,
             f"an int8 {where} of {c.op.name} needs {ANDROID[SIGNED_INT8_LEVEL]} "
             f"(API {SIGNED_INT8_LEVEL})")


# --------------------------------------------------------------------------- the rules
def _float_or_quant8(c: _Check) -> None:
    c.input_type_in(*_FLOAT_OR_QUANT8)


def _add_mul(c: _Check) -> None:
    c.input_type_in(*_FLOAT_OR_QUANT8, *(("INT32",) if c.level >= 30 else ()))
    if c.type(0) == "INT32":
        c.expect(c.option("FusedActivationFunction") == 0, Category.NO_ACTIVATION_EXPECTED,
                 "no fused activation on int32")


def _sub(c: _Check) -> None:
    t = c.type(0)
    c.expect((t in _FLOAT and c.level >= 28) or (t in _QUANT8 and c.level >= 29) or
             (t == "INT32" and c.level >= 30), Category.UNSUPPORTED_INPUT_TYPE,
             f"SUB on {t} is not in NNAPI at API {c.level}")
    c.expect(c.rank(0) <= 4 and c.rank(1) <= 4, Category.UNSUPPORTED_OPERAND_RANK,
             "input rank must be <= 4")


def _div(c: _Check) -> None:
    c.min_level(28)
    c.expect(c.type(0) == "FLOAT32", Category.UNSUPPORTED_INPUT_TYPE,
             f"NNAPI divides only float32, not {c.type(0)}")


def _conv_2d(c: _Check) -> None:
    if c.level < 29:
        c.expect(not c.hybrid(), Category.UNSUPPORTED_HYBRID_OPERATOR,
                 "float input with quantized weights needs Android 10 (API 29)")
        c.input_type_in("FLOAT32", "UINT8")
        filt = c.tensor(1)
        c.expect(filt is None or len(filt.scales) <= 1, Category.UNSUPPORTED_QUANTIZATION_TYPE,
                 "per-channel quantized filter needs Android 10 (API 29)")
    c.expect(len(c.op.inputs) == 3, Category.MISSING_REQUIRED_OPERAND, "CONV_2D without a bias")
    if c.option("DilationWFactor", 1) != 1 or c.option("DilationHFactor", 1) != 1:
        c.expect(c.level >= 29, Category.UNSUPPORTED_OPERAND_VALUE,
                 "dilated CONV_2D needs Android 10 (API 29)")


def _depthwise(c: _Check) -> None:
    if c.level < 29:
        c.input_type_in("FLOAT32", "UINT8")
        c.expect(c.option("DilationWFactor", 1) == 1 and c.option("DilationHFactor", 1) == 1,
                 Category.UNSUPPORTED_OPERAND_VALUE, "dilation needs Android 10 (API 29)")


def _fully_connected(c: _Check) -> None:
    c.expect(c.type(0, outputs=True) != "INT16", Category.UNSUPPORTED_OUTPUT_TYPE,
             "int16 output")
    if c.level < 29:
        c.expect(not c.hybrid(), Category.UNSUPPORTED_HYBRID_OPERATOR,
                 "float input with quantized weights needs Android 10 (API 29)")
        c.input_type_in("FLOAT32", "UINT8")
    if c.option("KeepNumDims", False):
        c.min_level(30)


def _softmax(c: _Check) -> None:
    _float_or_quant8(c)
    c.expect(c.type(0, outputs=True) in _FLOAT_OR_QUANT8, Category.UNSUPPORTED_OUTPUT_TYPE,
             f"output of type {c.type(0, outputs=True)}")
    c.expect(c.rank(0) <= 4, Category.UNSUPPORTED_OPERAND_RANK,
             f"input rank {c.rank(0)}, NNAPI takes at most 4")
    if c.level < 29:
        c.expect(c.rank(0) in (2, 4), Category.UNSUPPORTED_OPERAND_RANK,
                 "before API 29 only 2-D and 4-D inputs")


def _concatenation(c: _Check) -> None:
    c.expect(c.option("FusedActivationFunction") == 0, Category.NO_ACTIVATION_EXPECTED,
             "no fused activation")
    c.expect(c.rank(0) <= 4, Category.UNSUPPORTED_OPERAND_RANK,
             f"input rank {c.rank(0)}, NNAPI takes at most 4")
    c.input_type_in("FLOAT16", *_FLOAT_OR_QUANT8)


def _reshape(c: _Check) -> None:
    _float_or_quant8(c)
    if len(c.op.inputs) >= 2 and c.op.inputs[1] >= 0:
        c.expect(c.constant(1), Category.INPUT_TENSOR_SHOULD_HAVE_CONSTANT_SHAPE,
                 "the shape input must be constant")


def _resize(c: _Check) -> None:
    if c.op.name == "RESIZE_NEAREST_NEIGHBOR":
        c.min_level(29)
    c.expect(c.rank(0) == 4, Category.UNSUPPORTED_OPERAND_RANK, "input must have rank 4")
    _float_or_quant8(c)
    if c.op.name == "RESIZE_BILINEAR" and c.level < 29:
        _bilinear_before_api_29(c)
    c.expect(c.constant(1), Category.INPUT_TENSOR_SHOULD_HAVE_CONSTANT_SHAPE,
             "the size input must be constant")
    if c.level <= 29:
        c.expect(not c.option("AlignCorners", False), Category.UNSUPPORTED_OPERAND_VALUE,
                 "align_corners needs Android 11 (API 30)")
        c.expect(not c.option("HalfPixelCenters", False), Category.UNSUPPORTED_OPERAND_VALUE,
                 "half_pixel_centers needs Android 11 (API 30)")


def _bilinear_before_api_29(c: _Check) -> None:
    c.expect(c.type(0) == "FLOAT32", Category.UNSUPPORTED_INPUT_TYPE,
             f"before API 29 NNAPI resizes float32 only, not {c.type(0)}")
    out = c.tensor(0, outputs=True)
    c.expect(out is None or len(out.shape) != 4 or out.shape[1] == out.shape[2],
             Category.UNSUPPORTED_OPERAND_VALUE, "before API 29 the output must be square")


def _pad(c: _Check) -> None:
    _float_or_quant8(c)
    c.min_level(28)
    tensor = c.tensor(0)
    c.expect(tensor is None or 0 not in tensor.shape, Category.UNSUPPORTED_OPERAND_VALUE,
             "an input with no elements")
    if len(c.op.inputs) == 3:
        c.expect(c.level >= 29, Category.UNSUPPORTED_OPERATOR_VARIANT,
                 "a padding value needs Android 10 (API 29)")
    elif c.level < 29:
        c.expect(c.type(0) == "FLOAT32", Category.UNSUPPORTED_INPUT_TYPE,
                 f"before API 29 NNAPI pads float32 only, not {c.type(0)}")


def _batch_to_space(c: _Check) -> None:
    c.min_level(28)
    crops = c.tensor(2)
    c.expect(crops is not None and crops.data is not None and not any(crops.array().reshape(-1)),
             Category.UNSUPPORTED_OPERAND_VALUE, "all crops must be 0")


def _transpose(c: _Check) -> None:
    c.min_level(28)
    c.expect(c.constant(1), Category.INPUT_TENSOR_SHOULD_HAVE_CONSTANT_SHAPE,
             "the permutation must be constant")


def _mean(c: _Check) -> None:
    c.min_level(28)
    c.expect(c.type(0) == "FLOAT32" or (c.level >= 29 and c.type(0) in _QUANT8),
             Category.UNSUPPORTED_INPUT_TYPE, f"MEAN on {c.type(0)}")
    out = c.tensor(0, outputs=True)
    c.expect(out is not None and len(out.shape) > 0, Category.UNSUPPORTED_OUTPUT_TYPE,
             "a scalar output")
    source = c.tensor(0)
    c.expect(out is None or source is None or (source.scales == out.scales and
                                               source.zero_points == out.zero_points),
             Category.UNSUPPORTED_OUTPUT_TYPE, "input and output quantization differ")


def _arg_min_max(c: _Check) -> None:
    c.min_level(29)
    c.input_type_in("FLOAT16", "FLOAT32", "INT32", "UINT8", "INT8")
    c.expect(c.option("OutputType", 2) == 2, Category.UNSUPPORTED_OUTPUT_TYPE,
             "NNAPI gives int32 indexes only")


def _gather(c: _Check) -> None:
    c.min_level(29)
    c.expect(c.type(1) == "INT32", Category.UNSUPPORTED_INPUT_TYPE, "positions must be int32")
    c.expect(c.rank(1) != 0, Category.UNSUPPORTED_OPERAND_RANK, "scalar positions")


def _not_hybrid(c: _Check) -> None:
    c.min_level(29)
    c.expect(not c.hybrid(2 if c.op.name.startswith("UNIDIRECTIONAL_SEQUENCE_RNN") else 4),
             Category.UNSUPPORTED_HYBRID_OPERATOR, "the hybrid form of this operator")


def _lstm(c: _Check) -> None:
    c.min_level(28)
    c.expect(c.level >= 29 or not c.hybrid(4), Category.UNSUPPORTED_HYBRID_OPERATOR,
             "hybrid LSTM needs Android 10 (API 29)")


def _tanh(c: _Check) -> None:
    c.expect(c.type(0) in _FLOAT or (c.type(0) in _QUANT8 and c.level >= 29),
             Category.UNSUPPORTED_INPUT_TYPE, f"TANH on {c.type(0)}")


def _dequantize(c: _Check) -> None:
    if c.type(0) == "FLOAT16":
        return  # float16 weights become float32 constants (or an NNAPI DEQUANTIZE at API 30)
    c.input_type_in("UINT8", *(("INT8",) if c.level >= 29 else ()))
    source = c.tensor(0)
    if c.level == 29 and c.type(0) == "INT8" and source is not None:
        c.expect(not any(source.zero_points), Category.UNSUPPORTED_INPUT_TYPE,
                 "at API 29 NNAPI dequantizes int8 with zero point 0 only (TENSOR_QUANT8_SYMM)")


def _quantize(c: _Check) -> None:
    c.min_level(29)
    c.expect(c.type(0) == "FLOAT32" or c.type(0) in _QUANT8, Category.UNSUPPORTED_INPUT_TYPE,
             f"QUANTIZE of {c.type(0)}")
    c.expect(c.type(0, outputs=True) in _QUANT8, Category.UNSUPPORTED_OUTPUT_TYPE,
             f"QUANTIZE to {c.type(0, outputs=True)}")
    _int8_from_api_30(c, 0, outputs=True)


def _split(c: _Check) -> None:
    c.min_level(29)
    c.expect(c.type(1) in ("FLOAT32", "UINT8", "INT8", "INT32"), Category.UNSUPPORTED_INPUT_TYPE,
             f"SPLIT of {c.type(1)}")
    _int8_from_api_30(c, 1)


def _cast(c: _Check) -> None:
    c.min_level(29)
    _int8_from_api_30(c, 0)
    _int8_from_api_30(c, 0, outputs=True)


def _no_delegate_form(c: _Check) -> None:
    """Builtins the loader folds or lowers but the delegate does not map (SHAPE)."""
    c.failures.append(Failure(Category.UNSUPPORTED_OPERATOR,
                              f"the NNAPI delegate does not map {c.op.name}"))


def _float_from(level: int) -> Callable[[_Check], None]:
    def rule(c: _Check) -> None:
        c.min_level(level)
        c.input_type_in("FLOAT32")
    return rule


def _from(level: int) -> Callable[[_Check], None]:
    def rule(c: _Check) -> None:
        c.min_level(level)
    return rule


#: Builtin -> the delegate's rule for it (what is not here has only the generic checks).
RULES: dict[str, Callable[[_Check], None]] = {
    "ADD": _add_mul, "MUL": _add_mul, "SUB": _sub, "DIV": _div,
    "CONV_2D": _conv_2d, "DEPTHWISE_CONV_2D": _depthwise, "FULLY_CONNECTED": _fully_connected,
    "AVERAGE_POOL_2D": _float_or_quant8, "MAX_POOL_2D": _float_or_quant8,
    "L2_POOL_2D": _float_from(27), "RELU": _float_or_quant8, "RELU6": _float_or_quant8,
    "RELU_N1_TO_1": _float_or_quant8, "LOGISTIC": _float_or_quant8, "HARD_SWISH": _float_or_quant8,
    "TANH": _tanh, "SOFTMAX": _softmax, "CONCATENATION": _concatenation, "RESHAPE": _reshape,
    "RESIZE_BILINEAR": _resize, "RESIZE_NEAREST_NEIGHBOR": _resize, "PAD": _pad, "PADV2": _pad,
    "BATCH_TO_SPACE_ND": _batch_to_space, "SPACE_TO_BATCH_ND": _from(28),
    "STRIDED_SLICE": _from(28), "SQUEEZE": _from(28), "TRANSPOSE": _transpose, "MEAN": _mean,
    "ARG_MAX": _arg_min_max, "ARG_MIN": _arg_min_max, "GATHER": _gather,
    "ABS": _float_from(29), "EXP": _float_from(29), "LOG": _float_from(29),
    "RSQRT": _float_from(29), "SQRT": _float_from(29), "SIN": _float_from(29),
    "POW": _float_from(29), "SLICE": _from(29), "TRANSPOSE_CONV": _from(29),
    "MAXIMUM": _from(29), "MINIMUM": _from(29), "CAST": _cast, "PRELU": _from(29),
    "LEAKY_RELU": _from(29), "TILE": _from(29), "TOPK_V2": _from(29), "EXPAND_DIMS": _from(29),
    "SPLIT": _split, "LOGICAL_AND": _from(29), "LOGICAL_OR": _from(29),
    "LOGICAL_NOT": _from(29), "LESS": _from(28), "LESS_EQUAL": _from(28), "GREATER": _from(28),
    "GREATER_EQUAL": _from(28), "EQUAL": _from(28), "NOT_EQUAL": _from(28), "NEG": _from(28),
    "SELECT": _from(28), "UNIDIRECTIONAL_SEQUENCE_LSTM": _not_hybrid,
    "UNIDIRECTIONAL_SEQUENCE_RNN": _not_hybrid, "BIDIRECTIONAL_SEQUENCE_LSTM": _not_hybrid,
    "LSTM": _lstm, "DEQUANTIZE": _dequantize, "QUANTIZE": _quantize, "SHAPE": _no_delegate_form,
}


# --------------------------------------------------------------------------- NNAPI forms
def operation_level(operation: OperationType) -> int:
    """The feature level that introduced an NNAPI operation (by its code, as NNAPI numbers
    them: 0-28 NNAPI 1.0, 29-37 1.1, 38-94 1.2, 95 on 1.3)."""
    code = int(operation)
    return 27 if code < 29 else 28 if code < 38 else 29 if code < 95 else 30


_T = OperandType
#: Operand types newer than NNAPI 1.0: (feature level, category when missing).
_OPERAND_LEVELS = {_T.TENSOR_FLOAT16: (29, Category.UNSUPPORTED_INPUT_TYPE),
                   _T.TENSOR_BOOL8: (29, Category.UNSUPPORTED_INPUT_TYPE),
                   _T.TENSOR_QUANT16_SYMM: (29, Category.UNSUPPORTED_INPUT_TYPE),
                   _T.TENSOR_QUANT8_SYMM: (29, Category.UNSUPPORTED_INPUT_TYPE),
                   _T.TENSOR_QUANT8_SYMM_PER_CHANNEL: (29, Category.UNSUPPORTED_QUANTIZATION_TYPE),
                   _T.TENSOR_QUANT8_ASYMM_SIGNED: (30, Category.UNSUPPORTED_ANDROID_VERSION)}


def _form_failures(lowering: Lowering, level: int, int8_type: OperandType) -> list[Failure]:
    """What the loader's NNAPI form of the operator needs beyond ``level``, its int8 operands
    (TENSOR_QUANT8_ASYMM_SIGNED in the loader's form) taken as ``int8_type``."""
    failures = []
    for operation, types in zip(lowering.operations, lowering.operand_types):
        needed = operation_level(operation)
        if needed > level:
            failures.append(Failure(Category.UNSUPPORTED_ANDROID_VERSION,
                                    f"NNAPI {operation.name} needs {ANDROID[needed]} (API {needed})"))
        passed = {int8_type if t == _T.TENSOR_QUANT8_ASYMM_SIGNED else t for t in types}
        for operand_type in sorted(passed):
            needed, category = _OPERAND_LEVELS.get(operand_type, (27, None))
            if needed > level:
                failures.append(Failure(category, f"{operand_type.name} operands need "
                                                  f"{ANDROID[needed]} (API {needed})"
                                                  f"{_UNCONVERTED.get(operand_type, '')}"))
    return failures


#: Why an operand type is still missing below its level, where the delegate could convert it.
_UNCONVERTED = {_T.TENSOR_QUANT8_ASYMM_SIGNED: "; below it the NNAPI delegate passes int8 as "
                                               "uint8 only to the operators it lists"}


def _loader_failure(op: TfliteOperator, problem: str) -> Failure:
    if problem == "no NNAPI form":
        return Failure(Category.UNSUPPORTED_OPERATOR, f"{op.label} has no NNAPI form")
    return Failure(_loader_category(problem), f"{problem} has no NNAPI form")


def _loader_category(problem: str) -> Category:
    """The delegate's category of an NNAPI signature's refusal (``NNAPI OP (output 0: expected
    rank <= 4, got 5)``): a per-channel quantization, a rank, an output's or an input's type."""
    if "PER_CHANNEL" in problem:
        return Category.UNSUPPORTED_QUANTIZATION_TYPE
    if "expected rank" in problem:
        return Category.UNSUPPORTED_OPERAND_RANK
    if "type" in problem or re.search(r"expected TENSOR_\w+.*got TENSOR_", problem):
        return (Category.UNSUPPORTED_OUTPUT_TYPE if re.search(r"\(output \d+:", problem)
                else Category.UNSUPPORTED_INPUT_TYPE)
    return Category.UNSUPPORTED_OPERAND_VALUE


def _note(op: TfliteOperator, lowering: Lowering) -> str:
    if len(lowering.operations) > 1:
        names = ", ".join(o.name for o in lowering.operations)
        return f"lowered into {len(lowering.operations)} NNAPI operations ({names})"
    if not lowering.operations and lowering.problem is None:
        return "folded into a constant at load time"
    return ""


def validate_operator(graph: TfliteGraph, index: int, lowering: Lowering, level: int) -> Verdict:
    """The verdict on operator ``index`` at feature ``level`` (27..30)."""
    op = graph.operators[index]
    check = _Check(graph, op, level)
    if lowering.problem == "no NNAPI form":
        check.failures.append(_loader_failure(op, lowering.problem))
    else:
        rule = RULES.get(op.name)
        if rule is not None:
            rule(check)
        if lowering.problem is not None:
            check.failures.append(_loader_failure(op, lowering.problem))
        else:
            check.failures.extend(_form_failures(lowering, level,
                                                 int8_operand_type(graph, op, level)))
    return Verdict(index, op.label, _unique(check.failures), _note(op, lowering),
                   tuple(o.name for o in lowering.operations))


def _unique(failures: list[Failure]) -> tuple[Failure, ...]:
    return tuple(dict.fromkeys(failures))


def validate_operators(graph: TfliteGraph, level: int) -> list[Verdict]:
    """Every operator's verdict at feature ``level``.

    Raises:
        ValueError: ``level`` is not one of :data:`FEATURE_LEVELS`.
    """
    if level not in FEATURE_LEVELS:
        raise ValueError(f"feature level {level}: the NNAPI delegate knows "
                         f"{', '.join(map(str, FEATURE_LEVELS))}")
    lowerings = lower_operators(graph, level)
    return [validate_operator(graph, i, lowering, level) for i, lowering in enumerate(lowerings)]
