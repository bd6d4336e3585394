"""Sync fences as every side of ``executeFenced`` sees them: Linux eventfds signalled once.

A fence is unsignalled while its eventfd is not readable; it is signalled by writing its count
once: :data:`SIGNALED` (1) for success, :data:`FAILED` for an error, as a kernel sync_file
carries its status. :data:`FAILED` is the largest count an eventfd holds, so a failed fence is
readable but no longer writable: one ``poll`` tells the outcome, without reading the count
(nobody reads it, so every duplicate stays readable for good). The driver accepts only eventfds
as ``wait_for`` fences (:func:`is_eventfd`), so it can always tell an error from success; any
other pollable fd is a foreign fence with AOSP's ``syncWait`` rules (POLLIN: signalled,
POLLERR/POLLNVAL: an error). The runtime's Events (``runtime._fenced``), the driver's fenced
runs and the runtime's fenced plan steps all use these functions.

:func:`spin` is the one bounded look before a sleep: it looks without sleeping for at most a
window (yielding the CPU to anything else runnable); the caller then sleeps in ``poll()``. A
look only pays with a second CPU (:func:`usable_cpus`, :func:`watch_window_s`): on one, it holds
off the very work it waits for.

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
import time

from nnscope.runtime.hal import fence_watch

SIGNALED = 1
#: The count of a failed fence: an eventfd's largest, so that the fence stops being writable.
FAILED = 0xFFFF_FFFF_FFFF_FFFE
ACTIVE, DONE, ERROR = "active", "signaled", "error"
_COUNT = "eventfd-count:"
_EVENTFD_LINK = "anon_inode:[eventfd]"
_IN, _OUT, _BAD = select.POLLIN, select.POLLOUT, select.POLLERR | select.POLLNVAL


def new_fence() -> int:
    """A new unsignalled fence (close-on-exec, non-blocking); the caller owns it."""
    return os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)


def signal(fd: int, ok: bool) -> None:
    """Signal the fence once, with the outcome in its count. Never blocks (:func:`write_nowait`):
    BlockingIOError when its count cannot take the outcome any more."""
    write_nowait(fd, SIGNALED if ok else FAILED)


def fail(fd: int) -> None:
    """Fail the fence unless it signalled already (a waiter that gives up on its run)."""
    try:
        write_nowait(fd, FAILED)
    except OSError:  # signalled already: its count cannot take FAILED any more
        pass


def write_nowait(fd: int, value: int) -> None:
    """Add ``value`` to the eventfd's count without blocking, whatever its file status flags
    (BlockingIOError when the count cannot take it). Whoever holds an eventfd shares its open
    file description (a driver's fence and the copy its client received are one; an FMQ's
    wake-ups too), so a client may clear O_NONBLOCK on it at any time: a write its count cannot
    take would then wait for a read that never comes. Put back before each write: one ``fcntl``
    (F_GETFL) when nobody cleared it. A client thread that clears it again in between can still
    make the write block: in a driver, :mod:`.fence_watch` bounds that."""
    _nowait(fd, "write", os.eventfd_write, value)


def read_nowait(fd: int) -> int:
    """Take the eventfd's count without blocking, whatever its file status flags (as
    :func:`write_nowait`); BlockingIOError when it is 0 (another holder took it first)."""
    return _nowait(fd, "read", os.eventfd_read)


def _nowait(fd: int, what: str, call, *args):
    """``call(fd, *args)`` with O_NONBLOCK set again first; a client that clears it again
    meanwhile makes the call block, which :mod:`.fence_watch` bounds in a driver."""
    if os.get_blocking(fd):
        os.set_blocking(fd, False)
    token = fence_watch.begin(fd, what)
    try:
        return call(fd, *args)
    finally:
        fence_watch.end(token)


def is_fence(fd: int) -> bool:
    """True for an fd a driver takes as a sync fence, told by one ``fstat``: an eventfd, or
    another fd on the kernel's anonymous inode (epoll, timerfd, ...), which never polls writable
    and so reads as failed once it signals, never as a success."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == _ANON_INODE


def _anon_inode() -> tuple[int, int]:
    probe = new_fence()
    try:
        st = os.fstat(probe)
        return st.st_dev, st.st_ino
    finally:
        os.close(probe)


def is_eventfd(fd: int) -> bool:
    """True when ``fd`` is an open eventfd of this process."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == _EVENTFD_LINK
    except OSError:
        return False


def wait(fd: int, timeout: float | None, eventfd: bool | None = None) -> str:
    """ACTIVE, DONE or ERROR after waiting up to ``timeout`` seconds (None: forever) for ``fd``.

    POLLERR/POLLNVAL, or an eventfd signalled :data:`FAILED`, is ERROR. ``eventfd``: whether
    ``fd`` is known to be an eventfd (None: look it up once it signalled)."""
    poller = select.poll()
    poller.register(fd, _IN)
    events = poller.poll(None if timeout is None else max(0, math.ceil(timeout * 1000)))
    if not events:
        return ACTIVE
    return _outcome(fd, events[0][1], eventfd)


def _outcome(fd: int, revents: int, eventfd: bool | None) -> str:
    """The state of a fence that polled readable (``revents``)."""
    if revents & _BAD:
        return ERROR
    if eventfd is None:
        eventfd = is_eventfd(fd)
    if not eventfd:
        return DONE
    poller = select.poll()
    poller.register(fd, _OUT)
    return DONE if poller.poll(0) else ERROR


def spin(look, seconds: float):
    """``look()`` again and again without sleeping, yielding the CPU to anything else runnable
    between two looks, until it returns something true or ``seconds`` passed; its last value.
    The one polling loop of the runtime and its drivers (fences, FMQ rings, socket replies)."""
    clock, pause = time.perf_counter, os.sched_yield
    end = clock() + seconds
    while True:
        found = look()
        if found or clock() >= end:
            return found
        pause()


class ExpectedWait:
    """How long one recurring wait lasts (a running mean of the last ones), so that the next
    such wait sleeps through most of it and watches only around its expected end, as Linux's
    hybrid polling of block devices sleeps before it polls. A partitioned plan's steps are
    launched back to back, so the wait of one step for the fence before it, and the
    application's wait for the last fence, repeat from one execution to the next."""

    __slots__ = ("mean_ns",)

    def __init__(self) -> None:
        self.mean_ns = 0  # nothing learned yet

    def learn(self, waited_ns: int) -> None:
        self.mean_ns = waited_ns if self.mean_ns == 0 else (3 * self.mean_ns + waited_ns) // 4

    def window(self, since_ns: int, watch_ns: int) -> tuple[int, int]:
        """``(from, until)``: when a wait that began at ``since_ns`` should look without
        sleeping: from its expected end less a lead (a sixteenth of it, from
        :data:`WATCH_LEAD_NS` to :data:`MAX_WATCH_LEAD_NS`) until ``watch_ns`` after that end;
        from ``since_ns`` while nothing was learned. Before ``from`` and after ``until`` the
        waiter sleeps in ``poll``."""
        mean = self.mean_ns
        lead = min(MAX_WATCH_LEAD_NS, max(WATCH_LEAD_NS, mean >> 4))
        return since_ns + max(0, mean - lead), since_ns + mean + watch_ns


#: The least and the most a waiter starts looking before the expected end of its wait (ns): a
#: long wait (a client's fence signalled after seconds) never buys a long look.
WATCH_LEAD_NS, MAX_WATCH_LEAD_NS = 100_000, 1_000_000


def nap(fd: int, seconds: float) -> bool:
    """Sleep up to ``seconds`` (to the microsecond: ``select``, where ``poll`` and ``epoll``
    count milliseconds) or until ``fd`` is readable; whether it is."""
    if seconds <= 0:
        return False
    if fd < _SELECT_FDS:
        return bool(select.select((fd,), (), (), seconds)[0])
    poller = select.poll()
    poller.register(fd, _IN)
    return bool(poller.poll(int(seconds * 1000)))  # whole milliseconds, never longer


_SELECT_FDS = 1024  # FD_SETSIZE


def watch_window_s(variable: str, default_us: int, most_us: int, low_power: bool = False) -> float:
    """How long to watch before sleeping, in seconds: environment ``variable`` in microseconds
    (``default_us`` when unset or not a number, at most ``most_us``); none with low power, nor
    when this process may use only one CPU (the watch would hold off the work it waits for)."""
    if low_power or usable_cpus() < 2:
        return 0.0
    try:
        return min(most_us, max(0, int(os.environ.get(variable, default_us)))) / 1e6
    except ValueError:
        return default_us / 1e6


def close_fds(fds) -> None:
    """Close fds (fences, received fds), ignoring already-closed ones."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity, cut by a cgroup v2 quota (``cpu.max``)."""
    cpus = len(os.sched_getaffinity(0))
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as limit:
            quota, period = limit.read().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return cpus


_ANON_INODE = _anon_inode()


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
