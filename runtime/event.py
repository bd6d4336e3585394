"""``Event``: completion of an asynchronous execution (ANeuralNetworksEvent).

``Execution.start_compute()`` runs the execution on a worker thread and returns an Event;
``wait()`` blocks until it is done and raises the execution's :class:`NnError`, if any.
``Execution.start_compute_with_dependencies()`` returns an Event backed by a sync fence (an
eventfd, see :mod:`runtime._fenced`): :meth:`Event.get_sync_fence_fd` hands out a pollable
duplicate, and :meth:`Event.from_sync_fence_fd` wraps a caller's fence fd as an Event. As NNAPI,
an Event from ``start_compute`` is not backed by a fence (``get_sync_fence_fd`` is BAD_DATA).

Example:
    >>> event = Event.start(lambda: None, fenced=True)
    >>> event.wait()
    >>> fd = event.get_sync_fence_fd()   # the caller owns fd
    >>> Event.from_sync_fence_fd(fd).wait(); os.close(fd); event.free()
"""
from __future__ import annotations

import functools
import os
import threading
import weakref
from typing import Callable

from nnscope import tracing
from nnscope.runtime import _fenced, _workers
from nnscope.runtime._checks import real
from nnscope.runtime.api import NnError, ResultCode
from nnscope.tracing import Phase


class Event:
    """A running or finished asynchronous computation, or a sync fence to wait for."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._threaded = False  # started on a worker (not a bare fence)
        self._fence: int | None = None  # the sync-fence fd this Event owns
        self._closer: weakref.finalize | None = None

    @classmethod
    def start(cls, work: Callable[[], None], name: str = "nn-execution", fenced: bool = False) -> Event:
        """Run ``work`` on a worker thread named ``name`` (a long-lived one, see
        :mod:`runtime._workers`); the Event completes when it returns or raises. With
        ``fenced``, the Event owns a sync fence signalled when the work ends."""
        event = cls()
        if fenced:
            event._own_fence(_fenced.new_fence())
        event._threaded = True
        _workers.run(name, functools.partial(_adopted, work, tracing.context()), event._finish)
        return event

    @classmethod
    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksEvent_createFromSyncFenceFd")
    def from_sync_fence_fd(cls, sync_fence_fd: int) -> Event:
        """An Event that completes when ``sync_fence_fd`` becomes readable (POLLERR, or an
        nnscope fence signalled with an error, makes ``wait()`` raise OP_FAILED). The fd is
        duplicated: the caller keeps and closes its own.

        Raises:
            NnError: UNEXPECTED_NULL for None; BAD_DATA for a non-integer, an fd <= 0 (as AOSP)
                or one that is not open.
        """
        event = cls()
        event._own_fence(_fenced.dup(sync_fence_fd, "createFromSyncFenceFd"))
        return event

    def _own_fence(self, fd: int) -> None:
        self._fence = fd
        self._closer = weakref.finalize(self, os.close, fd)

    def _finish(self, error: BaseException | None) -> None:
        self._error = error
        try:  # the fence first: wait() returning means the fence is signalled
            if self._fence is not None:
                _fenced.signal(self._fence, ok=error is None)
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        """True once the computation finished (successfully or not) or the fence signalled."""
        if self._done.is_set() or self._closer is None or not self._closer.alive:
            return self._done.is_set()
        return _fenced.state(self._fence, 0) != _fenced.ACTIVE  # exactly when the fence signals

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksEvent_wait")
    def wait(self, timeout: float | None = None) -> None:
        """Block until the computation is done (ANeuralNetworksEvent_wait).

        Args:
            timeout: Seconds to wait at most; None waits forever.

        Raises:
            NnError: the execution's error (OP_FAILED for a fence signalled with an error);
                MISSED_DEADLINE_TRANSIENT if ``timeout`` ran out.
        """
        if timeout is not None and (real(timeout, "Event.wait", "timeout") < 0):
            raise NnError(ResultCode.BAD_DATA, f"Event.wait: negative timeout {timeout}")
        failure = self.failure(timeout)
        if failure is not None:
            raise failure

    def failure(self, timeout: float | None) -> NnError | None:
        """Wait up to ``timeout`` seconds; the error the Event ended with, or None for success.

        A timeout that runs out is MISSED_DEADLINE_TRANSIENT."""
        if not self._threaded and self._fence is not None:
            return self._fence_failure(timeout)
        if not self._done.wait(timeout):
            return NnError(ResultCode.MISSED_DEADLINE_TRANSIENT, f"Event.wait: not done after {timeout} s")
        error = self._error
        if isinstance(error, NnError):
            return NnError(error.code, error.message)
        if error is not None:
            return NnError(ResultCode.OP_FAILED, f"execution failed: {type(error).__name__}: {error}")
        return None

    def _fence_failure(self, timeout: float | None) -> NnError | None:
        closer = self._closer
        if closer is None or not closer.alive:
            return NnError(ResultCode.BAD_STATE, "Event.wait: the event was freed")
        fence_state = _fenced.state(self._fence, timeout)
        if fence_state == _fenced.ACTIVE:
            return NnError(ResultCode.MISSED_DEADLINE_TRANSIENT,
                           f"Event.wait: fence not signalled after {timeout} s")
        if fence_state == _fenced.ERROR:
            return NnError(ResultCode.OP_FAILED, f"Event.wait: sync fence {self._fence} signalled an error")
        return None

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksEvent_getSyncFenceFd")
    def get_sync_fence_fd(self) -> int:
        """A new fd of this Event's sync fence, readable once the Event is done; the caller
        owns it and must ``os.close`` it (ANeuralNetworksEvent_getSyncFenceFd).

        Raises:
            NnError: BAD_DATA when the Event is not backed by a sync fence (``start_compute``'s
                events, as NNAPI) or was freed.
        """
        closer = self._closer
        if self._fence is None or closer is None or not closer.alive:
            raise NnError(ResultCode.BAD_DATA, "getSyncFenceFd: the event is not backed by a sync fence"
                          + ("" if self._fence is None else " (it was freed)"))
        return os.dup(self._fence)

    def fence_dup(self) -> int | None:
        """Internal (no API span): a new fd of this Event's live sync fence, else None."""
        closer = self._closer
        live = self._fence is not None and closer is not None and closer.alive
        return os.dup(self._fence) if live else None

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksEvent_free")
    def free(self) -> None:
        """Wait for the computation and release the event and its fence (ANeuralNetworksEvent_free)."""
        if self._threaded:
            self._done.wait()
        elif self._closer is not None and self._closer.alive:
            _fenced.state(self._fence, None)
            self._done.set()
        if self._closer is not None:
            self._closer()


def _adopted(work: Callable[[], None], parent: bytes | None) -> None:
    with tracing.adopt(parent):  # the worker's spans belong to the caller's span
        work()
