"""Internal: the model-level checks of :class:`~runtime.model.Model` (at addOperation and finish).

``check_signature`` runs the op registry's validate for one operation when it is added, as
AOSP's ``ModelBuilder::addOperation``; ``check_lifetimes`` finds what AOSP detects at finish from
operand lifetimes; ``validated`` runs ``runtime.hal.validate`` on the assembled model and sorts it
into run order, keeping the order so results can be reported in the order operations were added.

Example:
    >>> from nnscope.runtime.hal.types import OperationType
    >>> known(OperationType, 0), known(OperationType, -1), known(OperationType, True)
    (True, False, False)
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from nnscope.runtime import _checks as checks
from nnscope.runtime import _modelparts as parts
from nnscope.runtime.api import from_hal_error
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import HalModel, Operand, OperandType, Operation
from nnscope.runtime.hal.validate import validate_model


def is_int(value) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, np.integer))


def known(enum_type, value) -> bool:
    if not is_int(value):
        return False
    try:
        enum_type(int(value))
    except ValueError:
        return False
    return True


def check_signature(operation: Operation, operands: Sequence[Operand], where: str) -> None:
    """The op registry's check of one operation, at addOperation. A per-channel operand whose
    parameters are not set yet is checked at finish instead (they may still be set)."""
    ins = [operands[i] for i in operation.inputs]
    outs = [operands[i] for i in operation.outputs]
    if any(o.type == OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL and o.channel_quant is None
           for o in (*ins, *outs)):
        return
    try:
        check_operation(operation, ins, outs)
    except (ValueError, TypeError, IndexError, KeyError) as error:
        raise checks.bad(where, str(error)) from None


def check_lifetimes(inputs: Sequence[int], outputs: Sequence[int], valued: Iterable[int],
                    identified: set[int]) -> None:
    """What AOSP finds at finish from operand lifetimes: a model input/output that was given a
    value, or an operand made an input/output by an earlier identify call only."""
    current = set(inputs) | set(outputs)
    clash = sorted(current & set(valued))
    if clash:
        raise checks.bad("finish", f"operand {clash[0]} is a model input/output but was given a value")
    stale = sorted(identified - current)
    if stale:
        raise checks.bad("finish", f"operand {stale[0]} was made a model input/output by an earlier "
                         f"identifyInputsAndOutputs call but is not one now")


def check_operation(operation: Operation, inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    """The op registry's signature check (no-op for operations without a record)."""
    from nnscope.runtime.ops import registry  # noqa: PLC0415 - kernels load on first use
    record = registry.get(operation.type)
    if record is not None:
        record.validate(inputs, outputs)


def validated(hal: HalModel, call: str) -> tuple[HalModel, tuple[int, ...]]:
    """``hal`` validated and sorted into run order, and the order (run position -> index)."""
    if not hal.main.operations:
        raise checks.bad(call, "the model has no operations (an empty model is invalid)")
    try:
        order = validate_model(hal, check_operation)
    except HalError as error:
        raise from_hal_error(error, call) from None
    return parts.in_run_order(hal, order), tuple(order)
