"""``Event``: completion of an asynchronous execution (ANeuralNetworksEvent).

``Execution.start_compute()`` runs the execution on a worker thread and returns an Event;
``wait()`` blocks until it is done and raises the execution's :class:`NnError`, if any.

Example:
    >>> event = Event.start(lambda: None)
    >>> event.wait()
    >>> event.done
    True
"""
from __future__ import annotations

import threading
from typing import Callable

import tracing
from runtime._checks import real
from runtime.api import NnError, ResultCode
from tracing import Phase


class Event:
    """A running or finished asynchronous computation."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def start(cls, work: Callable[[], None], name: str = "nn-execution") -> Event:
        """Run ``work`` on a new thread; the Event completes when it returns or raises."""
        event = cls()
        event._thread = threading.Thread(target=event._run, args=(work,), name=name, daemon=True)
        event._thread.start()
        return event

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - handed to the waiter
            self._error = error
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        """True once the computation finished (successfully or not)."""
        return self._done.is_set()

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksEvent_wait")
    def wait(self, timeout: float | None = None) -> None:
        """Block until the computation is done (ANeuralNetworksEvent_wait).

        Args:
            timeout: Seconds to wait at most; None waits forever.

        Raises:
            NnError: the execution's error; MISSED_DEADLINE_TRANSIENT if ``timeout`` ran out.
        """
        if timeout is not None and (real(timeout, "Event.wait", "timeout") < 0):
            raise NnError(ResultCode.BAD_DATA, f"Event.wait: negative timeout {timeout}")
        if not self._done.wait(timeout):
            raise NnError(ResultCode.MISSED_DEADLINE_TRANSIENT, f"Event.wait: not done after {timeout} s")
        error = self._error
        if isinstance(error, NnError):
            raise NnError(error.code, error.message)
        if error is not None:
            raise NnError(ResultCode.OP_FAILED, f"execution failed: {type(error).__name__}: {error}")

    @tracing.runtime(Phase.EXECUTION, "ANeuralNetworksEvent_free")
    def free(self) -> None:
        """Wait for the computation and release the event (ANeuralNetworksEvent_free)."""
        self._done.wait()
