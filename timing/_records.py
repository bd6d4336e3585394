"""The timing records: ``MeasureTiming``, ``Timing``, ``Duration``, ``FencedTiming``.

All values are microseconds, as in the HAL's ``Timing`` struct; ``UINT64_MAX``
means "not available". The Pythonic accessors return None instead.

Example:
    >>> t = Timing.from_us(on_device=120, in_driver=None)
    >>> t.on_device, t.in_driver, t.time_in_driver == UINT64_MAX
    (120, None, True)
    >>> FencedTiming.unfenced(t).get(Duration.FENCED_ON_HARDWARE)
    120
"""
from __future__ import annotations

import dataclasses
import enum
import operator

#: The HAL/NDK "not available" marker, ``2**64 - 1``.
UINT64_MAX = 2**64 - 1


class MeasureTiming(enum.IntEnum):
    """Whether an execution should measure its duration (HAL ``MeasureTiming``)."""

    NO = 0
    YES = 1


class Duration(enum.IntEnum):
    """``ANEURALNETWORKS_DURATION_*`` / ``ANEURALNETWORKS_FENCED_DURATION_*`` codes."""

    ON_HARDWARE = 0
    IN_DRIVER = 1
    FENCED_ON_HARDWARE = 2
    FENCED_IN_DRIVER = 3


def _to_us(value: int | None) -> int:
    return UINT64_MAX if value is None else value


def _from_us(value: int) -> int | None:
    return None if value == UINT64_MAX else value


def _check_us(field: str, value: object) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{field} must be an int, not bool")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{field} must be an int, not {type(value).__name__}") from None
    if not 0 <= number <= UINT64_MAX:
        raise ValueError(f"{field} = {number} is outside [0, 2**64-1]")
    return number


@dataclasses.dataclass(frozen=True)
class Timing:
    """How long an execution took, in microseconds; ``UINT64_MAX`` = not available.

    Attributes:
        time_on_device: Time spent on the accelerator.
        time_in_driver: Time spent in the driver, which includes the device time.

    Raises:
        TypeError: A value is not an integer.
        ValueError: A value is outside ``[0, UINT64_MAX]``, or both are known and
            ``time_in_driver < time_on_device``.
    """

    time_on_device: int = UINT64_MAX
    time_in_driver: int = UINT64_MAX

    def __post_init__(self) -> None:
        for field in ("time_on_device", "time_in_driver"):
            object.__setattr__(self, field, _check_us(field, getattr(self, field)))
        self.validate()

    def validate(self) -> None:
        """Checks the driver-includes-device rule; see the class for the errors."""
        on_device, in_driver = self.on_device, self.in_driver
        if on_device is not None and in_driver is not None and in_driver < on_device:
            raise ValueError(f"time_in_driver ({in_driver} us) is less than "
                             f"time_on_device ({on_device} us)")

    @classmethod
    def from_us(cls, on_device: int | None, in_driver: int | None) -> Timing:
        """Builds a Timing from microsecond values, None meaning not available."""
        return cls(_to_us(on_device), _to_us(in_driver))

    @property
    def on_device(self) -> int | None:
        """Time on the device in microseconds, or None when not available."""
        return _from_us(self.time_on_device)

    @property
    def in_driver(self) -> int | None:
        """Time in the driver in microseconds, or None when not available."""
        return _from_us(self.time_in_driver)

    def get(self, duration: Duration) -> int | None:
        """Returns ``ON_HARDWARE`` or ``IN_DRIVER`` in microseconds, or None.

        Raises:
            ValueError: ``duration`` is a fenced code (use :class:`FencedTiming`).
        """
        duration = Duration(duration)
        if duration is Duration.ON_HARDWARE:
            return self.on_device
        if duration is Duration.IN_DRIVER:
            return self.in_driver
        raise ValueError(f"{duration.name} needs a FencedTiming, not a Timing")


#: A Timing with nothing measured.
NO_TIMING = Timing()


@dataclasses.dataclass(frozen=True)
class FencedTiming:
    """The two Timings of a fenced execution (``IFencedExecutionCallback.getExecutionInfo``).

    Attributes:
        launched: From launch until the execution is done.
        fenced: From the moment the wait fences are signalled until done.
    """

    launched: Timing = NO_TIMING
    fenced: Timing = NO_TIMING

    @classmethod
    def unfenced(cls, timing: Timing) -> FencedTiming:
        """Wraps a non-fenced execution's Timing; the fenced codes then report it too.

        This is what the NNAPI runtime does when the execution had no fence callback.
        """
        return cls(timing, timing)

    def get(self, duration: Duration) -> int | None:
        """Returns one duration in microseconds, or None when not available.

        ``ON_HARDWARE`` / ``IN_DRIVER`` come from ``launched``, the ``FENCED_*``
        codes from ``fenced``.
        """
        duration = Duration(duration)
        if duration in (Duration.FENCED_ON_HARDWARE, Duration.FENCED_IN_DRIVER):
            return self.fenced.get(Duration(duration - 2))
        return self.launched.get(duration)
