"""What partitioning costs: a model across every device (``all``) against its best single device.

For each model (the built-in MobileNet, the shipped face detector, and the 90-operation
``conv_pad_chain`` whose every operation is a step of its own) the script compiles the default
plan over every sample driver with CPU fallback (``all``) and the model on each single device that
runs it whole, then times reusable ``Execution.compute()`` calls of all cases in interleaved
rounds (order rotating, so that load from other processes hits them alike). Figures are medians
of per-round medians; the ratio is the median of per-round ratios against the best single device.

The per-boundary cost is measured on a tiny ``conv_pad_chain`` (1x1x1 tensors: the kernels cost
next to nothing), as ``(all - sample-all) / boundaries``, beside one IPC round trip to a driver
(a PING through ``RemoteDevice.transact``). CPU time (this process and every driver process, from
``/proc``) is reported too: unlike wall time it does not move with other processes' load.

From its second execution on, ``all`` runs its steps fenced (``runtime._steps``: each step an
``executeFenced`` waiting for the sync fence of the one before, launched back to back), so the
figures are those of fenced runs, traced or not (``benchmarks/observer_effect.py`` compares
the two).

Targets: MobileNet ``all`` at most 1.1x its best single device, the face detector at most 1.5x.
``all`` is every registered driver: with LiteRT installed ``sample-litert`` takes both models
whole, so run it once more with ``NNSCOPE_DRIVERS`` naming the CPU-kernel drivers only
(``sample-all,sample-float-fast,sample-float-slow,sample-quant,sample-minimal``) to see the
cost of a partitioned plan's boundaries.

Usage:
    python benchmarks/partition_cost.py [--rounds N] [--runs N] [--traced] [--fifo]

``--traced`` measures everything inside a ``TraceSession`` that every driver joins. ``--fifo``
measures under ``SCHED_FIFO`` (root or CAP_SYS_NICE): on a machine shared with other work, the
figures of an otherwise idle one (other processes' load otherwise stands between a fence
signalling and the driver that waits for it, 24 times an execution for the face detector).

Prints human-readable lines, writes ``benchmarks/results/partition_cost.json`` and prints the
same JSON object as the last line.
"""
from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from nnscope import tracing  # noqa: E402
from nnscope.runtime import Compilation, Model, manager  # noqa: E402
from nnscope.runtime.builtin_models import conv_pad_chain, mobilenet, sample_input  # noqa: E402
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType  # noqa: E402
from nnscope.runtime.tflite import load_tflite  # noqa: E402

from _common import add_fifo_option, reusable_execution, use_fifo, write_results  # noqa: E402

FACE = Path(__file__).resolve().parent.parent / "tests" / "data" / "models" / "face_detection_short_range.tflite"
TARGETS = {"mobilenet": 1.1, "face_detection_short_range": 1.5}
SINGLE = ("sample-all", "nnapi-reference", "sample-float-fast", "sample-litert")
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _models() -> dict[str, Model]:
    return {"mobilenet": mobilenet(),
            "face_detection_short_range": Model.from_hal(load_tflite(FACE)[0], name="face_detection_short_range"),
            "conv_pad_chain_90": conv_pad_chain(90),
            "tiny_chain_90": conv_pad_chain(90, size=1, channels=1)}


def _cases(model: Model) -> dict:
    """name -> finished compilation: ``all`` and each single device that runs the whole model."""
    devices = {device.name: device for device in (*manager.devices(), manager.cpu_device())}
    cases = {"all": Compilation(model)}
    for name in SINGLE:
        if name in devices and all(devices[name].supported_operations(model.to_hal())):
            cases[name] = Compilation.for_devices(model, [devices[name]])
    for compilation in cases.values():
        compilation.finish()
    return cases


def _cpu_s(pids) -> float:
    total = time.process_time()
    for pid in pids:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) * _TICK_S
    return total


def _timed(execution, runs: int, pids) -> tuple[float, float]:
    """(median wall ms, CPU ms per compute of this process and the drivers)."""
    samples, cpu = [], _cpu_s(pids)
    for _ in range(runs):
        start = time.perf_counter_ns()
        execution.compute()
        samples.append(time.perf_counter_ns() - start)
    return float(np.median(samples)) / 1e6, (_cpu_s(pids) - cpu) * 1e3 / runs


def measure(model: Model, rounds: int, runs: int, pids) -> dict:
    cases = _cases(model)
    inputs = sample_input(model)
    executions = {name: reusable_execution(c, inputs)[0] for name, c in cases.items()}
    for execution in executions.values():
        execution.compute()
    names = list(executions)
    wall = {name: [] for name in names}
    cpu = {name: [] for name in names}
    for index in range(rounds):
        for name in names[index % len(names):] + names[:index % len(names)]:
            ms, cpu_ms = _timed(executions[name], runs, pids)
            wall[name].append(ms)
            cpu[name].append(cpu_ms)
    singles = [name for name in names if name != "all"]
    best = [min(wall[name][r] for name in singles) for r in range(rounds)]
    result = {"steps": len(cases["all"].plan.steps),
              "median_ms": {name: round(float(np.median(v)), 3) for name, v in wall.items()},
              "cpu_ms": {name: round(float(np.median(v)), 3) for name, v in cpu.items()},
              "best_single": min(singles, key=lambda name: np.median(wall[name])),
              "ratio": round(float(np.median([a / b for a, b in zip(wall["all"], best)])), 3)}
    for compilation in cases.values():
        compilation.free()
    return result


def ipc_round_trip_us(runs: int = 2000) -> float:
    device = next(d for d in manager.devices() if d.name == "sample-all")
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        device.transact(MsgType.PING, b"x")
        samples.append(time.perf_counter_ns() - start)
    return float(np.median(samples)) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--traced", action="store_true",
                        help="measure inside a TraceSession that every driver joins")
    add_fifo_option(parser)
    args = parser.parse_args()
    args.fifo = use_fifo(args.fifo)
    manager.start_devices(manager.devices())
    with tracing.TraceSession() if args.traced else contextlib.nullcontext():
        for device in manager.devices():
            device.launch()  # a running driver joins the session (or stays out of none)
        _run(args)


def _run(args) -> None:
    pids = [d.pid for d in manager.devices() if getattr(d, "pid", None) is not None]
    results = {"rounds": args.rounds, "runs": args.runs, "targets": TARGETS, "models": {},
               "drivers": [d.name for d in manager.devices()], "traced": args.traced, "fifo": args.fifo}
    for name, model in _models().items():
        figures = measure(model, args.rounds, args.runs, pids)
        results["models"][name] = figures
        print(f"{name}: {figures['steps']} steps on all; " + ", ".join(
            f"{case} {ms:.2f} ms (cpu {figures['cpu_ms'][case]:.2f})" for case, ms in figures["median_ms"].items())
            + f"; all / best single ({figures['best_single']}) = {figures['ratio']:.2f}x"
            + (f" (target <= {TARGETS[name]}x)" if name in TARGETS else ""))
    tiny = results["models"]["tiny_chain_90"]
    results["ipc_round_trip_us"] = round(ipc_round_trip_us(), 1)
    if tiny["steps"] > 1:
        boundaries = tiny["steps"] - 1
        results["boundary_us"] = round((tiny["median_ms"]["all"] - tiny["median_ms"]["sample-all"])
                                       * 1e3 / boundaries, 1)
        results["boundary_cpu_us"] = round((tiny["cpu_ms"]["all"] - tiny["cpu_ms"]["sample-all"])
                                           * 1e3 / boundaries, 1)
        print(f"per step boundary: {results['boundary_us']:.1f} us wall, {results['boundary_cpu_us']:.1f} us "
              f"CPU; one IPC round trip (PING): {results['ipc_round_trip_us']:.1f} us")
    else:
        print("the chain ran as one step (one driver takes it whole): no boundary to time; "
              f"one IPC round trip (PING): {results['ipc_round_trip_us']:.1f} us")
    litert = "sample-litert" in results["drivers"]
    write_results(("partition_cost" if litert else "partition_cost_cpu_kernels")
                  + ("_traced" if args.traced else ""), results)


if __name__ == "__main__":
    main()
