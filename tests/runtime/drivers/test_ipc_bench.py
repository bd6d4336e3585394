"""The raw transport round trip used by the runtime benchmark."""
from runtime.drivers.ipc.bench import raw_round_trip


def test_raw_round_trip_between_two_processes():
    stats = raw_round_trip(iterations=200, warmup=20)
    assert stats.iterations == 200
    assert 0 < stats.p10_us <= stats.median_us <= stats.p90_us < 50_000
