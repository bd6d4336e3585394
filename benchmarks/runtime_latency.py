"""Latency of ``Execution.compute()`` in-process on ``nnapi-reference``, tracing off and on.

Measures the tiny model (ADD of two float32 [1, 4]) with a reused execution (the hot path:
the request is built once, the device caches its views), with tracing off and inside a
``TraceSession``; the two modes alternate in short rounds so machine noise hits both alike,
and the figures are medians over rounds (overhead: median of per-round ratios). Also times
the full NNAPI cycle per run (create, setInput x2, setOutput, compute, free) and the built-in
MobileNet-style model. Targets: tiny compute() median <= 30 us off, tracing on adds <= 20 %.

Through a driver process: the tiny model compiled for ``sample-all`` only (its own process,
``Compilation.for_devices``), compute() median and p99, next to the raw round trip of a small
record to an echo process over the same transport (``runtime.drivers.ipc.bench``), measured in
interleaved rounds of the same run. Targets: driver compute() median <= 150 us and <= 3x the
raw round trip. In the same rounds, ``burst_compute()`` through one burst (FMQ rings, the
driver's listener thread), each execution followed by the round trip of a 60-byte echo message
through the same burst's rings and listener (``BurstController.echo``): the floor, timed one
for one with the executions, so that both see the same thread placement and machine speed.
Targets: burst <= 2x that floor and <= 0.6x driver compute(). Also reported, not a target:
``fmq_process_roundtrip_us``, the same message between this process and a separate echo
process over two fresh FMQs (``bench.fmq_round_trip``). The headline figures leave CPU
placement to the scheduler, which may keep a ping-ponging pair on one CPU (then both
processes' caches go cold at each switch) or put the two on different CPUs; with two CPUs or
more both pairs are also measured pinned alike, on different CPUs and on one CPU
(``driver_placements``). The built-in model is also timed per device (and on the default
all-device plan).

Usage:
    python benchmarks/runtime_latency.py [--runs N] [--rounds N] [--builtin-runs N]

Prints human-readable lines, writes ``benchmarks/results/runtime_latency.json`` and prints the
same JSON object as the last line (keys include ``inproc_us``, ``inproc_traced_us``,
``driver_us``, ``raw_roundtrip_us``, ``burst_us``, ``fmq_roundtrip_us`` and
``builtin_per_device_ms``).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import time

import numpy as np

from nnscope import tracing
from nnscope.runtime import Burst, Compilation, Execution, NnError, manager
from nnscope.runtime.drivers.ipc import bench
from nnscope.runtime.drivers.ipc.wire.fmq_datum import encode_echo
from nnscope.runtime.manager import cpu_device
from nnscope.runtime.builtin_models import mobilenet, sample_input, tiny_add

from _common import reusable_execution, write_results

TARGETS = {"inproc_us": 30.0, "traced_overhead_pct": 20.0, "driver_us": 150.0,
           "driver_vs_raw": 3.0, "burst_vs_fmq": 2.0, "burst_vs_driver": 0.6}
#: Devices the built-in model is timed on (those that cannot run all of it are reported as such).
BUILTIN_DEVICES = ("nnapi-reference", "sample-all", "sample-float-fast", "sample-minimal")


def _prepared_execution(model, device=None):
    """A reusable execution of ``model`` compiled for ``device`` (default: the in-process CPU;
    ``"all"``: the default plan over every device)."""
    if device == "all":
        compilation = Compilation(model)
    else:
        compilation = Compilation.for_devices(model, [device or cpu_device()])
    compilation.finish()
    inputs = sample_input(model)
    execution, outputs = reusable_execution(compilation, inputs)
    return compilation, execution, inputs, outputs


def _time_compute(execution, runs: int) -> list[int]:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        start = clock()
        execution.compute()
        samples.append(clock() - start)
    return samples


def _time_burst(execution, burst, runs: int) -> list[int]:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        start = clock()
        execution.burst_compute(burst)
        samples.append(clock() - start)
    return samples


def _time_cycle(compilation, inputs, outputs, runs: int) -> list[int]:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        start = clock()
        execution = Execution(compilation)
        for index, value in enumerate(inputs):
            execution.set_input(index, value)
        for index, buffer in enumerate(outputs):
            execution.set_output(index, buffer)
        execution.compute()
        execution.free()
        samples.append(clock() - start)
    return samples


def _stats(samples_ns: list[int]) -> tuple[float, float]:
    us = np.asarray(samples_ns, np.float64) / 1000
    return float(np.median(us)), float(np.percentile(us, 99))


def measure_tiny(runs: int, rounds: int) -> dict:
    """Tiny ADD: ``rounds`` interleaved batches of ``runs`` computes per mode (off, traced).

    Each round times both modes back to back, in alternating order, so load from other
    processes hits both alike; medians are taken per round, then over rounds, and the overhead
    is the median of the per-round ratios.
    """
    compilation, execution, inputs, outputs = _prepared_execution(tiny_add())
    _time_compute(execution, 2000)  # warm caches
    with tracing.TraceSession():
        _time_compute(execution, 2000)
    off, on, cycle_off, cycle_on, ratios = [], [], [], [], []
    for index in range(rounds):
        batch = {}
        for traced in ((False, True) if index % 2 == 0 else (True, False)):
            if traced:
                with tracing.TraceSession():
                    batch[traced] = _time_compute(execution, runs)
                    cycle_on += _time_cycle(compilation, inputs, outputs, max(1, runs // 10))
            else:
                batch[traced] = _time_compute(execution, runs)
                cycle_off += _time_cycle(compilation, inputs, outputs, max(1, runs // 10))
        off.append(_stats(batch[False]))
        on.append(_stats(batch[True]))
        ratios.append(on[-1][0] / off[-1][0])
    off_med, off_p99 = (float(x) for x in np.median(off, axis=0))
    on_med, on_p99 = (float(x) for x in np.median(on, axis=0))
    return {"inproc_us": round(off_med, 2), "inproc_p99_us": round(off_p99, 2),
            "inproc_traced_us": round(on_med, 2), "inproc_traced_p99_us": round(on_p99, 2),
            "traced_overhead_pct": round(100 * (float(np.median(ratios)) - 1), 1),
            "rounds": rounds, "runs_per_round": runs,
            "cycle_us": round(_stats(cycle_off)[0], 2), "cycle_traced_us": round(_stats(cycle_on)[0], 2)}


def measure_builtin(runs: int) -> dict:
    model = mobilenet()
    _, execution, _, _ = _prepared_execution(model)
    execution.compute()
    off = _time_compute(execution, runs)
    with tracing.TraceSession():
        on = _time_compute(execution, runs)
    (off_med, off_p99), (on_med, on_p99) = _stats(off), _stats(on)
    return {"builtin_model": model.name, "builtin_ms": round(off_med / 1000, 2),
            "builtin_p99_ms": round(off_p99 / 1000, 2), "builtin_traced_ms": round(on_med / 1000, 2),
            "builtin_traced_p99_ms": round(on_p99 / 1000, 2)}


def measure_driver(runs: int, rounds: int) -> dict:
    """Tiny ADD through a ``sample-all`` process, compute() (socket) and burst_compute() (FMQ),
    next to the raw round trips of the same transports (socket echo, FMQ echo), in ``rounds``
    interleaved batches (medians per batch, then over batches): as the scheduler places the
    processes, then (with two CPUs or more) with both pairs pinned alike, client and peer on
    different CPUs (``cross``) and on one CPU (``same``)."""
    manager.forTest_reset()  # fresh driver processes, started by this measurement
    device = manager.get_device("sample-all")
    compilation, execution, _, _ = _prepared_execution(tiny_add(), device)
    burst = Burst(compilation)
    _time_compute(execution, 1000)  # warm the driver, the encoders and the pools
    _time_burst_and_echo(execution, burst, 1000)
    placements = {"unpinned": None}
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        placements.update(cross=({cpus[0]}, {cpus[1]}), same=({cpus[0]}, {cpus[0]}))
    samples: dict = {name: {key: [] for key in _DRIVER_KEYS} for name in placements}
    for _ in range(rounds):
        for name, pins in placements.items():
            with _pinned(pins, device.pid):
                _round(samples[name], execution, burst, runs, pins and pins[1])
    burst.free()
    results = {name: _driver_figures(figures) for name, figures in samples.items()}
    return {**results.pop("unpinned"), "driver_rounds": rounds, "driver_placements": results}


_DRIVER_KEYS = ("driver", "burst", "raw", "fmq", "fmq_process")
#: Datums of the echo message (60 bytes, 64 with the FMQ's length prefix).
_ECHO_DATUMS = 3


def _round(samples: dict, execution, burst, runs: int, peer_cpus) -> None:
    _time_compute(execution, 100)  # settle after a move
    samples["driver"].append(_stats(_time_compute(execution, runs)))
    _time_burst(execution, burst, 100)  # settle after a move
    bursts, echoes = _time_burst_and_echo(execution, burst, runs)
    samples["burst"].append(_stats(bursts))
    samples["fmq"].append(_stats(echoes)[0])
    samples["raw"].append(bench.raw_round_trip(iterations=runs, warmup=100, peer_cpus=peer_cpus).median_us)
    poll_s = burst.controllers[0].poll_s  # the echo process waits as the burst's controller does
    samples["fmq_process"].append(bench.fmq_round_trip(iterations=runs, warmup=100, peer_cpus=peer_cpus,
                                                       poll_s=poll_s).median_us)


def _time_burst_and_echo(execution, burst, runs: int) -> tuple[list[int], list[int]]:
    """``runs`` burst executions, each followed by the round trip of an echo message through
    the same burst's rings and listener thread (the floor): the two see the same placement of
    the threads and the same machine speed (seen here: the floor alone flips between about
    4.6 and 8.5 us from one second to the next)."""
    controller, message = burst.controllers[0], encode_echo(_ECHO_DATUMS)
    clock, bursts, echoes = time.perf_counter_ns, [], []
    for _ in range(runs):
        start = clock()
        execution.burst_compute(burst)
        middle = clock()
        controller.echo(message)
        bursts.append(middle - start)
        echoes.append(clock() - middle)
    return bursts, echoes


def _driver_figures(figures: dict) -> dict:
    driver_med, driver_p99 = (float(x) for x in np.median(figures["driver"], axis=0))
    burst_med, burst_p99 = (float(x) for x in np.median(figures["burst"], axis=0))
    raw, fmq = float(np.median(figures["raw"])), float(np.median(figures["fmq"]))
    burst_vs_fmq = [burst[0] / floor for burst, floor in zip(figures["burst"], figures["fmq"])]
    return {"driver_us": round(driver_med, 2), "driver_p99_us": round(driver_p99, 2),
            "raw_roundtrip_us": round(raw, 2), "driver_vs_raw": round(driver_med / raw, 2),
            "burst_us": round(burst_med, 2), "burst_p99_us": round(burst_p99, 2),
            "fmq_roundtrip_us": round(fmq, 2), "burst_vs_fmq": round(float(np.median(burst_vs_fmq)), 2),
            "fmq_process_roundtrip_us": round(float(np.median(figures["fmq_process"])), 2),
            "burst_vs_driver": round(burst_med / driver_med, 2)}


@contextlib.contextmanager
def _pinned(pins: tuple[set[int], set[int]] | None, peer_pid: int):
    """Pin this process to ``pins[0]`` and every thread of ``peer_pid`` (the burst listener
    too: an affinity is per thread) to ``pins[1]`` (None: leave both)."""
    if pins is None:
        yield
        return
    threads = [int(tid) for tid in os.listdir(f"/proc/{peer_pid}/task")]
    mine, peers = os.sched_getaffinity(0), {tid: os.sched_getaffinity(tid) for tid in threads}
    os.sched_setaffinity(0, pins[0])
    for tid in threads:
        os.sched_setaffinity(tid, pins[1])
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)
        for tid, cpus in peers.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(tid, cpus)


def measure_builtin_per_device(runs: int) -> dict:
    """Median compute() of the built-in model per device, and on the default plan (``all``)."""
    model = mobilenet()
    timings: dict = {}
    for name in (*BUILTIN_DEVICES, "all"):
        try:
            _, execution, _, _ = _prepared_execution(model, name if name == "all" else
                                                     manager.get_device(name))
        except NnError as error:
            timings[name] = f"cannot run the model: {error.code.name}"
            continue
        execution.compute()
        timings[name] = round(_stats(_time_compute(execution, runs))[0] / 1000, 2)
    manager.shutdown()
    return {"builtin_per_device_ms": timings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="computes per round and mode")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--builtin-runs", type=int, default=10)
    parser.add_argument("--driver-rounds", type=int, default=5,
                        help="interleaved rounds of driver compute() and raw round trips")
    args = parser.parse_args()
    results = measure_tiny(args.runs, args.rounds)
    print(f"tiny ADD compute(): median {results['inproc_us']} us (p99 {results['inproc_p99_us']}), "
          f"traced {results['inproc_traced_us']} us (p99 {results['inproc_traced_p99_us']}), "
          f"overhead {results['traced_overhead_pct']} %")
    print(f"tiny ADD full cycle (create/set/compute/free): {results['cycle_us']} us, "
          f"traced {results['cycle_traced_us']} us")
    results.update(measure_builtin(args.builtin_runs))
    print(f"{results['builtin_model']} compute(): median {results['builtin_ms']} ms "
          f"(p99 {results['builtin_p99_ms']}), traced {results['builtin_traced_ms']} ms")
    results.update(measure_driver(args.runs, args.driver_rounds))
    print(f"tiny ADD compute() via sample-all process: median {results['driver_us']} us "
          f"(p99 {results['driver_p99_us']}); raw round trip {results['raw_roundtrip_us']} us; "
          f"ratio {results['driver_vs_raw']}x")
    print(f"tiny ADD burst_compute() via sample-all: median {results['burst_us']} us "
          f"(p99 {results['burst_p99_us']}); FMQ round trip {results['fmq_roundtrip_us']} us (echo through "
          f"the burst; to a separate process {results['fmq_process_roundtrip_us']} us); "
          f"{results['burst_vs_fmq']}x the FMQ floor, {results['burst_vs_driver']}x compute()")
    for name, figures in results["driver_placements"].items():
        print(f"  pinned {name}-CPU: driver {figures['driver_us']} us, raw {figures['raw_roundtrip_us']} us, "
              f"ratio {figures['driver_vs_raw']}x; burst {figures['burst_us']} us, "
              f"FMQ {figures['fmq_roundtrip_us']} us, {figures['burst_vs_fmq']}x / {figures['burst_vs_driver']}x")
    results.update(measure_builtin_per_device(max(1, args.builtin_runs // 2)))
    print(f"{results['builtin_model']} per device (ms): {results['builtin_per_device_ms']}")
    results["targets"] = TARGETS
    results["targets_met"] = {key: results[key] <= limit for key, limit in TARGETS.items()}
    write_results("runtime_latency", results)


if __name__ == "__main__":
    main()
