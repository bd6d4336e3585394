"""``hal.fence_watch``: an eventfd call that a peer made block (it cleared O_NONBLOCK after the
driver set it, and filled or emptied the count) is reported once it has been in the kernel for
the watch's bound, with its fd and kind; a call that returns is forgotten. The driver's report
ends its process (``_exit``), which the runtime restarts; here a callback stands in for it."""
from __future__ import annotations

import os
import subprocess
import sys
import threading

from nnscope.runtime.hal import fence_watch
from nnscope.runtime.hal.sync_fence import FAILED

HANG_GUARD_S = 30.0  # generous: only a bound on a broken test, never a measured figure


def test_a_blocked_write_is_reported_and_a_returned_one_is_forgotten():
    reported, seen = [], threading.Event()

    def on_stuck(fd, what, seconds):
        reported.append((fd, what))
        seen.set()

    fence_watch.start(stuck_s=0.2, on_stuck=on_stuck)
    try:
        _check(reported, seen)
    finally:
        fence_watch.stop()


def _check(reported: list, seen: threading.Event) -> None:
    quick = os.eventfd(0, os.EFD_NONBLOCK)
    with fence_watch.watching(quick, "write"):
        os.eventfd_write(quick, 1)
    assert fence_watch._calls == {}
    full = os.eventfd(0)  # blocking, and (once written) a count that can take nothing more
    os.eventfd_write(full, FAILED)
    writer = threading.Thread(target=_blocked_write, args=(full,), daemon=True)
    writer.start()
    assert seen.wait(HANG_GUARD_S)
    assert reported[0] == (full, "write")
    assert os.eventfd_read(full) == FAILED  # the read the write waited for: it returns
    writer.join(HANG_GUARD_S)
    assert not writer.is_alive() and fence_watch._calls == {}
    os.close(quick)
    os.close(full)


def _blocked_write(fd: int) -> None:
    with fence_watch.watching(fd, "write"):
        os.eventfd_write(fd, 1)


def test_a_process_with_a_blocked_write_ends_with_its_status_and_one_line():
    """What a driver does (``fence_watch.start()`` in ``runtime.drivers.__main__``): the
    process, stuck in a write to a full blocking eventfd, exits EXIT_STUCK, saying why."""
    program = ("import os\nfrom nnscope.runtime.hal import fence_watch, sync_fence\n"
               "fence_watch.start(stuck_s=0.2)\nfd = os.eventfd(0)\n"
               "os.eventfd_write(fd, sync_fence.FAILED)\n"
               "with fence_watch.watching(fd, 'write'):\n    os.eventfd_write(fd, 1)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert done.returncode == fence_watch.EXIT_STUCK
    assert done.stderr.count("\n") == 1 and "blocked for" in done.stderr and "exiting" in done.stderr
