"""Sync fences as both sides of ``executeFenced`` see them: Linux eventfds signalled once.

A fence is unsignalled while its eventfd is not readable; it is signalled by writing its count
once: :data:`SIGNALED` (1) for success, :data:`FAILED` (2) for an error, as a kernel sync_file
carries its status. Nobody reads the count, so every duplicate stays readable for good; the count
is peeked from ``/proc/self/fdinfo``. The driver accepts only eventfds as ``wait_for`` fences
(:func:`is_eventfd`), so it can always tell an error from success. ``runtime._fenced`` (the
runtime's Events) uses the same functions.

Example:
    >>> fd = new_fence()
    >>> wait(fd, 0)
    'active'
    >>> signal(fd, ok=True); wait(fd, 0)
    'signaled'
    >>> os.close(fd)
"""
from __future__ import annotations

import math
import os
import select

SIGNALED, FAILED = 1, 2
ACTIVE, DONE, ERROR = "active", "signaled", "error"
_COUNT = "eventfd-count:"
_EVENTFD_LINK = "anon_inode:[eventfd]"


def new_fence() -> int:
    """A new unsignalled fence (close-on-exec, non-blocking); the caller owns it."""
    return os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)


def signal(fd: int, ok: bool) -> None:
    """Signal the fence once, with the outcome in its count."""
    os.eventfd_write(fd, SIGNALED if ok else FAILED)


def is_eventfd(fd: int) -> bool:
    """True when ``fd`` is an open eventfd of this process."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == _EVENTFD_LINK
    except OSError:
        return False


def wait(fd: int, timeout: float | None) -> str:
    """ACTIVE, DONE or ERROR after waiting up to ``timeout`` seconds (None: forever) for ``fd``.

    POLLERR/POLLNVAL, or an eventfd count other than :data:`SIGNALED`, is ERROR."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    wait_ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    events = poller.poll(wait_ms)
    if not events:
        return ACTIVE
    if events[0][1] & (select.POLLERR | select.POLLNVAL):
        return ERROR
    return DONE if count(fd) in (None, SIGNALED) else ERROR


def count(fd: int) -> int | None:
    """The eventfd's count without reading it; None for an fd that is not an eventfd."""
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as info:
            for line in info:
                if line.startswith(_COUNT):
                    return int(line[len(_COUNT):].strip(), 16)
    except (OSError, ValueError):
        return None
    return None
