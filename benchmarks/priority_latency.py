"""Priorities under load: the built-in MobileNet-style model on one driver process, compiled
twice (``set_priority(LOW)`` and ``set_priority(HIGH)``), in the same run:

1. idle: the high-priority compilation's execution latency with nothing else running;
2. loaded: ``--threads`` threads flood the same driver with low-priority executions (each
   thread's executions back to back), and the high-priority execution is timed again, spaced by
   ``--gap-ms`` so that the flood refills the driver's queue in between;
3. the low-priority executions' own latency during the flood.

The driver queues by priority and preempts a running low-priority execution at its next
operation boundary (``runtime.drivers.ipc.service.scheduler``), so the loaded high-priority latency
should stay within 1.5x of idle (target), and well below the low-priority latency.

With ``--burst`` the high-priority executions are frames of one burst (run outside the driver's
queue, ranked by priority through ``Scheduler.exclusive``). ``tests/runtime/test_priority.py``
checks the order these rest on; this script measures the speed.

Usage:
    python benchmarks/priority_latency.py [--runs N] [--threads N] [--driver NAME] [--burst]

Prints the figures, writes ``benchmarks/results/priority_latency.json`` and prints the same JSON
object as the last line (keys ``high_prio_idle_ms``, ``high_prio_loaded_ms``,
``low_prio_loaded_ms``: medians; ``loaded_over_idle``; p90s; the load average).
"""
from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import numpy as np

from _common import reusable_execution, write_results
from nnscope.runtime import Burst, Compilation, manager
from nnscope.runtime.builtin_models import mobilenet, sample_input
from nnscope.runtime.hal.types import Priority


def compiled(model, device, priority: Priority) -> Compilation:
    compilation = Compilation.for_devices(model, [device])
    compilation.set_priority(priority)
    compilation.finish()
    return compilation


def timed(execution, burst=None) -> float:
    """Milliseconds of one ``compute()`` (a ``burst_compute`` frame when ``burst`` is given)."""
    start = time.perf_counter()
    execution.compute() if burst is None else execution.burst_compute(burst)
    return (time.perf_counter() - start) * 1e3


def flood(compilation, inputs, stop: threading.Event, latencies: list, outputs: list) -> None:
    execution, out = reusable_execution(compilation, inputs)
    while not stop.is_set():
        latencies.append(timed(execution))
    outputs.append(out[0].copy())


def p90(values: list) -> float:
    return float(np.percentile(values, 90))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="high-priority executions per condition")
    parser.add_argument("--threads", type=int, default=4, help="threads flooding low-priority work")
    parser.add_argument("--gap-ms", type=float, default=30.0, help="pause between loaded high runs")
    parser.add_argument("--driver", default="sample-all")
    parser.add_argument("--burst", action="store_true",
                        help="run the high-priority executions as frames of one burst")
    args = parser.parse_args()

    device = manager.get_device(args.driver)
    model = mobilenet()
    inputs = sample_input(model)
    low, high = compiled(model, device, Priority.LOW), compiled(model, device, Priority.HIGH)
    high_execution, high_out = reusable_execution(high, inputs)
    burst = Burst(high) if args.burst else None
    for _ in range(3):  # warm: the driver's estimate of the model moves it to the scheduler
        timed(high_execution, burst)
        timed(reusable_execution(low, inputs)[0])
    idle = [timed(high_execution, burst) for _ in range(args.runs)]
    expected = high_out[0].copy()

    stop, low_ms, low_outputs = threading.Event(), [], []
    threads = [threading.Thread(target=flood, args=(low, inputs, stop, low_ms, low_outputs))
               for _ in range(args.threads)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    loaded = []
    for _ in range(args.runs):
        loaded.append(timed(high_execution, burst))
        if not np.array_equal(high_out[0], expected):
            raise SystemExit("priority_latency: a high-priority output differs from the idle one")
        time.sleep(args.gap_ms / 1e3)
    stop.set()
    for thread in threads:
        thread.join()
    if any(not np.array_equal(out, expected) for out in low_outputs):
        raise SystemExit("priority_latency: a low-priority output differs from the idle one")

    idle_ms, loaded_ms, low_med = (statistics.median(v) for v in (idle, loaded, low_ms))
    print(f"high priority idle   median {idle_ms:8.2f} ms  p90 {p90(idle):8.2f} ms")
    print(f"high priority loaded median {loaded_ms:8.2f} ms  p90 {p90(loaded):8.2f} ms  "
          f"({loaded_ms / idle_ms:.2f}x idle; target <= 1.5x)")
    print(f"low priority loaded  median {low_med:8.2f} ms  p90 {p90(low_ms):8.2f} ms  "
          f"({len(low_ms)} executions from {args.threads} threads)")
    if burst is not None:
        burst.free()
    write_results("priority_latency", {
        "driver": args.driver, "threads": args.threads, "runs": args.runs, "burst": args.burst,
        "high_prio_idle_ms": round(idle_ms, 3), "high_prio_loaded_ms": round(loaded_ms, 3),
        "low_prio_loaded_ms": round(low_med, 3), "loaded_over_idle": round(loaded_ms / idle_ms, 3),
        "high_prio_idle_p90_ms": round(p90(idle), 3), "high_prio_loaded_p90_ms": round(p90(loaded), 3),
        "low_prio_loaded_p90_ms": round(p90(low_ms), 3), "load_average": round(os.getloadavg()[0], 2)})


if __name__ == "__main__":
    main()
