"""A bound on the eventfd calls a peer can make block forever (started in driver processes).

Every eventfd a driver writes or reads (a sync fence, an FMQ wake-up) shares its open file
description with the client that sent or received it, so the client can clear O_NONBLOCK on it
at any time. ``sync_fence.write_nowait`` and ``read_nowait`` put the flag back before each call,
but a client thread that keeps clearing it can win the moment between the two, and the call
then blocks: a write whose count is full until somebody reads it, a read of an empty count until
somebody writes. Nothing in the kernel makes one eventfd call non-blocking by itself, and a
blocked call cannot be taken back (closing the fd does not end it).

:func:`start` watches those calls from one thread: a call still in the kernel after
:data:`STUCK_S` ends the process (a line on stderr first, then ``os._exit``). The runtime sees
its driver die, answers what it had sent with DEAD_OBJECT (or runs it on the CPU) and restarts
the driver on its next use: a hostile client can cost every client a restart, never a driver
that hangs for good. Until :func:`start` is called, :func:`watching` costs one flag test.

Example:
    >>> import os
    >>> fd = os.eventfd(0)
    >>> with watching(fd, "write"):
    ...     os.eventfd_write(fd, 1)
    >>> os.close(fd)
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

#: How long one eventfd call may stay in the kernel before the process ends (seconds).
STUCK_S = 2.0
#: The exit status of a process that ended for a stuck call.
EXIT_STUCK = 70

_calls: dict = {}  # thread ident -> (fd, "write" or "read", monotonic start)
_state = {"on": False}


def begin(fd: int, what: str) -> int | None:
    """Mark the calling thread as entering an eventfd ``what`` ("write" or "read") on ``fd``;
    the token for :func:`end` (None while nothing watches)."""
    if not _state["on"]:
        return None
    ident = threading.get_ident()
    _calls[ident] = (fd, what, time.monotonic())
    return ident


def end(token: int | None) -> None:
    """The call :func:`begin` marked returned (or raised)."""
    if token is not None:
        _calls.pop(token, None)


@contextlib.contextmanager
def watching(fd: int, what: str):
    """:func:`begin` and :func:`end` around a block."""
    token = begin(fd, what)
    try:
        yield
    finally:
        end(token)


def start(stuck_s: float = STUCK_S, on_stuck=None) -> None:
    """Watch from now on (once per process; later calls do nothing). ``on_stuck(fd, what,
    seconds)`` replaces the exit (tests)."""
    if _state["on"]:
        return
    _state["on"] = True
    watcher = threading.Thread(target=_watch, args=(stuck_s, on_stuck or _exit), name="nn-fence-watch",
                               daemon=True)
    _state["thread"] = watcher
    watcher.start()


def stop() -> None:
    """Stop watching and wait for the watching thread to end (tests)."""
    _state["on"] = False
    watcher = _state.pop("thread", None)
    if watcher is not None:
        watcher.join()


def _watch(stuck_s: float, on_stuck) -> None:
    while _state["on"]:
        time.sleep(stuck_s / 2)
        now = time.monotonic()
        for fd, what, since in list(_calls.values()):
            if now - since >= stuck_s:
                on_stuck(fd, what, now - since)


def _exit(fd: int, what: str, seconds: float) -> None:
    sys.stderr.write(f"driver: an eventfd {what} on fd {fd} blocked for {seconds:.1f} s (a client "
                     f"cleared its O_NONBLOCK): exiting; the runtime restarts the driver\n")
    sys.stderr.flush()
    os._exit(EXIT_STUCK)
