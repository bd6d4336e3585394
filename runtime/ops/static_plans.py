"""Whether an executor's per-operation plans depend only on the shapes of the model inputs.

When they do, :class:`~runtime.ops.executor.CpuExecutor` checks its plans (output sizes, the
memory budget) once per input signature instead of before every run.

Example:
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.hal.types import Operand, Operation, Subgraph
    >>> plans_follow_input_shapes(tiny_add().to_hal().main)
    True
    >>> x = Operand(OperandType.TENSOR_FLOAT32, (4,), lifetime=L.SUBGRAPH_INPUT)
    >>> shape = Operand(OperandType.TENSOR_INT32, (1,), lifetime=L.SUBGRAPH_INPUT)  # a value, read per run
    >>> y = Operand(OperandType.TENSOR_FLOAT32, (0,), lifetime=L.SUBGRAPH_OUTPUT)
    >>> plans_follow_input_shapes(Subgraph((x, shape, y), (Operation(OperationType.RESHAPE, (0, 1), (2,)),),
    ...                                    (0, 1), (2,)))
    False
"""
from __future__ import annotations

from nnscope.runtime.hal.types import SCALAR_TYPES, OperandLifetime as L, OperandType, OperationType
from nnscope.runtime.ops import control_flow

#: Operations whose output shapes follow from input values, not shapes.
_DATA_SHAPED = frozenset({OperationType.BOX_WITH_NMS_LIMIT, OperationType.GENERATE_PROPOSALS,
                          *control_flow.TYPES})
_VALUE_KNOWN = frozenset({L.CONSTANT_COPY, L.CONSTANT_REFERENCE, L.NO_VALUE})
_INT32 = OperandType.TENSOR_INT32  # a module global: Enum member access is slow on Python 3.11


def plans_follow_input_shapes(graph) -> bool:
    """True when every operation's output shapes and scratch follow from the shapes (and scalar
    values) of the graph's inputs: no data-shaped operation, and no computed or input
    TENSOR_INT32 (shapes, paddings, ...) and no computed scalar feeding an operation."""
    inputs, operands = set(graph.input_indexes), graph.operands
    for operation in graph.operations:
        if operation.type in _DATA_SHAPED:
            return False
        for index in operation.inputs:
            operand = operands[index]
            if operand.lifetime in _VALUE_KNOWN:
                continue
            if operand.type == _INT32 or (operand.type in SCALAR_TYPES and index not in inputs):
                return False
    return True
