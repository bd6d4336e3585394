"""Whether an executor's per-operation plans depend only on the shapes of the model inputs.

When they do, :class:`~runtime.ops.executor.CpuExecutor` checks its plans (output sizes, the
memory budget) once per input signature instead of before every run.

Example:
    >>> plans_follow_input_shapes(model.main)       # doctest: +SKIP
    True
"""
from __future__ import annotations

from runtime.hal.types import OperandLifetime as L, OperandType, OperationType, is_scalar
from runtime.ops import control_flow

#: Operations whose output shapes follow from input values, not shapes.
_DATA_SHAPED = frozenset({OperationType.BOX_WITH_NMS_LIMIT, OperationType.GENERATE_PROPOSALS,
                          *control_flow.TYPES})


def plans_follow_input_shapes(graph) -> bool:
    """True when every operation's output shapes and scratch follow from the shapes (and scalar
    values) of the graph's inputs: no data-shaped operation, and no computed or input
    TENSOR_INT32 (shapes, paddings, ...) and no computed scalar feeding an operation."""
    inputs = set(graph.input_indexes)
    for operation in graph.operations:
        if operation.type in _DATA_SHAPED:
            return False
        for index in operation.inputs:
            operand = graph.operands[index]
            if operand.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE, L.NO_VALUE):
                continue
            if operand.type == OperandType.TENSOR_INT32 or (is_scalar(operand.type) and index not in inputs):
                return False
    return True
