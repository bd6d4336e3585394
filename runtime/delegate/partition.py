"""Split a .tflite graph into delegated partitions and CPU operators, as TFLite does.

TFLite hands a delegate the operators it supports, then cuts the graph into *node subsets*:
it takes, in turn, every ready operator of one kind (delegated, then not, then delegated...)
until none is ready, so each subset only reads what earlier subsets wrote (TFLite's
``PartitionGraphIntoIndependentNodeSubsets``). The NNAPI delegate then keeps at most
``max_partitions`` delegated subsets, the ones with the most operators (ties: the earlier), and
gives the rest back to the CPU (``LimitDelegatedPartitions``); the graph is cut again.

Operators that compute from constants only (DEQUANTIZE of float16 weights, DENSIFY) are not
nodes here: each is *folded* into every consumer, in a partition and on the CPU alike, as the
loader folds them into constants.

Example:
    >>> graph = Graph(inputs=[(0,), (1,), (2,)], outputs=[(1,), (2,), (3,)], model_inputs=(0,),
    ...               constants=frozenset())
    >>> [(s.delegated, s.operators) for s in subsets(graph, delegated={0, 2})]
    [(True, (0,)), (False, (1,)), (True, (2,))]
    >>> [(s.delegated, s.operators) for s in subsets(graph, limit_partitions(graph, {0, 2}, 1)[0])]
    [(True, (0,)), (False, (1, 2))]
"""
from __future__ import annotations

from dataclasses import dataclass

from nnscope.runtime.tflite._reader import TfliteGraph


@dataclass(frozen=True)
class Graph:
    """The dependency view of a graph: each operator's input and output tensors; constants."""

    inputs: list
    outputs: list
    model_inputs: tuple[int, ...]
    constants: frozenset

    @classmethod
    def of(cls, graph: TfliteGraph) -> Graph:
        constants = frozenset(i for i, t in enumerate(graph.tensors) if t.data is not None)
        return cls([tuple(t for t in op.inputs if t >= 0) for op in graph.operators],
                   [op.outputs for op in graph.operators], graph.inputs, constants)


@dataclass(frozen=True)
class Subset:
    """A node subset: ``delegated`` (an NNAPI partition) or not (CPU operators), in run order."""

    delegated: bool
    operators: tuple[int, ...]


def folded_operators(graph: Graph, foldable: set[int], model_outputs) -> set[int]:
    """The operators of ``foldable`` that read only constants (or what such operators write)
    and write no model output: they become constants of their consumers."""
    known, folded = set(graph.constants), set()
    for index, (inputs, outputs) in enumerate(zip(graph.inputs, graph.outputs)):
        if index in foldable and all(t in known for t in inputs) and \
                not set(outputs) & set(model_outputs):
            folded.add(index)
            known.update(outputs)
    return folded


def subsets(graph: Graph, delegated: set[int], skip: set[int] = frozenset()) -> list[Subset]:
    """TFLite's node subsets of every operator not in ``skip``, in an order that runs."""
    producer = {t: i for i, outs in enumerate(graph.outputs) if i not in skip for t in outs}
    remaining = [i for i in range(len(graph.inputs)) if i not in skip]
    done: set[int] = set()
    result: list[Subset] = []
    kind, idle = bool(remaining) and remaining[0] in delegated, 0
    while remaining:
        taken = _take_ready(graph, remaining, producer, done, delegated, kind)
        idle = 0 if taken else idle + 1
        if taken:
            result.append(Subset(kind, tuple(taken)))
        elif idle == 2:
            raise ValueError("the graph has a cycle: no operator left can run")
        kind = not kind
    return result


def _take_ready(graph: Graph, remaining: list, producer: dict, done: set, delegated: set,
                kind: bool) -> list[int]:
    """Every operator of ``kind`` that becomes ready, in passes until none does."""
    taken, changed = [], True
    while changed:
        changed = False
        for index in list(remaining):
            if (index in delegated) != kind:
                continue
            if all(producer.get(t, -1) in done or t not in producer for t in graph.inputs[index]):
                taken.append(index)
                done.add(index)
                remaining.remove(index)
                changed = True
    return taken


def limit_partitions(graph: Graph, delegated: set[int], limit: int,
                     skip: set[int] = frozenset()) -> tuple[set[int], set[int]]:
    """(operators still delegated, operators given back) when at most ``limit`` partitions
    are kept, the largest first (``limit`` <= 0: no limit)."""
    partitions = [s for s in subsets(graph, delegated, skip) if s.delegated]
    if limit <= 0 or len(partitions) <= limit:
        return set(delegated), set()
    ranked = sorted(range(len(partitions)), key=lambda i: (-len(partitions[i].operators), i))
    kept = {op for i in ranked[:limit] for op in partitions[i].operators}
    return kept, {op for p in partitions for op in p.operators} - kept
