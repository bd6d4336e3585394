"""A bench report made from real measurements, in the schema ``nnscope bench --json`` writes.

:func:`measure_bench` compiles the built-in models for a few devices with the runtime
API, times real executions, compares each device's outputs with the nnapi-reference
device's, counts the operations the plan puts on the device (from the compilation's
GraphDump, read back with the dashboard's own ``.dot`` reader), and runs stress cases as
real child processes (a success, a failing child, a child killed by a signal, a hang
stopped at its deadline). Nothing in the report is typed in by hand.
"""
from __future__ import annotations

import datetime
import platform
import subprocess
import sys
import time

import numpy as np

from nnscope.dashboards._graph import plan_steps
from nnscope.runtime import builtin_models
from nnscope.runtime.api import NnError
from nnscope.runtime.cli._backend import compute_arrays
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.graphdump import graph_dump
from nnscope.runtime.manager import get_device

#: NNAPI's float32 tolerance used by the CTS for relaxed comparisons (atol).
TOLERANCE = 1e-3
STRESS_CASES = {
    "clean-run": ("import nnscope.runtime.builtin_models as b, nnscope.runtime.compilation as c, "
                  "nnscope.runtime.cli._backend as k, nnscope.runtime.manager as g; m = b.tiny_add(); "
                  "comp = c.Compilation(m, [g.get_device('nnapi-reference')]); comp.finish(); "
                  "k.compute_arrays(comp, b.sample_input(m))"),
    "child-fails": "import sys; sys.exit(3)",
    "child-killed": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
    "child-hangs": "import time; time.sleep(60)",
}


def _compile(model, device: str):
    compilation = Compilation(model, None if device == "all" else [get_device(device)])
    compilation.finish()
    return compilation


def _on_device(compilation, device: str, total: int) -> int:
    steps = plan_steps(graph_dump(compilation))
    if device == "all":
        return total
    return sum(len(step["ops"]) for step in steps if step["device"] == device)


def measure_result(name: str, model, inputs, reference, device: str, executions: int) -> dict:
    """One result entry: compile, time ``executions`` runs, compare with ``reference``."""
    total = len(model.operations)
    base = dict(model=name, device=device, error=None, compile_ms=None, latency_ms=None,
                accuracy=None, operations=dict(total=total, on_device=0, share=0.0))
    started = time.perf_counter()
    try:
        compilation = _compile(model, device)
    except NnError as error:
        return dict(base, status="unsupported", error=str(error))
    compile_ms = (time.perf_counter() - started) * 1e3
    samples, outputs = [], None
    for _ in range(executions):
        started = time.perf_counter()
        outputs = compute_arrays(compilation, inputs)
        samples.append((time.perf_counter() - started) * 1e3)
    errors = [np.abs(np.asarray(o, np.float64) - np.asarray(r, np.float64))
              for o, r in zip(outputs, reference)]
    max_abs = float(max(e.max() for e in errors))
    on_device = _on_device(compilation, device, total)
    ms = np.asarray(samples)
    return dict(base, status="ok", compile_ms=compile_ms,
                latency_ms=dict(median=float(np.median(ms)), p90=float(np.percentile(ms, 90)),
                                p99=float(np.percentile(ms, 99)), mean=float(ms.mean()),
                                std=float(ms.std()), samples=samples),
                accuracy=dict(reference="nnapi-reference", max_abs_error=max_abs,
                              mse=float(np.mean(np.concatenate([e.ravel() for e in errors]) ** 2)),
                              within_tolerance=max_abs <= TOLERANCE),
                operations=dict(total=total, on_device=on_device, share=on_device / total))


def stress_case(case: str, code: str, timeout: float) -> dict:
    """Run one stress child and classify it as MLTS does."""
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        outcome, detail = "HANG", f"not done within {timeout} s"
    else:
        if done.returncode < 0:
            outcome, detail = "CRASH", f"killed by signal {-done.returncode}"
        elif done.returncode:
            outcome, detail = "FAILURE", f"exit status {done.returncode}"
        else:
            outcome, detail = "SUCCESS", "completed"
    return dict(case=case, model="tiny_add", device="all", outcome=outcome,
                seconds=time.perf_counter() - started, detail=detail)


def measure_bench(devices=("nnapi-reference", "sample-float-fast", "sample-quant", "all"),
                  executions: int = 6, hang_timeout: float = 3.0) -> dict:
    """A complete bench report measured now."""
    results = []
    for name, model in (("tiny_add", builtin_models.tiny_add()),
                        ("mobilenet", builtin_models.mobilenet(size=96))):
        inputs = builtin_models.sample_input(model)
        reference = compute_arrays(_compile(model, "nnapi-reference"), inputs)
        results += [measure_result(name, model, inputs, reference, device, executions)
                    for device in devices]
    stress = [stress_case(case, code, hang_timeout if case == "child-hangs" else 120.0)
              for case, code in STRESS_CASES.items()]
    return {"schema": "nnscope-bench", "version": 1,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "host": {"python": platform.python_version(), "machine": platform.machine()},
            "settings": {"executions": executions, "warmup": 0, "duration_s": None,
                         "burst": False},
            "results": results, "stress": stress}
