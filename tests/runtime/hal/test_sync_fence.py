"""runtime.hal.sync_fence: a recurring wait learned, the microsecond nap before a look, and
writes to a fence that never block."""
from __future__ import annotations

import os
import threading

from nnscope.runtime.hal.sync_fence import (FAILED, MAX_WATCH_LEAD_NS, SIGNALED, WATCH_LEAD_NS, ExpectedWait, count,
                                           fail, nap, new_fence, signal)


def test_nothing_learned_looks_from_the_start():
    assert ExpectedWait().window(1_000, 200) == (1_000, 1_200)


def test_a_learned_wait_looks_from_a_lead_before_its_end_to_the_watch_after_it():
    expected = ExpectedWait()
    expected.learn(10_000_000)
    lead = max(WATCH_LEAD_NS, 10_000_000 >> 4)
    assert expected.window(0, 200_000) == (10_000_000 - lead, 10_200_000)


def test_a_long_wait_buys_no_long_look():
    expected = ExpectedWait()
    expected.learn(60_000_000_000)  # a fence a client signals after a minute
    first, until = expected.window(0, 2_000_000)
    assert until - first == MAX_WATCH_LEAD_NS + 2_000_000


def test_a_short_wait_looks_at_once():
    expected = ExpectedWait()
    expected.learn(WATCH_LEAD_NS // 2)
    assert expected.window(5, 0)[0] == 5


def test_the_mean_follows_the_waits():
    expected = ExpectedWait()
    for waited in (4_000, 8_000, 8_000, 8_000, 8_000, 8_000, 8_000, 8_000, 8_000):
        expected.learn(waited)
    assert 7_500 < expected.mean_ns <= 8_000


def test_nap_wakes_when_the_fence_signals():
    fd = new_fence()
    started = threading.Event()

    def signal_later():
        started.wait()
        signal(fd, ok=True)

    thread = threading.Thread(target=signal_later)
    thread.start()
    try:
        started.set()
        assert nap(fd, 60.0)  # returns on the signal: a bound only
    finally:
        thread.join()
        os.close(fd)


def test_nap_on_a_quiet_fence_times_out_unsignalled():
    fd = new_fence()
    try:
        assert not nap(fd, 0.0005)
        assert not nap(fd, 0)
    finally:
        os.close(fd)


def test_nap_on_a_high_fd_uses_poll():
    fd = new_fence()
    high = os.dup2(fd, 1500) if os.sysconf("SC_OPEN_MAX") > 1500 else fd
    try:
        signal(fd, ok=True)
        assert nap(high, 1.0)
    finally:
        os.close(fd)
        if high != fd:
            os.close(high)


def _writes_without_blocking(write, fd: int) -> bool:
    """Whether ``write(fd)`` returns although ``fd`` is blocking and its count full (a read
    frees a write that blocked, after a generous bound: a hang guard, not a speed)."""
    thread = threading.Thread(target=write, args=(fd,), daemon=True)
    thread.start()
    thread.join(5.0)
    if thread.is_alive():
        os.eventfd_read(fd)
        thread.join()
        return False
    return True


def _full_blocking_fence() -> int:
    fd = os.eventfd(0, os.EFD_CLOEXEC)  # O_NONBLOCK cleared, as a hostile holder may
    os.eventfd_write(fd, FAILED)
    return fd


def test_signal_of_a_blocking_full_fence_raises_instead_of_blocking():
    fd = _full_blocking_fence()
    outcome = []

    def write(fence: int) -> None:
        try:
            signal(fence, ok=True)
        except BlockingIOError:
            outcome.append("refused")

    try:
        assert _writes_without_blocking(write, fd) and outcome == ["refused"]
    finally:
        os.close(fd)


def test_fail_of_a_blocking_signalled_fence_leaves_it_as_it_is():
    fd = os.eventfd(0, os.EFD_CLOEXEC)
    signal(fd, ok=True)
    try:
        assert _writes_without_blocking(fail, fd)
        assert count(fd) == SIGNALED
    finally:
        os.close(fd)
