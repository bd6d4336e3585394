"""The CPU executor's memory budget: what one operation may allocate, checked before it runs.

An operation whose output size depends on scalars or on broadcasting (PAD, ADD of [n, 1] and
[1, n], a pooling or convolution with huge padding, ...) registers an ``infer_shapes`` function
that gives its output shapes and extra scratch bytes without computing anything (AOSP's
operation ``prepare``: shape inference). Before each such step the executor charges every
output element :func:`work_bytes` (the output plus the widest numpy temporaries its kernel makes, e.g. int64
for quantized arithmetic) and:

- for a model output, compares the output's bytes with the caller's buffer and raises
  :class:`OutputTooSmall` (OUTPUT_INSUFFICIENT_SIZE, with the shape it needs);
- raises :class:`BudgetExceeded` (RESOURCE_EXHAUSTED_PERSISTENT) when the charge is over the
  budget: :data:`DEFAULT_BUDGET_BYTES`, or the bytes in the environment variable
  :data:`BUDGET_ENV` (read when a device prepares a model; drivers inherit it from the runtime,
  ``python -m nnscope.runtime.drivers ... --memory-budget BYTES`` overrides it for one driver).

Example:
    >>> plan = OutputPlan([(1 << 20, 64)])
    >>> charge(plan, [OperandType.TENSOR_FLOAT32]) == (1 << 26) * work_bytes(OperandType.TENSOR_FLOAT32)
    True
    >>> element_count((2 ** 28, 4))
    1073741824
"""
from __future__ import annotations

import logging
import os
from typing import Mapping, NamedTuple, Sequence

from nnscope.runtime.hal.types import OperandType

#: Environment variable holding the executor's memory budget in bytes (for every device).
BUDGET_ENV = "NNSCOPE_MEMORY_BUDGET"
#: Bytes one operation may need at once (outputs and temporaries) unless configured otherwise;
#: with the driver's own ~60 MB this keeps a driver process well under 500 MB.
DEFAULT_BUDGET_BYTES = 256 * 1024 * 1024
#: Bytes of the widest temporary element (float64 / int64 accumulators), for scratch estimates.
WIDE_BYTES = 8
_T = OperandType
_WORK_BYTES = {  # per output element: the output and the temporaries of its kernel
    _T.TENSOR_FLOAT32: 12, _T.TENSOR_FLOAT16: 12, _T.TENSOR_INT32: 24, _T.TENSOR_BOOL8: 4,
    _T.TENSOR_QUANT8_ASYMM: 48, _T.TENSOR_QUANT8_ASYMM_SIGNED: 48, _T.TENSOR_QUANT8_SYMM: 48,
    _T.TENSOR_QUANT8_SYMM_PER_CHANNEL: 48, _T.TENSOR_QUANT16_SYMM: 48, _T.TENSOR_QUANT16_ASYMM: 48,
}
_log = logging.getLogger("nn.CpuExecutor")


class OutputPlan(NamedTuple):
    """What an ``infer_shapes`` function found: the output shapes, and scratch bytes beyond them."""

    shapes: Sequence[tuple[int, ...]]
    scratch_bytes: int = 0


class BudgetExceeded(Exception):
    """An operation would need more memory than the budget (RESOURCE_EXHAUSTED_PERSISTENT)."""

    def __init__(self, needed: int, budget: int):
        super().__init__(f"needs about {needed} bytes, more than the memory budget of {budget} "
                         f"bytes ({BUDGET_ENV})")
        self.needed = needed
        self.budget = budget


class OutputTooSmall(Exception):
    """A model output's buffer cannot hold it (OUTPUT_INSUFFICIENT_SIZE); ``shape`` is what it needs."""

    def __init__(self, position: int, shape: tuple[int, ...], needed: int, capacity: int):
        super().__init__(f"output {position} needs {needed} bytes for shape {list(shape)}, "
                         f"its buffer has {capacity}")
        self.position = position
        self.shape = tuple(shape)


def element_count(shape: Sequence[int]) -> int:
    """Elements of ``shape`` in Python integers (no overflow)."""
    count = 1
    for dim in shape:
        count *= int(dim)
    return count


def work_bytes(operand_type: OperandType) -> int:
    """Bytes charged per output element of ``operand_type``."""
    return _WORK_BYTES.get(operand_type, 8)


def charge(plan: OutputPlan, output_types: Sequence[OperandType]) -> int:
    """The bytes ``plan`` charges against the budget."""
    return plan.scratch_bytes + sum(element_count(shape) * work_bytes(kind)
                                    for shape, kind in zip(plan.shapes, output_types))


def configured_budget(environ: Mapping[str, str] | None = None) -> int:
    """The budget in :data:`BUDGET_ENV`, or :data:`DEFAULT_BUDGET_BYTES` when unset or invalid."""
    text = (os.environ if environ is None else environ).get(BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_BUDGET_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        _log.warning("%s=%r is not a positive number of bytes; using %d", BUDGET_ENV, text,
                     DEFAULT_BUDGET_BYTES)
        return DEFAULT_BUDGET_BYTES
    return value
