"""The single HAL <-> runtime result-code conversion pair and the HAL-side exception."""
from __future__ import annotations

import logging

from nnscope.runtime.hal.types import ErrorStatus, ResultCode

_log = logging.getLogger("Utils")

_TO_RESULT = {
    ErrorStatus.NONE: ResultCode.NO_ERROR,
    ErrorStatus.DEVICE_UNAVAILABLE: ResultCode.UNAVAILABLE_DEVICE,
    ErrorStatus.GENERAL_FAILURE: ResultCode.OP_FAILED,
    ErrorStatus.OUTPUT_INSUFFICIENT_SIZE: ResultCode.OUTPUT_INSUFFICIENT_SIZE,
    ErrorStatus.INVALID_ARGUMENT: ResultCode.BAD_DATA,
    ErrorStatus.MISSED_DEADLINE_TRANSIENT: ResultCode.MISSED_DEADLINE_TRANSIENT,
    ErrorStatus.MISSED_DEADLINE_PERSISTENT: ResultCode.MISSED_DEADLINE_PERSISTENT,
    ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT: ResultCode.RESOURCE_EXHAUSTED_TRANSIENT,
    ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT: ResultCode.RESOURCE_EXHAUSTED_PERSISTENT,
    ErrorStatus.DEAD_OBJECT: ResultCode.DEAD_OBJECT,
}
_TO_STATUS = {code: status for status, code in _TO_RESULT.items()}


def result_code_from_status(status: int) -> ResultCode:
    """HAL ErrorStatus -> ResultCode; unknown values are logged and read as OP_FAILED."""
    try:
        return _TO_RESULT[ErrorStatus(status)]
    except (ValueError, KeyError):
        _log.error("unknown HAL ErrorStatus %r", status)
        return ResultCode.OP_FAILED


def status_from_result_code(code: int) -> ErrorStatus:
    """ResultCode -> HAL ErrorStatus; unknown values are logged and read as GENERAL_FAILURE."""
    try:
        return _TO_STATUS[ResultCode(code)]
    except (ValueError, KeyError):
        _log.error("unknown ResultCode %r", code)
        return ErrorStatus.GENERAL_FAILURE


class HalError(Exception):
    """Raised by HAL-side code (drivers, device proxies) with the ErrorStatus to report."""

    def __init__(self, status: ErrorStatus, message: str):
        super().__init__(message)
        self.status = ErrorStatus(status)
