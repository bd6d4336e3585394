"""Compilation caching: the built-in MobileNet-style model compiled on a driver process,
uncached next to prepared from the cache, in alternating rounds of the same run.

Each round times ``Compilation.for_devices(model, [driver])`` + ``finish()`` three times:
without caching (partitioning asks the driver ``getSupportedOperations``, then
``prepareModel_1_3`` sends the model and the driver validates it and plans its executor); with
``set_caching`` right after the cache files were touched (``cold``: ``prepareModelFromCache_1_3``
reads and checks both files again and restores the executor's plan); and with ``set_caching``
on files the driver verified before and that did not change since (``cache_files.MEMO``: nothing is
read again, the restored executor is copied). The last is ``cache_speedup``, what an
application's second start-up sees while the driver runs; the cold one is reported next to it.
Every compilation runs the same input once per round outside the timed part, and all outputs
must be identical. Also timed once: the first cached compilation, which writes the cache files.

Usage:
    python benchmarks/cache_speedup.py [--rounds N] [--driver NAME]

Prints the figures, writes ``benchmarks/results/cache_speedup.json`` and prints the same JSON
object as the last line (keys ``uncached_ms``, ``cached_ms``, ``cold_cached_ms``,
``first_with_cache_ms``, ``cold_cache_speedup`` and ``cache_speedup``: median uncached / median
cached wall time; target >= 5). Wall time on a
loaded machine is mostly waiting for a CPU, so the CPU time both processes spend per
compilation (``clock_getcpuclockid`` of the driver + ``process_time`` of this process) is given
too (``uncached_cpu_ms``, ``cached_cpu_ms``, ``cache_cpu_speedup``), with the load average.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import tempfile
import time

import numpy as np

from _common import reusable_execution, write_results
from nnscope.runtime import Compilation, manager
from nnscope.runtime.builtin_models import mobilenet, sample_input


def process_clock(pid: int) -> int | None:
    """The CPU-time clock id of process ``pid`` (``clock_getcpuclockid``), None if unavailable."""
    clock = ctypes.c_int()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
            return None
        time.clock_gettime_ns(clock.value)
    except (OSError, AttributeError):
        return None
    return clock.value


def cpu_ns(driver_clock: int | None) -> int:
    """CPU time used so far by this process and the driver process."""
    driver = time.clock_gettime_ns(driver_clock) if driver_clock is not None else 0
    return time.process_time_ns() + driver


def compile_once(model, device, cache: tuple | None, driver_clock=None) -> tuple[Compilation, float, float]:
    """(finished compilation, wall ms, CPU ms of both processes)."""
    cpu_start, start = cpu_ns(driver_clock), time.perf_counter()
    compilation = Compilation.for_devices(model, [device])
    if cache is not None:
        compilation.set_caching(*cache)
    compilation.finish()
    wall = (time.perf_counter() - start) * 1e3
    return compilation, wall, (cpu_ns(driver_clock) - cpu_start) / 1e6


def outputs_of(compilation, inputs) -> np.ndarray:
    execution, outputs = reusable_execution(compilation, inputs)
    execution.compute()
    return outputs[0].copy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--driver", default="sample-all")
    args = parser.parse_args()
    model = mobilenet()
    inputs = sample_input(model)
    device = manager.get_device(args.driver)
    manager.start_devices([device])
    with tempfile.TemporaryDirectory(prefix="nnscope-cache-") as directory:
        cache = (directory, os.urandom(32))
        clock = process_clock(device.pid)
        compile_once(model, device, None)[0].free()  # warm up imports and the driver
        first, first_ms, _ = compile_once(model, device, cache)
        reference = outputs_of(first, inputs)
        first.free()
        uncached, cached, cold, cpu = [], [], [], {"uncached": [], "cached": [], "cold": []}
        for _ in range(args.rounds):
            for kind, times in (("uncached", uncached), ("cold", cold), ("cached", cached)):
                if kind == "cold":  # a touched file is one the driver must read and verify again
                    for name in os.listdir(directory):
                        os.utime(os.path.join(directory, name))
                compilation, ms, cpu_ms = compile_once(model, device, None if kind == "uncached" else cache,
                                                       clock)
                times.append(ms)
                cpu[kind].append(cpu_ms)
                if not np.array_equal(outputs_of(compilation, inputs), reference):
                    raise SystemExit(f"{kind} compilation gave different outputs")
                compilation.free()
        cache_bytes = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))
    uncached_ms, cached_ms = statistics.median(uncached), statistics.median(cached)
    ratios = [u / c for u, c in zip(uncached, cached)]
    print(f"driver {args.driver}, model {model.name}, {args.rounds} alternating rounds")
    print(f"uncached compile   median {uncached_ms:7.2f} ms  (min {min(uncached):.2f})")
    print(f"from cache compile median {cached_ms:7.2f} ms  (min {min(cached):.2f})")
    cold_ms = statistics.median(cold)
    print(f"from cache, files changed since the driver verified them (read and checked again): "
          f"median {cold_ms:.2f} ms ({uncached_ms / cold_ms:.2f}x)")
    cpu_uncached, cpu_cached = statistics.median(cpu["uncached"]), statistics.median(cpu["cached"])
    if clock is not None:
        print(f"CPU time (runtime + driver process) median: uncached {cpu_uncached:.2f} ms, "
              f"from cache {cpu_cached:.2f} ms ({cpu_uncached / cpu_cached:.2f}x)")
    print(f"first compile writing the cache {first_ms:.2f} ms; cache files {cache_bytes} bytes")
    print(f"speed-up {uncached_ms / cached_ms:.2f}x (median of per-round ratios "
          f"{statistics.median(ratios):.2f}x); outputs identical in every round")
    write_results("cache_speedup", {
        "driver": args.driver, "model": model.name, "rounds": args.rounds,
        "uncached_ms": round(uncached_ms, 3), "cached_ms": round(cached_ms, 3),
        "uncached_min_ms": round(min(uncached), 3), "cached_min_ms": round(min(cached), 3),
        "first_with_cache_ms": round(first_ms, 3), "cache_file_bytes": cache_bytes,
        "per_round_ratio_median": round(statistics.median(ratios), 3),
        "uncached_cpu_ms": round(cpu_uncached, 3) if clock is not None else None,
        "cached_cpu_ms": round(cpu_cached, 3) if clock is not None else None,
        "cache_cpu_speedup": round(cpu_uncached / cpu_cached, 3) if clock is not None else None,
        "cold_cached_ms": round(cold_ms, 3), "cold_cache_speedup": round(uncached_ms / cold_ms, 3),
        "load_average": os.getloadavg()[0],
        "cache_speedup": round(uncached_ms / cached_ms, 3)})


if __name__ == "__main__":
    main()
