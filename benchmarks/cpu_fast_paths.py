"""What the CPU prepared model's fast path buys in a driver process, side by side in one run.

``CpuPreparedModel`` runs a request two ways: :meth:`execute` (the ordinary path), and the one
repeat path a driver service takes for a repeated request (an ``executeSynchronously`` memo
repeat, a burst frame, a fenced step): ``bound_run`` (the executor's pre-bound step loop,
writing the outputs in place, with the same accounting and spans). Two ``sample-all`` processes
serve the tiny ADD model: one as shipped, one started with the bound run switched off (a
``sitecustomize`` on its ``PYTHONPATH`` makes it return None, so every run goes through
``execute``). ``compute()`` and ``burst_compute()``
alternate between the two in short rounds, so machine noise hits both alike; figures are
medians over rounds, ``*_gain`` the median per-round ratio of the shortcut-free time over the
shipped one (1.10 = the shortcuts save 10 %).

Usage:
    python benchmarks/cpu_fast_paths.py [--runs N] [--rounds N]

Prints one line per figure and writes ``benchmarks/results/cpu_fast_paths.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nnscope.runtime.burst import Burst  # noqa: E402
from nnscope.runtime.compilation import Compilation  # noqa: E402
from nnscope.runtime.drivers.ipc import RemoteDevice  # noqa: E402
from nnscope.runtime.execution import Execution  # noqa: E402
from nnscope.runtime.builtin_models import tiny_add  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "cpu_fast_paths.json"
_NO_SHORTCUTS = """from nnscope.runtime.drivers import cpu
cpu.CpuPreparedModel.bound_run = lambda self, request, result: None
"""


def _driver(without_shortcuts: bool, site_dir: str) -> RemoteDevice:
    device = RemoteDevice("sample-all")
    saved = os.environ.get("PYTHONPATH")
    if without_shortcuts:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [site_dir, saved]))
    try:
        device.launch(wait=True)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return device


def _execution(device: RemoteDevice):
    model = tiny_add()
    compilation = Compilation.for_devices(model, [device])
    compilation.finish()
    execution = Execution(compilation)
    graph = model.operands
    for index, operand_index in enumerate(model.inputs):
        execution.set_input(index, np.ones(graph[operand_index].dimensions, np.float32))
    output = np.zeros(graph[model.outputs[0]].dimensions, np.float32)
    execution.set_output(0, output)
    execution.set_reusable(True)
    return execution, Burst(compilation)


def _median_us(run, runs: int) -> float:
    clock, samples = time.perf_counter_ns, []
    for _ in range(runs):
        start = clock()
        run()
        samples.append(clock() - start)
    return float(np.median(samples)) / 1000


def measure(runs: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as site_dir:
        Path(site_dir, "sitecustomize.py").write_text(_NO_SHORTCUTS)
        devices = {"shipped": _driver(False, site_dir), "execute_only": _driver(True, site_dir)}
    subjects = {kind: _execution(device) for kind, device in devices.items()}
    samples: dict = {f"{kind}_{way}": [] for kind in subjects for way in ("compute", "burst")}
    for execution, burst in subjects.values():  # warm-up: memos, bindings, bursts
        _median_us(execution.compute, 200)
        _median_us(lambda: execution.burst_compute(burst), 200)
    for _ in range(rounds):
        for kind, (execution, burst) in subjects.items():
            samples[f"{kind}_compute"].append(_median_us(execution.compute, runs))
            samples[f"{kind}_burst"].append(_median_us(lambda: execution.burst_compute(burst), runs))
    for _, burst in subjects.values():
        burst.free()
    for device in devices.values():
        device.shutdown()
    figures = {f"{key}_us": round(float(np.median(values)), 2) for key, values in samples.items()}
    for way in ("compute", "burst"):
        ratios = [slow / fast for slow, fast in zip(samples[f"execute_only_{way}"], samples[f"shipped_{way}"])]
        figures[f"{way}_gain"] = round(float(np.median(ratios)), 3)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="executions per round and way")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    figures = {"model": "tiny_add", "device": "sample-all", "runs": args.runs, "rounds": args.rounds,
               **measure(args.runs, args.rounds)}
    for key, value in figures.items():
        print(f"{key}: {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
