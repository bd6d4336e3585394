"""Cost of tracing a driver call, trace context included: tiny ADD through ``sample-all``.

``compute()`` (socket) and ``burst_compute()`` (FMQ) of one reusable execution, each with
tracing off and inside a ``TraceSession`` (the driver joins it: since issue 28 every request
then carries the client span's trace context and the driver's server span adopts it). The four
modes alternate in short rounds so machine noise hits them alike; figures are medians over
rounds of per-round medians. Run it from two checkouts one after the other (``PYTHONPATH``) to
compare before and after; ``benchmarks/runtime_latency.py`` covers the untraced figures.

Usage:
    python benchmarks/trace_propagation.py [--runs N] [--rounds N]

Prints one line per mode, writes ``benchmarks/results/trace_propagation.json`` and prints the
same JSON object last (``driver_us``, ``driver_traced_us``, ``burst_us``, ``burst_traced_us``
and the traced overheads in percent).
"""
from __future__ import annotations

import argparse
import statistics

from nnscope import tracing
from nnscope.runtime import Burst, Compilation, manager
from nnscope.runtime.builtin_models import sample_input, tiny_add

from _common import median_ns, reusable_execution, write_results

MODES = ("driver", "driver_traced", "burst", "burst_traced")


def _median_us(run, runs: int) -> float:
    return median_ns(run, runs) / 1000


def measure(runs: int, rounds: int) -> dict:
    manager.forTest_reset()
    model = tiny_add()
    device = manager.get_device("sample-all")
    compilation = Compilation.for_devices(model, [device])
    compilation.finish()
    execution, _ = reusable_execution(compilation, sample_input(model))
    burst = Burst(compilation)
    plain = {"driver": execution.compute, "burst": lambda: execution.burst_compute(burst)}
    samples: dict = {mode: [] for mode in MODES}
    for _ in range(rounds):
        for mode in MODES:
            run = plain[mode.split("_")[0]]
            if mode.endswith("traced"):
                with tracing.TraceSession():
                    manager.start_devices([device])  # the running driver joins the session
                    run()
                    samples[mode].append(_median_us(run, runs))
            else:
                run()
                samples[mode].append(_median_us(run, runs))
    burst.free()
    results = {f"{mode}_us": round(statistics.median(values), 2) for mode, values in samples.items()}
    for kind in ("driver", "burst"):
        results[f"{kind}_traced_overhead_pct"] = round(
            100 * (results[f"{kind}_traced_us"] / results[f"{kind}_us"] - 1), 1)
    return {**results, "runs": runs, "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="calls per round and mode")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    results = measure(args.runs, args.rounds)
    for mode in MODES:
        print(f"tiny ADD {mode.replace('_', ' ')}: median {results[f'{mode}_us']} us")
    write_results("trace_propagation", results)


if __name__ == "__main__":
    main()
