"""Internal: the long-lived worker threads that run asynchronous executions.

AOSP starts a thread per asynchronous execution; here a worker that finished stays alive,
idle, for the next one, so a program that runs ``start_compute().wait()`` in a loop uses one
``nn-execution`` thread for all of them (one timeline row, not one per execution). Executions
in flight together still get a worker each: nothing waits for a busy worker. A worker goes
back to the idle list *before* it reports its work done, so the next call after a ``wait()``
always finds it. At most :data:`MAX_IDLE` workers per name stay idle; more end.

Example:
    >>> done = threading.Event()
    >>> run("nn-execution", lambda: None, lambda error: done.set())
    >>> done.wait(5)
    True
"""
from __future__ import annotations

import os
import queue
import threading
from typing import Callable

#: Idle workers kept per thread name (a burst of concurrent executions leaves more).
MAX_IDLE = 4

_lock = threading.Lock()
_idle: dict[str, list[queue.SimpleQueue]] = {}


def run(name: str, work: Callable[[], None],
        finish: Callable[[BaseException | None], None]) -> None:
    """Run ``work`` on an idle worker named ``name`` (a new one if none is idle), then
    ``finish(error)`` with what it raised (None on success)."""
    with _lock:
        idle = _idle.get(name)
        inbox = idle.pop() if idle else None
    if inbox is None:
        inbox = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(name, inbox), name=name, daemon=True).start()
    inbox.put((work, finish))


def _serve(name: str, inbox: queue.SimpleQueue) -> None:
    while True:
        work, finish = inbox.get()
        error = None
        try:
            work()
        except BaseException as caught:  # noqa: BLE001 - handed to finish
            error = caught
        with _lock:
            idle = _idle.setdefault(name, [])
            keep = len(idle) < MAX_IDLE
            if keep:
                idle.append(inbox)
        finish(error)
        work = finish = error = None  # an idle worker holds nothing of its last execution
        if not keep:
            return


def idle_count(name: str) -> int:
    """How many workers named ``name`` wait for work (for tests)."""
    with _lock:
        return len(_idle.get(name, ()))


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads."""
    global _lock
    _lock = threading.Lock()
    _idle.clear()


os.register_at_fork(after_in_child=_forget_after_fork)
