"""Internal: the state (BAD_STATE) rules of models, compilations and executions.

:class:`BuilderState` is the life of a ``Model`` or ``Compilation``: it is built, then
``finish()`` makes it finished or, when finish fails, finished-invalid; after either, every
mutation and a second ``finish()`` is BAD_STATE (AOSP ``ModelBuilder::badState`` and
``CompilationBuilder``'s ``mFinished``). :class:`ExecutionState` is the life of an
``Execution``: preparation (arguments may be set), computation, completed. Only a reusable
execution (``set_reusable(True)``, NNAPI feature level 5) may compute again once completed, and
never while a computation is in flight.

Example:
    >>> state = BuilderState("model m")
    >>> state.check_mutable("addOperand")
    >>> state.invalidate()
    >>> state.check_mutable("addOperand")
    Traceback (most recent call last):
    ...
    nnscope.runtime.api.BadStateError: BAD_STATE: addOperand: model m is invalid (its finish() failed)
"""
from __future__ import annotations

import threading

from nnscope.runtime.api import NnError, ResultCode

BUILDING, FINISHED, INVALID = "building", "finished", "invalid"
PREPARATION, COMPUTATION, COMPLETED = "preparation", "computation", "completed"


def _bad_state(call: str, message: str) -> NnError:
    return NnError(ResultCode.BAD_STATE, f"{call}: {message}")


def _refusal(call: str, value) -> NnError:
    """Why an execution in state ``value`` cannot begin computing."""
    if value == COMPUTATION:
        return _bad_state(call, "the execution is already computing")
    return _bad_state(call, "the execution has completed and is not reusable; create a new "
                      "Execution or call set_reusable(True) before the first compute")


class BuilderState:
    """Building -> finished, or -> invalid after a failed ``finish()``."""

    __slots__ = ("what", "value")

    def __init__(self, what: str):
        self.what = what
        self.value = BUILDING

    def check_mutable(self, call: str) -> None:
        """BAD_STATE unless still being built (mutators and ``finish`` call this first)."""
        if self.value == FINISHED:
            raise _bad_state(call, f"{self.what} is already finished")
        if self.value == INVALID:
            raise _bad_state(call, f"{self.what} is invalid (its finish() failed)")

    def check_usable(self, call: str, user: str) -> None:
        """BAD_STATE unless finished successfully (before ``user`` is created from it)."""
        if self.value == BUILDING:
            raise _bad_state(call, f"{self.what} is not finished; call finish() before creating {user}")
        if self.value == INVALID:
            raise _bad_state(call, f"{self.what} is invalid (its finish() failed)")

    def finish(self) -> None:
        self.value = FINISHED

    def invalidate(self) -> None:
        self.value = INVALID


class ExecutionState:
    """Preparation -> computation -> completed; a reusable execution may compute again."""

    __slots__ = ("value", "reusable", "_lock", "_before")

    def __init__(self):
        self.value = PREPARATION
        self.reusable = False
        self._lock = threading.Lock()
        self._before = PREPARATION

    def check_preparing(self, call: str) -> None:
        """BAD_STATE once a computation has started (setters, options, ``set_reusable``)."""
        if self.value != PREPARATION:
            raise _bad_state(call, "the execution has already started computing; create a new "
                             "Execution to change its arguments or options")

    def begin(self, call: str) -> None:
        """Enter computation; BAD_STATE while one runs or when a non-reusable one completed."""
        lock = self._lock
        lock.acquire()  # no with-block: this is every compute's path; nothing below raises
        value = self.value
        if value == COMPUTATION or (value == COMPLETED and not self.reusable):
            lock.release()
            raise _refusal(call, value)
        self._before, self.value = value, COMPUTATION
        lock.release()

    def cancel(self) -> None:
        """Leave computation without computing (the request was rejected before it started)."""
        self.value = self._before

    def complete(self) -> None:
        self.value = COMPLETED

    def check_completed(self, call: str) -> None:
        """BAD_STATE unless a computation completed (result getters)."""
        if self.value != COMPLETED:
            raise _bad_state(call, "the execution has not completed a computation")
