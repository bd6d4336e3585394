"""The raw transport round trip used by the runtime benchmark (its speed is the benchmark's to
report: ``benchmarks/runtime_latency.py``)."""
import time

from nnscope.runtime.drivers.ipc.bench import raw_round_trip


def test_raw_round_trip_between_two_processes():
    start = time.monotonic_ns()
    stats = raw_round_trip(iterations=200, warmup=20)
    elapsed_us = (time.monotonic_ns() - start) / 1e3
    assert stats.iterations == 200
    assert 0 < stats.p10_us <= stats.median_us <= stats.p90_us
    # microseconds of one round trip each: half of the 200 took the median or more, within the call
    assert 100 * stats.median_us <= elapsed_us
