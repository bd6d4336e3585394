"""The observer effect of tracing: ``compute()`` inside a ``TraceSession`` against outside one.

For the built-in MobileNet (what ``nnscope run`` runs by default) and the shipped face detector,
one reusable execution per case is computed untraced and traced in interleaved rounds: each
round times ``--computes`` untraced computes and ``--computes`` traced ones, the order
alternating from round to round, so that load from other processes hits both alike. A traced
batch opens one ``TraceSession``, has the running drivers join it and then times the computes;
stopping the session (gathering every process's spans) is not timed, and each traced round must
have recorded spans (in the driver processes too, where the case has any), so the comparison
cannot be vacuous. Before a batch the drivers are already running (and leave an ended session
outside the timing); each case is warmed up, untraced and traced, before the first round.

Cases, with ``NNSCOPE_DRIVERS`` set to the numpy-kernel drivers (``_common.CPU_KERNEL_DRIVERS``):
``all``, the default plan over all of them with CPU fallback (partitioned, as
``partition_cost.py``'s ``all``), and each model on one device: ``sample-all`` (a driver
process) and ``nnapi-reference`` (in process).

How to read it: per case, the median over rounds of the per-round median latencies, untraced
and traced, with their ranges over rounds, and ``traced / untraced``, the median of the
per-round ratios (range beside it; 1.00x means tracing costs nothing measurable). Targets:
partitioned at most 1.05x, one device at most 1.03x. A ratio whose range straddles its target
says the machine was too noisy to tell; run again with more ``--rounds``. Traced or not, a
partitioned run takes the same path (``runtime/_steps.py``: its steps fenced from the second
execution on), so the ratio is the cost of the spans alone.

Usage:
    python benchmarks/observer_effect.py [--rounds N] [--computes N] [--warmup N] [--json PATH]
                                         [--check] [--fifo]

``--fifo`` measures under ``SCHED_FIFO`` (root or CAP_SYS_NICE): on a machine shared with other
work, the figures of an otherwise idle one.

Prints one line per case with PASS/FAIL against its target, writes
``benchmarks/results/observer_effect.json`` (or ``--json PATH``) and prints the same JSON object
as the last line. Exits 0 (it is a measurement) unless ``--check`` is given: then 1 when a
target is missed.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy
    os.environ.setdefault(_variable, "1")

import numpy as np  # noqa: E402

from nnscope import tracing  # noqa: E402
from nnscope.runtime import manager  # noqa: E402
from nnscope.runtime.builtin_models import mobilenet, sample_input  # noqa: E402

from _common import (CPU_KERNEL_DRIVERS, add_fifo_option, compiled, face_detector, reusable_execution,  # noqa: E402
                     use_fifo, write_results)

TARGETS = {"partitioned": 1.05, "one_device": 1.03}
PLACEMENTS = ("all", "sample-all", "nnapi-reference")
#: Untimed computes at the start of each batch, in both modes (after a driver joined or left).
SETTLE = 2


def _timed_ms(execution, computes: int) -> float:
    """The median milliseconds of ``computes`` calls of ``execution.compute()``."""
    clock, samples = time.perf_counter_ns, []
    for _ in range(computes):
        start = clock()
        execution.compute()
        samples.append(clock() - start)
    return float(np.median(samples)) / 1e6


def _batch(execution, devices, computes: int, traced: bool) -> tuple[float, tracing.TraceData | None]:
    """(median ms, the session's trace or None): one untraced or traced batch."""
    gc.collect()
    if not traced:
        manager.start_devices(devices)  # running drivers leave the session that ended
        for _ in range(SETTLE):
            execution.compute()
        return _timed_ms(execution, computes), None
    session = tracing.TraceSession().start()
    try:
        manager.start_devices(devices)  # running drivers join the session
        for _ in range(SETTLE):
            execution.compute()
        ms = _timed_ms(execution, computes)
    finally:
        data = session.stop()  # gathering the trace: not timed
    return ms, data


def _check_traced(data: tracing.TraceData, driver_pids: set[int], case: str) -> int:
    """The span count of a traced batch; raise when nothing (or no driver) was recorded."""
    spans = data.span_count()
    if spans == 0:
        raise RuntimeError(f"{case}: a traced round recorded no spans: the comparison would be vacuous")
    missing = driver_pids - {track.pid for track in data.threads if track.events}
    if missing:
        raise RuntimeError(f"{case}: driver processes {sorted(missing)} recorded no spans in a traced round")
    return spans


def measure(model, placement: str, rounds: int, computes: int, warmup: int) -> dict:
    case = f"{model.name} on {placement}"
    compilation = compiled(model, placement)
    execution, _ = reusable_execution(compilation, sample_input(model))
    devices = compilation.devices
    driver_pids = {step.device.pid for step in compilation.plan.steps if getattr(step.device, "pid", None)}
    manager.start_devices(devices)
    for _ in range(warmup):  # the first executions of a plan are not steady state
        execution.compute()
    with tracing.TraceSession():
        manager.start_devices(devices)
        for _ in range(warmup):
            execution.compute()
    off, on, ratios, spans = [], [], [], []
    for index in range(rounds):
        batch = {}
        for traced in ((False, True) if index % 2 == 0 else (True, False)):
            batch[traced] = _batch(execution, devices, computes, traced)
        off.append(batch[False][0])
        on.append(batch[True][0])
        ratios.append(on[-1] / off[-1])
        spans.append(_check_traced(batch[True][1], driver_pids, case))
    manager.start_devices(devices)  # leave the last session
    steps = len(compilation.plan.steps)
    kind = "partitioned" if placement == "all" else "one_device"
    ratio = float(np.median(ratios))
    result = {"model": model.name, "placement": placement, "kind": kind, "steps": steps,
              "devices": sorted({step.device.name for step in compilation.plan.steps}),
              "untraced_ms": round(float(np.median(off)), 3), "traced_ms": round(float(np.median(on)), 3),
              "untraced_range_ms": [round(min(off), 3), round(max(off), 3)],
              "traced_range_ms": [round(min(on), 3), round(max(on), 3)],
              "ratio": round(ratio, 3), "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
              "round_ratios": [round(r, 3) for r in ratios],
              "spans_per_round": int(np.median(spans)), "target": TARGETS[kind],
              "passed": ratio <= TARGETS[kind]}
    compilation.free()
    return result


def _line(r: dict) -> str:
    where = f"{r['placement']} ({r['steps']} steps over {', '.join(r['devices'])})" \
        if r["kind"] == "partitioned" else r["placement"]
    return (f"{r['model']} on {where}: untraced {r['untraced_ms']:.2f} ms "
            f"[{r['untraced_range_ms'][0]:.2f}-{r['untraced_range_ms'][1]:.2f}], traced {r['traced_ms']:.2f} ms "
            f"[{r['traced_range_ms'][0]:.2f}-{r['traced_range_ms'][1]:.2f}]; traced / untraced "
            f"{r['ratio']:.3f}x [{r['ratio_range'][0]:.3f}-{r['ratio_range'][1]:.3f}] "
            f"(target <= {r['target']}x) {'PASS' if r['passed'] else 'FAIL'}; "
            f"{r['spans_per_round']} spans per traced round")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (untraced, traced)")
    parser.add_argument("--computes", type=int, default=100, help="timed computes per round and mode")
    parser.add_argument("--warmup", type=int, default=10, help="computes per mode before the rounds")
    parser.add_argument("--json", metavar="PATH", help="write the JSON here "
                        "(default benchmarks/results/observer_effect.json)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    add_fifo_option(parser)
    args = parser.parse_args()
    fifo = use_fifo(args.fifo)
    os.environ["NNSCOPE_DRIVERS"] = CPU_KERNEL_DRIVERS  # before the runtime discovers its devices
    manager.start_devices(manager.devices())  # every driver process running before any timing
    results = {"rounds": args.rounds, "computes": args.computes, "warmup": args.warmup, "fifo": fifo,
               "targets": TARGETS, "drivers": [d.name for d in manager.devices()], "cases": {}}
    start = time.perf_counter()
    for model in (mobilenet(), face_detector()):
        for placement in PLACEMENTS:
            figures = measure(model, placement, args.rounds, args.computes, args.warmup)
            results["cases"][f"{model.name}/{placement}"] = figures
            print(_line(figures), flush=True)
    results["seconds"] = round(time.perf_counter() - start, 1)
    results["targets_met"] = all(case["passed"] for case in results["cases"].values())
    missed = [name for name, case in results["cases"].items() if not case["passed"]]
    print(f"{len(results['cases']) - len(missed)} of {len(results['cases'])} cases within target"
          + (f"; missed: {', '.join(missed)}" if missed else ""))
    write_results("observer_effect", results, args.json)
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
