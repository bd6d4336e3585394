"""Reading a driver's reply on the runtime side, shared by ``device`` and ``prepared``.

``check_status`` turns a reply's leading ``ErrorStatus`` (``wire.status``) into a
:class:`HalError` and a failed span; ``readable`` and
``deadline_grace_s`` bound the waits for one;
``DeadlineExpired`` is what a wait raises when the caller's deadline passes first. Both sit
below the two proxies so that ``device`` (which makes prepared models) imports ``prepared``
and nothing imports back.

Example:
    >>> import struct
    >>> check_status(struct.pack("<I", 0), "execute").pos
    4
"""
from __future__ import annotations

import select
import struct
import time

from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader
from nnscope.runtime.drivers.ipc.wire.status import status_of
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus

_U32 = struct.Struct("<I")


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
        status = status_of(status)
        _trace.fail(status, status.name)  # the call's span (innermost open) failed
        raise HalError(status, f"{method}: {message}")
    return r


def readable(sock, wait: float) -> bool:
    """True once ``sock`` has something to read, within ``wait`` seconds (a ``poll``)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(max(0, int(wait * 1000 + 0.999))))


def deadline_grace_s(deadline_ns: int) -> float:
    """How long past ``deadline_ns`` to wait for the driver's own MISSED_DEADLINE answer: a fifth
    of what NNAPI allows (10 % of the time left, at least 5 ms), so that control returns within
    it even from a driver that hangs on a busy machine."""
    return max(0.001, 0.02 * max(0, deadline_ns - time.monotonic_ns()) / 1e9)


#: How long a release waits for the driver to drop what it holds (a driver that does not answer
#: by then is found dead by the next call).
RELEASE_TIMEOUT_S = 5.0


def release_on_driver(device, msg_type, handle: int) -> None:
    """Ask ``device`` to drop the model, buffer or burst ``handle`` (a u32); a dead or late
    driver is no error: it took the object with it, or the next call finds it dead."""
    try:
        device.transact(msg_type, _U32.pack(handle), timeout_s=RELEASE_TIMEOUT_S)
    except (HalError, DeadlineExpired):
        pass
