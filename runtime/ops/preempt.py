"""Cooperative preemption at operation boundaries: the checkpoints of NNAPI's priority model.

A driver's scheduler runs a low-priority execution inside :func:`yielding` with a
:class:`YieldRequest`; the CPU executor reads it once per run and, before each operation, raises
:class:`Preempted` once ``wanted`` is set (higher-priority work is waiting). The execution is then
rerun from the start: its outputs are written only after the last operation, so nothing is lost.

Example::

    request = YieldRequest()
    with yielding(request):
        prepared.execute(hal_request)   # raises Preempted after request.wanted = True
"""
from __future__ import annotations

import contextlib
import threading

_local = threading.local()


class Preempted(BaseException):
    """Higher-priority work is waiting: the run stopped before operation ``step``. A
    BaseException, so that the executor's and the drivers' error mapping lets it through."""

    def __init__(self, step: int):
        super().__init__(f"preempted before operation {step}")
        self.step = step


class YieldRequest:
    """Set ``wanted`` (from any thread) to stop the run at its next operation boundary."""

    __slots__ = ("wanted",)

    def __init__(self) -> None:
        self.wanted = False


def current() -> YieldRequest | None:
    """The yield request of the run on this thread, or None when it cannot be preempted."""
    return getattr(_local, "request", None)


@contextlib.contextmanager
def yielding(request: YieldRequest):
    """Runs on this thread inside the block stop when ``request.wanted`` is set."""
    _local.request = request
    try:
        yield request
    finally:
        _local.request = None
