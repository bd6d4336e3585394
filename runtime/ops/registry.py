"""The operation registry: one validate/infer_shapes/execute record per NNAPI operation type.

Kernel modules (one per family: ``elementwise``, ``convolution``, ``pooling``, ...) call
:func:`register` at import with the three parts of each operation's definition, as AOSP's
``NN_REGISTER_OPERATION`` does; :func:`load_all` imports them. The numpy kernels are the
reference definition of each operation.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T
    >>> record = get(OperationType.ADD)
    >>> record.family
    'elementwise'
    >>> a, b = Operand(T.TENSOR_FLOAT32, (2, 1)), Operand(T.TENSOR_FLOAT32, (1, 3))
    >>> inputs, outputs = [a, b, Operand(T.INT32)], [Operand(T.TENSOR_FLOAT32, (2, 3))]
    >>> record.validate(inputs, outputs)            # raises OpValidationError on a bad signature
    >>> record.validate(inputs[:2], outputs)
    Traceback (most recent call last):
    ...
    nnscope.runtime.ops.registry.OpValidationError: expected 3 inputs, got 2
    >>> context = OpContext(Operation(OperationType.ADD, (0, 1, 2), (3,)),
    ...                     [np.array([[1], [2]], np.float32), np.array([[10, 20, 30]], np.float32), 0],
    ...                     inputs, outputs)
    >>> record.infer_shapes(context)                # None when no output outgrows the inputs
    OutputPlan(shapes=[(2, 3)], scratch_bytes=0)
    >>> [array.tolist() for array in record.execute(context)]
    [[[11.0, 21.0, 31.0], [12.0, 22.0, 32.0]]]
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

from nnscope.runtime.hal.types import Operand, Operation, OperationType

#: Kernel family modules under runtime.ops, imported by load_all().
FAMILIES = ("elementwise", "activation", "convolution", "pooling", "reshape", "quantization",
            "transpose_conv", "resize", "normalization", "roi", "detection", "proposals", "lookup",
            "comparison", "simple_math", "nonlinear", "reduction", "shape", "space", "lstm",
            "lstm_sequence", "rnn", "quantized_lstm")


class OpValidationError(ValueError):
    """An operation's operands do not fit its signature (reported as BAD_DATA)."""


class OpContext(NamedTuple):
    """What a kernel sees. Tensor inputs are numpy arrays, scalars are Python numbers/bools,
    omitted optional inputs are None."""

    operation: Operation
    inputs: Sequence[Any]
    input_operands: Sequence[Operand]
    output_operands: Sequence[Operand]


Validator = Callable[[Sequence[Operand], Sequence[Operand]], None]
Kernel = Callable[[OpContext], list]
#: Shape inference before the kernel runs (AOSP's operation ``prepare``): an
#: ``runtime.ops.budget.OutputPlan`` (output shapes and scratch bytes), or None when the outputs
#: are no larger than the inputs.
InferShapes = Callable[[OpContext], Any]


@dataclass(frozen=True, slots=True)
class OperationRecord:
    type: OperationType
    family: str
    validate: Validator
    execute: Kernel
    infer_shapes: InferShapes | None = None


_RECORDS: dict[OperationType, OperationRecord] = {}


def register(op_type: OperationType, family: str, validate: Validator, execute: Kernel,
             infer_shapes: InferShapes | None = None) -> None:
    """Register an operation's three parts; ``infer_shapes`` lets the executor check its memory
    before running it (needed wherever outputs can outgrow the inputs: padding, broadcasting,
    windows, tiling)."""
    if op_type in _RECORDS:
        raise ValueError(f"operation {op_type.name} registered twice")
    _RECORDS[op_type] = OperationRecord(op_type, family, validate, execute, infer_shapes)


_loaded: list = []  # families imported (or found absent) so far: load_all looks them up once


def load_all() -> None:
    """Import every kernel family module (idempotent; after the first call it costs nothing,
    which matters because ``get`` calls it once per operation of a model)."""
    if len(_loaded) == len(FAMILIES):
        return
    for family in FAMILIES[len(_loaded):]:
        try:
            importlib.import_module(f"nnscope.runtime.ops.{family}")
        except ModuleNotFoundError as error:
            if error.name != f"nnscope.runtime.ops.{family}":
                raise
        _loaded.append(family)


def get(op_type: OperationType) -> OperationRecord | None:
    load_all()
    return _RECORDS.get(op_type)


def supported_types() -> frozenset[OperationType]:
    load_all()
    return frozenset(_RECORDS)
