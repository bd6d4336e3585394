"""Internal: the argument checks every public call makes, with NNAPI's result codes.

One place for the rules ``NeuralNetworks.h`` and AOSP's ``TestValidation`` state for arguments:
``None`` where C would pass NULL is UNEXPECTED_NULL; a wrong type or a value out of range is
BAD_DATA. The lifecycle (BAD_STATE) rules live in :mod:`runtime._lifecycle`. Every helper
returns the argument in its canonical Python form (``int``, ``tuple``, ``bool``) or raises
:class:`~runtime.api.NnError`; ``call`` is the NNAPI function name used in the message.

Example:
    >>> index(1, 3, "setInput", "input index")
    1
    >>> index(3, 3, "setInput", "input index")
    Traceback (most recent call last):
    ...
    nnscope.runtime.api.BadDataError: BAD_DATA: setInput: input index 3 out of range (0..2)
    >>> index_list(None, 4, "addOperation", "inputs")
    Traceback (most recent call last):
    ...
    nnscope.runtime.api.UnexpectedNullError: UNEXPECTED_NULL: addOperation: inputs is None
"""
from __future__ import annotations

import numbers
import os
from typing import Sequence

import numpy as np

from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.hal.types import OperandType, numpy_dtype

UINT32_MAX = 0xFFFFFFFF
UINT64_MAX = 0xFFFFFFFFFFFFFFFF
_SEQUENCES = (list, tuple, range, np.ndarray)


def bad(call: str, message: str) -> NnError:
    """A BAD_DATA error of ``call``."""
    return NnError(ResultCode.BAD_DATA, f"{call}: {message}")


def not_null(value, call: str, what: str) -> None:
    """UNEXPECTED_NULL when ``value`` is None (a NULL pointer in C)."""
    if value is None:
        raise NnError(ResultCode.UNEXPECTED_NULL, f"{call}: {what} is None")


def integer(value, call: str, what: str, low: int | None = None, high: int | None = None) -> int:
    """An ``int`` (numpy integers accepted, bools not) within ``[low, high]``; else BAD_DATA."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise bad(call, f"{what} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        span = f"[{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
        raise bad(call, f"{what} {value} outside {span}")
    return value


def index(value, count: int, call: str, what: str) -> int:
    """An index in ``range(count)``; BAD_DATA otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise bad(call, f"{what} must be an integer, got {type(value).__name__} {value!r}")
    if not 0 <= value < count:
        raise bad(call, f"{what} {value} out of range (0..{count - 1})" if count else
                  f"{what} {value} out of range (there are none)")
    return int(value)


def flag(value, call: str, what: str) -> bool:
    """A bool (also numpy bools and the ints 0/1); BAD_DATA otherwise."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise bad(call, f"{what} must be a bool, got {type(value).__name__} {value!r}")


def real(value, call: str, what: str) -> float:
    """A real number (int or float, not bool); BAD_DATA otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise bad(call, f"{what} must be a number, got {type(value).__name__} {value!r}")
    return float(value)


def duration(value, call: str, what: str = "duration") -> int:
    """A duration in nanoseconds, an unsigned 64-bit integer as in C."""
    return integer(value, call, what, 0, UINT64_MAX)


def sequence(value, call: str, what: str) -> tuple:
    """A list/tuple/range/1-D array as a tuple; None is UNEXPECTED_NULL, anything else BAD_DATA."""
    not_null(value, call, what)
    if not isinstance(value, _SEQUENCES) or (isinstance(value, np.ndarray) and value.ndim != 1):
        raise bad(call, f"{what} must be a list or tuple, got {type(value).__name__}")
    return tuple(value)


def index_list(values, count: int, call: str, what: str) -> tuple[int, ...]:
    """A list of operand indexes, each in ``range(count)``."""
    items = sequence(values, call, what)
    return tuple(index(item, count, call, f"{what}[{position}]: operand index")
                 for position, item in enumerate(items))


def dimensions(value, call: str, what: str = "dimensions") -> tuple[int, ...]:
    """Operand dimensions: None/() for none, else non-negative uint32 values (0 = unknown)."""
    if value is None:
        return ()
    items = sequence(value, call, what)
    return tuple(integer(d, call, f"{what}[{axis}]", 0, UINT32_MAX) for axis, d in enumerate(items))


def size_overflows(operand_type: OperandType, dims: Sequence[int]) -> bool:
    """Whether the byte size of a tensor overflows uint32, checked dimension by dimension as
    AOSP's ``sizeOfTensorDataOverflowsUInt32`` (an unknown 0 dimension stops the growth)."""
    try:
        size = numpy_dtype(operand_type).itemsize
    except ValueError:
        return False
    for dim in dims:
        size *= dim
        if size > UINT32_MAX:
            return True
    return False


def buffer_region(offset, length, size: int, call: str) -> tuple[int, int]:
    """``(offset, length)`` as ints, the region inside ``size`` bytes; BAD_DATA otherwise."""
    offset = integer(offset, call, "offset", 0, UINT32_MAX)
    length = integer(length, call, "length", 0, UINT32_MAX)
    if offset + length > size:
        raise bad(call, f"region [{offset}, {offset + length}) outside memory of {size} bytes")
    return offset, length


def devices(value, call: str, device_type: type) -> tuple:
    """A non-empty list of distinct devices: None lists or entries are UNEXPECTED_NULL; empty
    lists, duplicates and non-devices are BAD_DATA (checked in order, as NNAPI does)."""
    items = sequence(value, call, "devices")
    if not items:
        raise bad(call, "empty device list")
    for position, device in enumerate(items):
        not_null(device, call, f"devices[{position}]")
        if not isinstance(device, device_type):
            raise bad(call, f"devices[{position}] is a {type(device).__name__}, not a device")
        for later in range(position + 1, len(items)):
            if items[later] is device:
                raise bad(call, f"devices[{position}] and devices[{later}] are the same device")
    return items


def text(value, call: str, what: str) -> str:
    """A ``str`` or path; None is UNEXPECTED_NULL, anything else BAD_DATA."""
    not_null(value, call, what)
    if not isinstance(value, (str, os.PathLike)):
        raise bad(call, f"{what} must be a string or path, got {type(value).__name__}")
    return os.fspath(value)
