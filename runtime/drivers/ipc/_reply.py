"""Reading a driver's reply on the runtime side, shared by ``client`` and ``prepared``.

``check_status`` turns a reply's leading ``ErrorStatus`` into a :class:`HalError`;
``DeadlineExpired`` is what a wait raises when the caller's deadline passes first. Both sit
below the two proxies so that ``client`` (which makes prepared models) imports ``prepared``
and nothing imports back.

Example:
    >>> import struct
    >>> check_status(struct.pack("<I", 0), "execute").pos
    4
"""
from __future__ import annotations

from runtime.drivers.ipc.codec import CodecError, Reader
from runtime.hal.errors import HalError
from runtime.hal.types import ErrorStatus


class DeadlineExpired(Exception):
    """Internal: the caller's deadline passed while waiting for a reply."""


def check_status(payload: bytes, method: str) -> Reader:
    """Reader past the leading ErrorStatus; raises HalError carrying a failure status."""
    r = Reader(payload)
    status = r.u32()
    if status != ErrorStatus.NONE:
        try:
            message = r.text()
        except CodecError:
            message = ""
        try:
            status = ErrorStatus(status)
        except ValueError:
            status = ErrorStatus.GENERAL_FAILURE
        raise HalError(status, f"{method}: {message}")
    return r
