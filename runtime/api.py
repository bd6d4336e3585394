"""The runtime's one exception type, :class:`NnError`, and its per-code subclasses.

Every failure of the public API (``Model``, ``Compilation``, ``Execution``, ``Memory``,
``Event``) raises an ``NnError`` whose ``code`` is the NNAPI :class:`ResultCode` the C API
would have returned, and whose message names what failed and where (operand or operation
index). ``NnError(code, message)`` returns the subclass for that code, so callers can
catch either ``NnError`` or e.g. ``BadDataError``.

Example:
    >>> err = NnError(ResultCode.BAD_DATA, "operand 3: bad dimensions")
    >>> isinstance(err, BadDataError), err.code.name, str(err)
    (True, 'BAD_DATA', 'BAD_DATA: operand 3: bad dimensions')
"""
from __future__ import annotations

from nnscope.runtime.hal.errors import HalError, result_code_from_status
from nnscope.runtime.hal.types import ResultCode

__all__ = ["NnError", "BadDataError", "BadStateError", "OpFailedError", "UnexpectedNullError",
           "OutputInsufficientSizeError", "UnavailableDeviceError", "MissedDeadlineError",
           "ResourceExhaustedError", "DeadObjectError", "OutOfMemoryError", "UnmappableError",
           "IncompleteError", "ResultCode", "from_hal_error"]

_SUBCLASSES: dict[ResultCode, type] = {}


class NnError(Exception):
    """A failed NNAPI call.

    Attributes:
        code: The :class:`ResultCode` (never ``NO_ERROR``).
        message: What failed and where, without the code prefix.
    """

    codes: tuple[ResultCode, ...] = ()

    def __new__(cls, code: int, message: str = ""):
        if cls is NnError:
            cls = _SUBCLASSES.get(_as_code(code), NnError)
        return super().__new__(cls)

    def __init__(self, code: int, message: str = ""):
        self.code = _as_code(code)
        self.message = message
        super().__init__(f"{self.code.name}: {message}" if message else self.code.name)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for code in cls.codes:
            _SUBCLASSES[code] = cls

    def __reduce__(self):
        return (NnError, (int(self.code), self.message))


def _as_code(code: int) -> ResultCode:
    try:
        return ResultCode(code)
    except ValueError:
        return ResultCode.OP_FAILED


class OutOfMemoryError(NnError):
    codes = (ResultCode.OUT_OF_MEMORY,)


class IncompleteError(NnError):
    codes = (ResultCode.INCOMPLETE,)


class UnexpectedNullError(NnError):
    codes = (ResultCode.UNEXPECTED_NULL,)


class BadDataError(NnError):
    codes = (ResultCode.BAD_DATA,)


class OpFailedError(NnError):
    codes = (ResultCode.OP_FAILED,)


class BadStateError(NnError):
    codes = (ResultCode.BAD_STATE,)


class UnmappableError(NnError):
    codes = (ResultCode.UNMAPPABLE,)


class OutputInsufficientSizeError(NnError):
    codes = (ResultCode.OUTPUT_INSUFFICIENT_SIZE,)


class UnavailableDeviceError(NnError):
    codes = (ResultCode.UNAVAILABLE_DEVICE,)


class MissedDeadlineError(NnError):
    codes = (ResultCode.MISSED_DEADLINE_TRANSIENT, ResultCode.MISSED_DEADLINE_PERSISTENT)


class ResourceExhaustedError(NnError):
    codes = (ResultCode.RESOURCE_EXHAUSTED_TRANSIENT, ResultCode.RESOURCE_EXHAUSTED_PERSISTENT)


class DeadObjectError(NnError):
    codes = (ResultCode.DEAD_OBJECT,)


def from_hal_error(error: HalError, where: str = "") -> NnError:
    """Convert a driver-side :class:`HalError` through the single conversion pair."""
    message = f"{where}: {error}" if where else str(error)
    return NnError(result_code_from_status(error.status), message)


def check(condition: bool, code: ResultCode, message: str) -> None:
    """Raise ``NnError(code, message)`` unless ``condition`` holds."""
    if not condition:
        raise NnError(code, message)
