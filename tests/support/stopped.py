"""Stop a process with SIGSTOP and return once every one of its threads is stopped.

``os.kill`` returns when the signal is queued, not when the process has stopped: a driver thread
running on another CPU may still read a request and answer part of it. Tests that want a silent
driver wait for the kernel to report each thread stopped (state ``T`` in ``/proc``).
"""
from __future__ import annotations

import os
import signal
import time


def stop_process(pid: int, bound_s: float = 30.0) -> None:
    """SIGSTOP ``pid`` and wait (at most ``bound_s``) until all its threads are stopped."""
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + bound_s
    while not _all_stopped(pid):
        if time.monotonic() > end:
            raise AssertionError(f"process {pid} did not stop within {bound_s:g}s")
        time.sleep(0.001)


def _all_stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return True
    return all(_state(pid, task) in ("T", "t", "X", "Z", None) for task in tasks)


def _state(pid: int, task: str) -> str | None:
    try:
        with open(f"/proc/{pid}/task/{task}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0].decode()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
