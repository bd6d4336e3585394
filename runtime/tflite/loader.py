"""``load_tflite``: a .tflite flatbuffer model as a HalModel plus its input/output names.

Operators are converted in file order (TFLite stores them topologically sorted); a hybrid
operator's int8/uint8 constant weights are dequantized to float32 first. Every
operator without an NNAPI form is collected first, so the one-line error names them all
(``m.tflite: operator 3 (CUSTOM 'foo') has no NNAPI form``); ``supported_operators()`` lists
the builtins that have one.

Example:
    >>> model, inputs, outputs = load_tflite("tests/data/models/face_detection_short_range.tflite")  # from a clone  # doctest: +SKIP
    >>> inputs, outputs  # of the model above  # doctest: +SKIP
    (['input'], ['regressors', 'classificators'])
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.tflite._translate import translate
    >>> model, inputs, outputs = convert_tflite(translate(tiny_add().to_hal()).flatbuffer)  # bytes, not a file
    >>> inputs, outputs, [operation.type.name for operation in model.main.operations]
    (['t0', 't1'], ['t3'], ['ADD'])
    >>> "CONV_2D" in supported_operators()
    True
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from nnscope.runtime.hal.types import HalModel, OperationType
from nnscope.runtime.ops import registry
from nnscope.runtime.ops.registry import OpValidationError
from nnscope.runtime.tflite._builder import GraphBuilder
from nnscope.runtime.tflite._operators import CONVERTERS, UnsupportedOperator
from nnscope.runtime.tflite._reader import TfliteGraph, read_graph
from nnscope.runtime.tflite._verify import TfliteFormatError

_NAMED_AT_MOST = 5


def supported_operators() -> list[str]:
    """The TFLite builtin operator names the loader maps to NNAPI operations."""
    return sorted(CONVERTERS)


def load_tflite(path: str | os.PathLike) -> tuple[HalModel, list[str], list[str]]:
    """Load ``path`` into ``(model, input_names, output_names)``.

    Raises:
        UnsupportedOperator: (a ValueError with ``result_code`` BAD_DATA) an operator, or one
            of its options (such as a TANH fused activation) or tensor types, has no NNAPI
            form; the message names each one with its index.
        TfliteFormatError: (a ValueError with ``result_code`` BAD_DATA) the file is not a
            TFLite model, or is truncated or corrupt: an offset or length outside the file, a
            reference to a tensor, buffer or operator code that does not exist, a constant that
            does not fill its shape, an operator without the inputs or options its kind reads.
    """
    with open(path, "rb") as handle:
        data = handle.read()
    return convert_tflite(data, str(path))


def convert_tflite(data: bytes, label: str = "<bytes>", feature_level: int | None = None
                   ) -> tuple[HalModel, list[str], list[str]]:
    """:func:`load_tflite` for an in-memory flatbuffer; with ``feature_level`` (an Android API
    level), an operator newer than it is built from older NNAPI operations where the NNAPI
    delegate builds it so (HARD_SWISH below 30), else the newest form of each."""
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise TfliteFormatError(f"{label}: not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        graph = read_graph(data)
    except ValueError as error:
        raise type(error)(f"{label}: {error}") from None
    builder = GraphBuilder(graph, feature_level)
    problems = []
    for index, operator in enumerate(graph.operators):
        try:
            problem = _lower(builder, index, operator)
        except TfliteFormatError as error:
            raise TfliteFormatError(f"{label}: {error}") from None
        if problem == _NO_FORM:
            problems.append(f"operator {index} ({operator.label}) has no NNAPI form")
        elif problem is not None:
            problems.append(f"operator {index} ({operator.label}): {problem} has no NNAPI form")
    if problems:
        raise UnsupportedOperator(f"{label}: {_first(problems)}")
    try:
        model = builder.finish()
    except UnsupportedOperator as error:
        raise UnsupportedOperator(f"{label}: a model input or output, {error}, has no NNAPI "
                                  "form") from None
    return model, _names(graph, graph.inputs), _names(graph, graph.outputs)


@dataclass(frozen=True)
class Lowering:
    """What one TFLite operator becomes in NNAPI: its operations with their operand types, or
    ``problem`` (why it has no NNAPI form, as :class:`UnsupportedOperator` words it)."""

    operations: tuple[OperationType, ...] = ()
    operand_types: tuple[frozenset, ...] = ()
    problem: str | None = None


def lower_operators(graph: TfliteGraph, feature_level: int | None = None) -> list[Lowering]:
    """Each operator of ``graph`` converted as :func:`convert_tflite` converts it (at
    ``feature_level``), in one pass: the NNAPI operations it becomes (none for a folded
    constant, several for a lowered operator) or why it has none. A file too corrupt for its
    operators raises as there."""
    builder, result = GraphBuilder(graph, feature_level), []
    for index, operator in enumerate(graph.operators):
        first = len(builder.operations)
        problem = _lower(builder, index, operator)
        if problem is not None:
            result.append(Lowering(problem=problem))
            continue
        emitted = builder.operations[first:]
        result.append(Lowering(tuple(op.type for op in emitted),
                               tuple(frozenset(builder.operands[i].type for i in (*op.inputs, *op.outputs))
                                     for op in emitted)))
    return result


_NO_FORM = "no NNAPI form"


def _lower(builder: GraphBuilder, index: int, operator) -> str | None:
    """Emit ``operator``'s NNAPI operations into ``builder``: None, or why it has no NNAPI
    form (:data:`_NO_FORM` for an operator with no converter; nothing is left emitted).

    Raises:
        TfliteFormatError: the operator lacks an input, dimension or option (a corrupt file).
    """
    if operator.name not in CONVERTERS:
        return _NO_FORM
    first = len(builder.operations)
    try:
        builder.fold_hybrid_weights(operator.inputs)
        CONVERTERS[operator.name](builder, operator)
        _validate(builder, first)
    except UnsupportedOperator as error:
        del builder.operations[first:]
        return str(error)
    except (IndexError, KeyError, AttributeError) as error:  # its inputs, shapes or options
        raise TfliteFormatError(f"operator {index} ({operator.label}) lacks an input, dimension "
                                f"or option {operator.name} has (corrupt file? "
                                f"{type(error).__name__}: {error})") from None
    return None


def _validate(builder: GraphBuilder, first: int) -> None:
    """Check the NNAPI operations just emitted against their signatures, so a type or rank
    NNAPI does not take is reported against the TFLite operator that produced it."""
    for operation in builder.operations[first:]:
        record = registry.get(operation.type)
        inputs = [builder.operands[i] for i in operation.inputs]
        outputs = [builder.operands[i] for i in operation.outputs]
        try:
            record.validate(inputs, outputs)
        except (OpValidationError, ValueError) as error:
            raise UnsupportedOperator(f"NNAPI {operation.type.name} ({error})") from None


def _first(problems: list[str]) -> str:
    named = "; ".join(problems[:_NAMED_AT_MOST])
    rest = len(problems) - _NAMED_AT_MOST
    return named + (f"; and {rest} more" if rest > 0 else "")


def _names(graph: TfliteGraph, indexes) -> list[str]:
    return [graph.tensors[i].name for i in indexes]
