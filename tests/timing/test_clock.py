"""Clocks and the Stopwatch."""
import time

import pytest

from nnscope.timing import DEFAULT_CLOCK, Clock, FakeClock, MonotonicClock, Stopwatch, Timing


def test_fake_clock_moves_only_when_advanced():
    clock = FakeClock(start_ns=500)
    assert clock.now_ns() == clock.now_ns() == 500
    clock.advance(1_500)
    assert clock.now_ns() == 2_000
    assert FakeClock().now_ns() == 0


def test_fake_clock_is_monotonic():
    with pytest.raises(ValueError):
        FakeClock().advance(-1)
    with pytest.raises(ValueError):
        FakeClock(start_ns=-5)


def test_clocks_satisfy_protocol():
    assert isinstance(FakeClock(), Clock)
    assert isinstance(MonotonicClock(), Clock)
    assert isinstance(DEFAULT_CLOCK, MonotonicClock)


def test_monotonic_clock_tracks_time_monotonic_ns():
    before = time.monotonic_ns()
    reading = MonotonicClock().now_ns()
    assert before <= reading <= time.monotonic_ns()


def test_stopwatch_truncates_to_microseconds():
    clock = FakeClock()
    with Stopwatch(clock) as watch:
        clock.advance(1_999)
    assert (watch.elapsed_ns, watch.elapsed_us) == (1_999, 1)
    clock.advance(10_000)
    assert watch.elapsed_us == 1  # stopped: later time does not count


def test_stopwatch_explicit_start_stop_and_running_reading():
    clock = FakeClock(start_ns=7)
    watch = Stopwatch(clock).start()
    clock.advance(3_000)
    assert watch.elapsed_us == 3  # running
    clock.advance(2_000)
    assert watch.stop() == 5


def test_stopwatch_misuse():
    with pytest.raises(RuntimeError):
        Stopwatch(FakeClock()).stop()
    with pytest.raises(RuntimeError):
        Stopwatch(FakeClock()).elapsed_ns


def test_nested_stopwatches_fill_a_valid_timing():
    clock = FakeClock()
    with Stopwatch(clock) as in_driver:
        clock.advance(5_000)
        with Stopwatch(clock) as on_device:
            clock.advance(40_000)
    timing = Timing.from_us(on_device.elapsed_us, in_driver.elapsed_us)
    assert (timing.on_device, timing.in_driver) == (40, 45)


def test_real_clock_stopwatch_measures_sleep():
    with Stopwatch() as watch:
        time.sleep(0.002)
    assert watch.elapsed_us >= 2_000
