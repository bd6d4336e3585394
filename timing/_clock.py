"""Injectable clocks and a stopwatch that yields microseconds for ``Timing``.

Example:
    >>> clock = FakeClock(start_ns=1_000)
    >>> with Stopwatch(clock) as watch:
    ...     clock.advance(2_500_000)
    >>> watch.elapsed_us
    2500
"""
from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

NS_PER_US = 1_000


@runtime_checkable
class Clock(Protocol):
    """A monotonic time source in nanoseconds."""

    def now_ns(self) -> int:
        """Returns the current time in nanoseconds."""
        ...


class MonotonicClock:
    """The real clock: :func:`time.monotonic_ns`."""

    def now_ns(self) -> int:
        """Returns ``time.monotonic_ns()``."""
        return time.monotonic_ns()

    def __repr__(self) -> str:
        return "MonotonicClock()"


class FakeClock:
    """A clock that moves only when told to, for tests.

    Args:
        start_ns: The initial reading.
    """

    def __init__(self, start_ns: int = 0) -> None:
        if start_ns < 0:
            raise ValueError(f"start_ns must be >= 0, got {start_ns}")
        self._now = start_ns

    def now_ns(self) -> int:
        """Returns the current fake time."""
        return self._now

    def advance(self, ns: int) -> None:
        """Moves time forward by ``ns`` nanoseconds.

        Raises:
            ValueError: ``ns`` is negative (the clock is monotonic).
        """
        if ns < 0:
            raise ValueError(f"a monotonic clock cannot go back ({ns} ns)")
        self._now += ns

    def __repr__(self) -> str:
        return f"FakeClock(now_ns={self._now})"


#: The clock used when none is injected.
DEFAULT_CLOCK: Clock = MonotonicClock()


class Stopwatch:
    """Measures one interval on a clock; a context manager or explicit start/stop.

    Args:
        clock: The time source; defaults to :data:`DEFAULT_CLOCK`.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock if clock is not None else DEFAULT_CLOCK
        self._start: int | None = None
        self._stop: int | None = None

    def start(self) -> Stopwatch:
        """Starts (or restarts) the interval."""
        self._start, self._stop = self.clock.now_ns(), None
        return self

    def stop(self) -> int:
        """Ends the interval and returns its length in microseconds."""
        if self._start is None:
            raise RuntimeError("Stopwatch.stop() before start()")
        self._stop = self.clock.now_ns()
        return self.elapsed_us

    @property
    def elapsed_ns(self) -> int:
        """Nanoseconds from start to stop, or to now while running."""
        if self._start is None:
            raise RuntimeError("Stopwatch not started")
        end = self._stop if self._stop is not None else self.clock.now_ns()
        return end - self._start

    @property
    def elapsed_us(self) -> int:
        """Whole microseconds (truncated), the unit of ``Timing``."""
        return self.elapsed_ns // NS_PER_US

    def __enter__(self) -> Stopwatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
