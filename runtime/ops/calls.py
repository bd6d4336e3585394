"""The CPU executor's call table: one :class:`OperationCall` per operation of a subgraph.

Built once per executor (:func:`operation_calls`): each operation's registry record validated,
its kernel, operand indexes and records, its shape inference, the temporaries to free after
it, and the detail its kernel spans carry. An ``OperationCall`` is one call of one operation's
kernel; the plan's device steps (``runtime.plan``) are another concept.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import *
    >>> t = Operand(OperandType.TENSOR_FLOAT32, (1, 2), lifetime=OperandLifetime.SUBGRAPH_INPUT)
    >>> act = Operand(OperandType.INT32, lifetime=OperandLifetime.CONSTANT_COPY,
    ...               location=DataLocation(-1, 0, 4))
    >>> out = Operand(OperandType.TENSOR_FLOAT32, (1, 2), lifetime=OperandLifetime.SUBGRAPH_OUTPUT)
    >>> graph = Subgraph((t, t, act, out), (Operation(OperationType.ADD, (0, 1, 2), (3,)),),
    ...                  (0, 1), (3,))
    >>> [(c.index, c.kernel_name, c.span_detail) for c in operation_calls(graph, HalModel(graph))]
    [(0, 'addFloat32', 'addFloat32 #0')]
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from nnscope.runtime.hal.types import (HalModel, Operand, OperandLifetime as L, OperandType, Operation,
                               is_scalar, numpy_dtype)
from nnscope.runtime.ops import control_flow, registry
from nnscope.runtime.ops.registry import OpValidationError

_SUFFIX = {
    OperandType.TENSOR_FLOAT32: "Float32", OperandType.TENSOR_FLOAT16: "Float16",
    OperandType.TENSOR_QUANT8_ASYMM: "Quant8", OperandType.TENSOR_QUANT8_ASYMM_SIGNED: "Quant8Signed",
    OperandType.TENSOR_INT32: "Int32", OperandType.TENSOR_QUANT8_SYMM: "Quant8Symm",
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: "Quant8PerChannel",
    OperandType.TENSOR_QUANT16_SYMM: "Quant16Symm", OperandType.TENSOR_QUANT16_ASYMM: "Quant16",
    OperandType.TENSOR_BOOL8: "Bool8",
}
_KERNEL_NAMES: dict = {}  # (operation type, first input type) -> kernel name


class OperationCall(NamedTuple):
    """One operation of the subgraph, ready to call (see the module docstring)."""

    index: int
    operation: Operation
    execute: Any
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    input_operands: tuple[Operand, ...]
    output_operands: tuple[Operand, ...]
    frees: tuple[int, ...]
    kernel_name: str
    infer_shapes: Any  # the record's shape inference (None: outputs no larger than inputs)
    model_outputs: tuple[tuple[int, int, int], ...]  # (output slot, model output position, itemsize)
    span_detail: str  # the detail of this operation's kernel spans


def kernel_name(operation: Operation, operands: Sequence[Operand]) -> str:
    """AOSP-style kernel name, e.g. ``addFloat32`` or ``softmaxQuant8Signed``."""
    key = (operation.type, operands[operation.inputs[0]].type if operation.inputs else None)
    if key not in _KERNEL_NAMES:
        first, *rest = operation.type.name.lower().split("_")
        _KERNEL_NAMES[key] = first + "".join(w.capitalize() for w in rest) + _SUFFIX.get(key[1], "")
    return _KERNEL_NAMES[key]


def read_constant(model: HalModel, operand: Operand):
    """A constant operand's value: ndarray for tensors, Python scalar for scalar types."""
    loc = operand.location
    if loc is None:
        raise OpValidationError(f"constant operand of type {operand.type.name} has no location")
    buffer = model.operand_values if loc.pool_index < 0 else _pool_buffer(model, loc.pool_index)
    dtype = numpy_dtype(operand.type)
    count = loc.length // dtype.itemsize
    array = np.frombuffer(buffer, dtype=dtype, count=count, offset=loc.offset)
    if is_scalar(operand.type):
        return array[0].item()
    return array.reshape(operand.dimensions) if operand.dimensions else array


def _pool_buffer(model: HalModel, index: int):
    if index >= len(model.pools):
        raise OpValidationError(f"constant refers to pool {index}, model has {len(model.pools)}")
    pool = model.pools[index]
    return pool.buffer() if callable(getattr(pool, "buffer", None)) else pool


def operation_calls(graph, model: HalModel, run_subgraph: Callable | None = None,
                    trusted_frees: list | None = None) -> list[OperationCall]:
    """The calls of ``graph`` (a subgraph of ``model``), each validated through the registry;
    IF/WHILE kernels run their subgraphs with ``run_subgraph``. With ``trusted_frees`` (per
    operation, the operands freed after it, from an earlier build for the same model) nothing
    is validated."""
    output_positions = {operand: position for position, operand in enumerate(graph.output_indexes)}
    frees = dict(enumerate(trusted_frees)) if trusted_frees is not None else frees_after(graph)
    calls = []
    for index, operation in enumerate(graph.operations):
        record = registry.get(operation.type)
        name = operation.type.name
        if record is None:
            raise OpValidationError(f"operation {index} ({name}): not supported by the CPU executor")
        ins = tuple(map(graph.operands.__getitem__, operation.inputs))
        outs = tuple(map(graph.operands.__getitem__, operation.outputs))
        execute = record.execute
        try:
            if trusted_frees is None:
                record.validate(ins, outs)
            if operation.type in control_flow.TYPES:
                control_flow.check_signature(operation, graph, model)
                execute = control_flow.kernel(operation, graph, model, run_subgraph)
        except OpValidationError as error:
            raise OpValidationError(f"operation {index} ({name}): {error}") from error
        model_outputs = tuple((slot, output_positions[i], numpy_dtype(graph.operands[i].type).itemsize)
                              for slot, i in enumerate(operation.outputs) if i in output_positions)
        kernel = kernel_name(operation, graph.operands)
        detail = span_detail(kernel, index, model) if graph is model.main else kernel
        calls.append(OperationCall(index, operation, execute, operation.inputs, operation.outputs,
                                   ins, outs, tuple(frees.get(index, ())), kernel,
                                   record.infer_shapes, model_outputs, detail))
    return calls


def span_detail(kernel: str, index: int, model: HalModel) -> str:
    """A main operation's kernel span detail: the kernel and the operation's index in the whole
    model, then, in a plan step, the step and the index in the step (``conv2dFloat32 #12
    (step 3 #1)``). Operations of referenced subgraphs carry the kernel name alone."""
    origins = model.operation_origins
    detail = f"{kernel} #{origins[index] if origins else index}"
    return detail if model.step_index < 0 else f"{detail} (step {model.step_index} #{index})"


def frees_after(graph) -> dict[int, list[int]]:
    """Operation index -> the temporaries to free after it (their last use)."""
    frees: dict[int, list[int]] = {}
    for operand_index, call_index in _last_uses(graph).items():
        frees.setdefault(call_index, []).append(operand_index)
    return frees


def _last_uses(graph) -> dict[int, int]:
    """Temporary operand -> index of the last operation that reads (or, if unread, writes) it."""
    last: dict[int, int] = {}
    for index, operation in enumerate(graph.operations):
        for operand_index in (*operation.outputs, *operation.inputs):
            if graph.operands[operand_index].lifetime == L.TEMPORARY_VARIABLE:
                last[operand_index] = index
    return last
