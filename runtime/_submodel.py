"""Internal: cut a step's sub-model out of a ``HalModel`` (AOSP ``ExecutionStep::addOperation``
and ``finishStepModel``).

:func:`extract` takes the operations of one partition step (original indexes, in run order)
and returns a :class:`StepModel`: a ``HalModel`` holding only those operations, with its own
operand numbering (operands in order of first use), plus the original operand index of every
sub-model input and output so the runtime can route tensors between steps.

* Step inputs: model inputs and tensors produced outside the step (other steps' temporaries
  or model outputs) that the step reads. They become ``SUBGRAPH_INPUT``.
* Step outputs: model outputs produced here, and tensors produced here that an operation
  outside the step reads. They become ``SUBGRAPH_OUTPUT``.
* Constants: immediate values (pool -1) are copied into the sub-model's own
  ``operand_values``; pool references keep pointing at the same pool objects (only the pools
  the step uses, renumbered). A model with referenced subgraphs (IF/WHILE) keeps its values,
  pools and subgraphs unchanged, because those subgraphs point into them.
* Dimensions are never changed: an operand of unknown shape stays unknown.

Example:
    >>> from nnscope.runtime.builtin_models import conv_pad_chain
    >>> hal_model = conv_pad_chain(operations=3, size=4, channels=2).to_hal()  # CONV_2D, PAD, CONV_2D
    >>> step = extract(hal_model, [1, 2])
    >>> step.inputs, step.outputs      # original operand indexes: the first CONV_2D's output, the model's
    ((2,), (7,))
    >>> [operation.type.name for operation in step.model.main.operations]
    ['PAD', 'CONV_2D']
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

from nnscope.runtime.hal.types import DataLocation, HalModel, Operand, OperandLifetime as L, Subgraph

_ALIGN = 8
#: Lifetimes of operands whose value only exists at execution time.
_RUNTIME_VALUES = frozenset({L.SUBGRAPH_INPUT, L.SUBGRAPH_OUTPUT, L.TEMPORARY_VARIABLE})


@dataclass(frozen=True)
class StepModel:
    """A step's sub-model and how its arguments map to the original model.

    Attributes:
        model: The sub-model (``main`` has only the step's operations).
        inputs: Original operand index of each sub-model input, in sub-model input order.
        outputs: Original operand index of each sub-model output, in sub-model output order.
    """

    model: HalModel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def readers_of(graph: Subgraph) -> dict[int, set[int]]:
    """Operand index -> indexes of the operations that read it."""
    readers: dict[int, set[int]] = {}
    for index, operation in enumerate(graph.operations):
        for operand_index in operation.inputs:
            readers.setdefault(operand_index, set()).add(index)
    return readers


def step_interface(graph: Subgraph, operations: Sequence[int],
                   readers: Mapping[int, set[int]]) -> tuple[list[int], list[int]]:
    """(step inputs, step outputs) as original operand indexes, in order of first use."""
    chosen = set(operations)
    produced = {o for i in operations for o in graph.operations[i].outputs}
    model_outputs = set(graph.output_indexes)
    inputs: list[int] = []
    outputs: list[int] = []
    for index in operations:
        for operand_index in graph.operations[index].inputs:
            if (operand_index not in produced and operand_index not in inputs
                    and graph.operands[operand_index].lifetime in _RUNTIME_VALUES):
                inputs.append(operand_index)
        for operand_index in graph.operations[index].outputs:
            read_elsewhere = bool(readers.get(operand_index, set()) - chosen)
            if (operand_index in model_outputs or read_elsewhere) and operand_index not in outputs:
                outputs.append(operand_index)
    return inputs, outputs


class _Constants:
    """The sub-model's own value blob and pool list, filled as constants are met."""

    def __init__(self, model: HalModel):
        self.model = model
        self.shared = bool(model.referenced)  # referenced subgraphs point into values/pools
        self.values = bytearray()
        self.pools: list = []
        self._pool_index: dict[int, int] = {}

    def relocate(self, operand: Operand) -> Operand:
        loc = operand.location
        if self.shared or loc is None or operand.lifetime not in (L.CONSTANT_COPY,
                                                                   L.CONSTANT_REFERENCE):
            return operand
        if loc.pool_index < 0:
            data = self.model.operand_values[loc.offset:loc.offset + loc.length]
            self.values.extend(b"\0" * (-len(self.values) % _ALIGN))
            new = DataLocation(-1, len(self.values), loc.length)
            self.values.extend(data)
        else:
            new = DataLocation(self._pool(loc.pool_index), loc.offset, loc.length)
        return dataclasses.replace(operand, location=new)

    def _pool(self, original: int) -> int:
        if original not in self._pool_index:
            self._pool_index[original] = len(self.pools)
            self.pools.append(self.model.pools[original])
        return self._pool_index[original]

    def finish(self, main: Subgraph) -> HalModel:
        if self.shared:
            return dataclasses.replace(self.model, main=main)
        return dataclasses.replace(self.model, main=main, referenced=(),
                                   operand_values=bytes(self.values), pools=tuple(self.pools))


def _operands_in_use_order(graph: Subgraph, operations: Sequence[int]) -> list[int]:
    order: dict[int, None] = {}
    for index in operations:
        operation = graph.operations[index]
        for operand_index in (*operation.inputs, *operation.outputs):
            order.setdefault(operand_index, None)
    return list(order)


def _rewrite(operand: Operand, role: L | None, constants: _Constants) -> Operand:
    if role is not None:
        return dataclasses.replace(operand, lifetime=role, location=None)
    if operand.lifetime in (L.SUBGRAPH_INPUT, L.SUBGRAPH_OUTPUT):
        return dataclasses.replace(operand, lifetime=L.TEMPORARY_VARIABLE, location=None)
    return constants.relocate(operand)


def extract(model: HalModel, operations: Sequence[int],
            readers: Mapping[int, set[int]] | None = None) -> StepModel:
    """The sub-model running ``operations`` (original indexes, already in run order).

    Args:
        model: The whole model.
        operations: The step's operations; each one's inputs must be model inputs, constants,
            or produced earlier in this list or by operations outside it.
        readers: :func:`readers_of` ``(model.main)``, to share the work across steps.
    """
    graph = model.main
    readers = readers_of(graph) if readers is None else readers
    inputs, outputs = step_interface(graph, operations, readers)
    used = _operands_in_use_order(graph, operations)
    number = {old: new for new, old in enumerate(used)}
    roles = {**{o: L.SUBGRAPH_INPUT for o in inputs}, **{o: L.SUBGRAPH_OUTPUT for o in outputs}}
    constants = _Constants(model)
    operands = tuple(_rewrite(graph.operands[o], roles.get(o), constants) for o in used)
    ops = tuple(dataclasses.replace(graph.operations[i],
                                    inputs=tuple(number[o] for o in graph.operations[i].inputs),
                                    outputs=tuple(number[o] for o in graph.operations[i].outputs))
                for i in operations)
    main = Subgraph(operands, ops, tuple(number[o] for o in inputs),
                    tuple(number[o] for o in outputs))
    return StepModel(constants.finish(main), tuple(inputs), tuple(outputs))
