"""Timing records: the in-driver >= on-device rule, None accessors, fenced durations."""
import dataclasses

import pytest

from nnscope.timing import NO_TIMING, UINT64_MAX, Duration, FencedTiming, MeasureTiming, Timing


def test_constants_and_enum_numbering():
    assert UINT64_MAX == 2**64 - 1 == 18446744073709551615
    assert (MeasureTiming.NO, MeasureTiming.YES) == (0, 1)
    assert [(d.name, int(d)) for d in Duration] == [
        ("ON_HARDWARE", 0), ("IN_DRIVER", 1), ("FENCED_ON_HARDWARE", 2), ("FENCED_IN_DRIVER", 3)]


def test_default_is_not_available():
    timing = Timing()
    assert (timing.time_on_device, timing.time_in_driver) == (UINT64_MAX, UINT64_MAX)
    assert (timing.on_device, timing.in_driver) == (None, None)
    assert timing == NO_TIMING


def test_from_us_maps_none_to_uint64_max():
    timing = Timing.from_us(on_device=None, in_driver=17)
    assert timing == Timing(time_on_device=UINT64_MAX, time_in_driver=17)
    assert (timing.on_device, timing.in_driver) == (None, 17)


def test_zero_is_a_real_measurement_not_missing():
    timing = Timing(0, 0)
    assert (timing.on_device, timing.in_driver) == (0, 0)


@pytest.mark.parametrize("on_device, in_driver", [(5, 5), (5, 9), (None, 3), (3, None),
                                                  (0, UINT64_MAX - 1)])
def test_valid_pairs(on_device, in_driver):
    Timing.from_us(on_device, in_driver).validate()


def test_in_driver_below_on_device_is_rejected():
    with pytest.raises(ValueError, match=r"time_in_driver \(4 us\) is less than time_on_device \(5 us\)"):
        Timing(time_on_device=5, time_in_driver=4)


@pytest.mark.parametrize("value", [-1, 2**64])
def test_out_of_range_is_rejected(value):
    with pytest.raises(ValueError, match="outside"):
        Timing(time_on_device=value)


@pytest.mark.parametrize("value", [1.5, "3", True, None])
def test_non_integers_are_rejected(value):
    with pytest.raises(TypeError):
        Timing(time_in_driver=value)


def test_int_like_values_are_normalised_to_int():
    class Micros:
        def __index__(self):
            return 12

    timing = Timing(Micros(), Micros())
    assert type(timing.time_on_device) is int and timing.in_driver == 12


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Timing().time_on_device = 1


def test_timing_get_non_fenced_codes():
    timing = Timing.from_us(10, None)
    assert timing.get(Duration.ON_HARDWARE) == 10
    assert timing.get(1) is None
    with pytest.raises(ValueError, match="FENCED_ON_HARDWARE"):
        timing.get(Duration.FENCED_ON_HARDWARE)
    with pytest.raises(ValueError):
        timing.get(4)


def test_fenced_timing_picks_launched_or_fenced():
    fenced = FencedTiming(launched=Timing(100, 250), fenced=Timing.from_us(None, 40))
    assert [fenced.get(d) for d in Duration] == [100, 250, None, 40]


def test_fenced_timing_defaults_and_unfenced():
    assert [FencedTiming().get(d) for d in Duration] == [None] * 4
    assert [FencedTiming.unfenced(Timing(3, 8)).get(d) for d in Duration] == [3, 8, 3, 8]
