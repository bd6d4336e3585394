"""Execution timing: ``setMeasureTiming`` / ``getDuration`` records and injectable clocks.

A driver asked to measure (``MeasureTiming.YES``) returns a :class:`Timing` in
microseconds, with ``UINT64_MAX`` for anything it did not measure; a fenced
execution yields a :class:`FencedTiming`. Rule: when both values are known, time
in driver >= time on device.

"Not available" is None in Python: :attr:`Timing.on_device`, :attr:`Timing.in_driver`,
:meth:`Timing.get` and :meth:`FencedTiming.get` return None where the NDK's
``ANeuralNetworksExecution_getDuration`` writes ``UINT64_MAX``. Note that the NDK
reports *nanoseconds* (microseconds * 1000) while these records hold microseconds.

Example:
    >>> from nnscope.timing import Duration, FakeClock, FencedTiming, Stopwatch, Timing
    >>> clock = FakeClock()
    >>> with Stopwatch(clock) as in_driver:
    ...     with Stopwatch(clock) as on_device:
    ...         clock.advance(40_000)          # 40 us of "hardware" work
    ...     clock.advance(10_000)
    >>> t = Timing.from_us(on_device.elapsed_us, in_driver.elapsed_us)
    >>> t
    Timing(time_on_device=40, time_in_driver=50)
    >>> FencedTiming(launched=t, fenced=Timing()).get(Duration.FENCED_IN_DRIVER) is None
    True
"""
from nnscope.timing._clock import DEFAULT_CLOCK, NS_PER_US, Clock, FakeClock, MonotonicClock, Stopwatch
from nnscope.timing._records import (NO_TIMING, UINT64_MAX, Duration, FencedTiming, MeasureTiming,
                             Timing)

__all__ = ["UINT64_MAX", "NO_TIMING", "MeasureTiming", "Timing", "Duration", "FencedTiming",
           "Clock", "MonotonicClock", "FakeClock", "Stopwatch", "DEFAULT_CLOCK", "NS_PER_US"]
