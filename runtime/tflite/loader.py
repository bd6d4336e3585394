"""``load_tflite``: a .tflite flatbuffer model as a HalModel plus its input/output names.

Operators are converted in file order (TFLite stores them topologically sorted). Every
operator without an NNAPI mapping is collected first, so the error names all of them.

Example:
    >>> model, inputs, outputs = load_tflite("face_detection_short_range.tflite")  # doctest: +SKIP
    >>> inputs, outputs                                                            # doctest: +SKIP
    (['input'], ['regressors', 'classificators'])
"""
from __future__ import annotations

import os

from runtime.hal.types import HalModel
from runtime.tflite._builder import GraphBuilder
from runtime.tflite._operators import CONVERTERS, UnsupportedOperator
from runtime.tflite._reader import TfliteGraph, read_graph


def load_tflite(path: str | os.PathLike) -> tuple[HalModel, list[str], list[str]]:
    """Load ``path`` into ``(model, input_names, output_names)``.

    Raises:
        ValueError: the file is not a TFLite model, or it uses operators (or operator options,
            such as a TANH fused activation) that have no NNAPI mapping; the message names them.
    """
    with open(path, "rb") as handle:
        data = handle.read()
    return convert_tflite(data, str(path))


def convert_tflite(data: bytes, label: str = "<bytes>") -> tuple[HalModel, list[str], list[str]]:
    """:func:`load_tflite` for an in-memory flatbuffer."""
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise ValueError(f"{label}: not a TFLite flatbuffer (no TFL3 identifier)")
    graph = read_graph(data)
    unsupported = sorted({op.name for op in graph.operators if op.name not in CONVERTERS})
    if unsupported:
        raise ValueError(f"{label}: unsupported TFLite operators: {', '.join(unsupported)}")
    builder = GraphBuilder(graph)
    problems = []
    for index, operator in enumerate(graph.operators):
        try:
            CONVERTERS[operator.name](builder, operator)
        except UnsupportedOperator as error:
            problems.append(f"operator {index}: {error}")
    if problems:
        raise ValueError(f"{label}: unsupported TFLite operator options: {'; '.join(problems)}")
    return builder.finish(), _names(graph, graph.inputs), _names(graph, graph.outputs)


def _names(graph: TfliteGraph, indexes) -> list[str]:
    return [graph.tensors[i].name for i in indexes]
