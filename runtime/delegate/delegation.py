"""Decide where each operator of a .tflite model runs under the TFLite NNAPI delegate.

:func:`decide` validates every operator at a feature level (``validate``), drops those the
chosen devices cannot run (the ``supported`` callback: ``getSupportedOperations``, asked only
when devices were named, as the delegate asks only when told to avoid NNAPI's CPU), keeps at
most ``max_partitions`` partitions (``partition``), and returns the :class:`Delegation`:
per operator its verdict and step, and the steps in run order, each a delegated partition or
one CPU operator, with the tensors that cross into and out of it.

Example:
    >>> from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph
    >>> g = FlatbufferGraph()
    >>> x, y, z, w = (g.tensor(n, (1, 4), "FLOAT32") for n in "xyzw")
    >>> g.operator("RELU", [x], [y]); g.custom("MyOp", [y], [z]); g.operator("RELU", [z], [w])
    >>> g.inputs, g.outputs = [x], [w]
    >>> delegation = decide(g.serialize(), feature_level=30)
    >>> [(type(s).__name__, s.operators) for s in delegation.steps]
    [('Partition', (0,)), ('CpuOperator', (1,)), ('Partition', (2,))]
    >>> delegation.summary()
    '2 of 3 operators delegated, in 2 partitions'
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from nnscope.runtime.delegate import partition as partitioning
from nnscope.runtime.delegate.partition import Graph
from nnscope.runtime.delegate.validate import Category, Failure, Verdict, validate_operators
from nnscope.runtime.tflite._reader import TfliteGraph, read_graph
from nnscope.runtime.tflite.slicer import slice_model

#: The delegate's default ``max_number_delegated_partitions``.
DEFAULT_MAX_PARTITIONS = 3


@dataclass(frozen=True)
class Step:
    """Operators run together (``operators``, with the constant-only ``folded`` ones that feed
    them), the non-constant tensors they read from outside and the tensors they hand on."""

    operators: tuple[int, ...]
    folded: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    def slice(self, data: bytes) -> bytes:
        """This step as a .tflite model of its own (folded operators first)."""
        return slice_model(data, sorted(self.folded) + list(self.operators), self.inputs, self.outputs)


@dataclass(frozen=True)
class Partition(Step):
    """A delegated partition: one NNAPI model. ``number`` counts partitions from 0."""

    number: int = 0


@dataclass(frozen=True)
class CpuOperator(Step):
    """One operator left to LiteRT's CPU kernels."""


@dataclass(frozen=True)
class Delegation:
    """Where every operator goes: ``verdicts`` (one per operator, the reason for a CPU one),
    ``steps`` in run order, and the options it was decided with."""

    verdicts: tuple[Verdict, ...]
    steps: tuple[Step, ...]
    feature_level: int
    max_partitions: int
    folded: frozenset = frozenset()

    @property
    def partitions(self) -> list[Partition]:
        return [s for s in self.steps if isinstance(s, Partition)]

    def step_of(self, operator: int) -> Step | None:
        """The step running ``operator`` (for a folded one: the first step it feeds)."""
        for step in self.steps:
            if operator in step.operators or operator in step.folded:
                return step
        return None

    def delegated(self) -> list[int]:
        return [v.index for v in self.verdicts if isinstance(self.step_of(v.index), Partition)]

    def summary(self) -> str:
        count, total = len(self.delegated()), len(self.verdicts)
        parts = len(self.partitions)
        return (f"{count} of {total} operators delegated, in {parts} "
                f"partition{'s' if parts != 1 else ''}")


def decide(data: bytes, feature_level: int = 30, max_partitions: int = DEFAULT_MAX_PARTITIONS,
           supported: Callable[[bytes], bool] | None = None,
           graph: TfliteGraph | None = None, dynamic: Sequence[int] = ()) -> Delegation:
    """Where each operator of the .tflite ``data`` runs.

    Args:
        feature_level: the NNAPI feature level (Android API level) 27..30.
        max_partitions: at most this many delegated partitions, the largest kept (<= 0: all).
        supported: given a one-operator .tflite slice, whether the chosen devices run all of
            its NNAPI operations (``getSupportedOperations``); None when no device was named.
        dynamic: the tensors LiteRT sizes only when it runs: with any, TFLite does not apply
            the delegate (it takes static-sized tensors only) and every operator stays on the
            CPU.

    Raises:
        TfliteFormatError: a truncated or corrupt flatbuffer.
        ValueError: a feature level outside 27..30.
    """
    graph = graph or read_graph(data)
    verdicts = validate_operators(graph, feature_level)
    view = Graph.of(graph)
    accepted = {v.index for v in verdicts if v.supported}
    folded = partitioning.folded_operators(view, accepted, graph.outputs)
    nodes = accepted - folded
    if dynamic:
        name = graph.tensors[dynamic[0]].name
        verdicts = _refuse(verdicts, set(range(len(verdicts))), Category.DYNAMIC_TENSORS,
                           f"tensor {dynamic[0]} ({name}) is sized only when it runs; the "
                           f"delegate takes static-sized tensors only")
        nodes = set()
    elif supported is not None:
        refused = {i for i in nodes if not supported(_node(view, graph, i, folded).slice(data))}
        verdicts = _refuse(verdicts, refused, Category.NOT_SUPPORTED_BY_DEVICES,
                           "getSupportedOperations of the chosen devices says no")
        nodes -= refused
    nodes, dropped = partitioning.limit_partitions(view, nodes, max_partitions, folded)
    verdicts = _refuse(verdicts, dropped, Category.OVER_PARTITION_LIMIT,
                       f"its partition is not among the {max_partitions} largest")
    steps = _steps(view, graph, nodes, folded)
    return Delegation(tuple(verdicts), tuple(steps), feature_level, max_partitions, frozenset(folded))


def _refuse(verdicts: Sequence[Verdict], indexes: set[int], category: Category,
            message: str) -> list[Verdict]:
    return [replace(v, failures=(Failure(category, message),)) if v.index in indexes else v
            for v in verdicts]


def _steps(view: Graph, graph: TfliteGraph, nodes: set[int], folded: set[int]) -> list[Step]:
    steps: list[Step] = []
    number = 0
    for subset in partitioning.subsets(view, nodes, folded):
        if subset.delegated:
            steps.append(_step(Partition, view, graph, subset.operators, folded, number=number))
            number += 1
        else:
            steps.extend(_node(view, graph, i, folded) for i in subset.operators)
    return steps


def _node(view: Graph, graph: TfliteGraph, index: int, folded: set[int]) -> CpuOperator:
    return _step(CpuOperator, view, graph, (index,), folded)


def _step(kind, view: Graph, graph: TfliteGraph, operators, folded: set[int], **extra) -> Step:
    feeding = _feeding(view, operators, folded)
    inside = set(operators) | feeding
    written = {t for i in inside for t in view.outputs[i]}
    inputs = []
    for i in operators:
        inputs += [t for t in view.inputs[i] if t not in written and t not in view.constants]
    readers = {t for i in range(len(view.inputs)) if i not in inside for t in view.inputs[i]}
    outputs = [t for i in operators for t in view.outputs[i]
               if t in readers or t in graph.outputs]
    return kind(tuple(operators), tuple(sorted(feeding)), tuple(dict.fromkeys(inputs)),
                tuple(dict.fromkeys(outputs)), **extra)


def _feeding(view: Graph, operators, folded: set[int]) -> set[int]:
    """The folded operators whose results ``operators`` read, directly or through others."""
    producer = {t: i for i in folded for t in view.outputs[i]}
    found, pending = set(), [t for i in operators for t in view.inputs[i]]
    while pending:
        source = producer.get(pending.pop())
        if source is not None and source not in found:
            found.add(source)
            pending.extend(view.inputs[source])
    return found
