"""Run a compiled model on numpy arrays through the public Execution API.

Output buffers are sized from the model's output operands; outputs of unknown shape get a
guess, and on OUTPUT_INSUFFICIENT_SIZE the execution is redone with the shapes reported by
``get_output_operand_dimensions`` (the NNAPI dynamic-output protocol).

Example:
    >>> outputs = compute_arrays(compilation, [image])   # doctest: +SKIP
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from runtime.api import NnError, ResultCode
from runtime.compilation import Compilation
from runtime.execution import Execution
from runtime.hal.types import is_scalar, numpy_dtype

_GUESS_ELEMENTS = 1024


def _output_buffers(compilation: Compilation, shapes) -> list[np.ndarray]:
    graph = compilation.model.to_hal().main
    buffers = []
    for position, index in enumerate(graph.output_indexes):
        operand = graph.operands[index]
        dims = shapes[position] if shapes else operand.dimensions
        dtype = numpy_dtype(operand.type)
        if is_scalar(operand.type):
            buffers.append(np.zeros(1, dtype))  # e.g. RANK: one element (a 0-d array reads as an int)
        elif dims and 0 not in dims:
            buffers.append(np.zeros(dims, dtype))
        else:
            buffers.append(np.zeros(_GUESS_ELEMENTS, dtype))
    return buffers


def compute_arrays(compilation: Compilation, inputs: Sequence) -> list[np.ndarray]:
    """Run ``compilation`` on ``inputs`` (arrays or None for omitted); return the outputs."""
    outputs = _output_buffers(compilation, None)
    for attempt in range(2):
        execution = _bound(compilation, inputs, outputs)  # executions are single-use
        try:
            execution.compute()
            break
        except NnError as error:
            if error.code != ResultCode.OUTPUT_INSUFFICIENT_SIZE or attempt:
                raise
            shapes = [_dims(execution, i) for i in range(len(outputs))]
            outputs = _output_buffers(compilation, shapes)
    return [_shaped(execution, i, buffer) for i, buffer in enumerate(outputs)]


def _bound(compilation: Compilation, inputs: Sequence, outputs: Sequence[np.ndarray]) -> Execution:
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    for index, buffer in enumerate(outputs):
        execution.set_output(index, buffer)
    return execution


def _dims(execution: Execution, index: int) -> tuple[int, ...]:
    """The output's actual shape; () for a scalar (NNAPI has no dimensions to report)."""
    if execution.get_output_operand_rank(index) == 0:
        return ()
    return execution.get_output_operand_dimensions(index)


def _shaped(execution: Execution, index: int, buffer: np.ndarray) -> np.ndarray:
    dims = _dims(execution, index)
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    return buffer.reshape(-1)[:count].reshape(dims)
