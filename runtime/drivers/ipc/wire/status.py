"""The leading status of every reply: ``status u32`` (an ``ErrorStatus``), then the reply's body
on success or a UTF-8 message on failure. The driver writes it (:data:`OK`, :func:`error_reply`),
the runtime reads it (``client._reply.check_status``); both mark a failed reply's span the same
way (:func:`mark_failure`).

Example:
    >>> status_of(int.from_bytes(error_reply(ErrorStatus.INVALID_ARGUMENT, "bad")[:4], "little"))
    <ErrorStatus.INVALID_ARGUMENT: 4>
    >>> OK + b"body" == b"\\0\\0\\0\\0body"
    True
"""
from __future__ import annotations

import struct

from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.wire.codec import Writer
from nnscope.runtime.hal.types import ErrorStatus

#: The status NONE, which a successful reply's body follows.
OK = struct.pack("<I", 0)
#: Longest failure message a reply carries (characters).
MAX_MESSAGE = 4000
_STATUSES = {status.value: status for status in ErrorStatus}


def error_reply(status: ErrorStatus, message: str) -> bytes:
    """A failure payload: the status, then its message."""
    w = Writer()
    w.u32(status)
    w.text(message[:MAX_MESSAGE])
    return w.getvalue()


def status_of(value: int) -> ErrorStatus:
    """The ``ErrorStatus`` a status field holds; GENERAL_FAILURE for a value NNAPI does not know."""
    return _STATUSES.get(value, ErrorStatus.GENERAL_FAILURE)


def mark_failure(payload) -> None:
    """Mark the innermost open span failed when ``payload`` (a reply) leads with an error
    status (``tracing.fail``); a PARKED or short payload is left alone."""
    if type(payload) is not bytes or len(payload) < 4 or not any(payload[:4]):
        return
    status = int.from_bytes(payload[:4], "little")
    name = _STATUSES[status].name if status in _STATUSES else "UNKNOWN"
    _trace.fail(status, name)
