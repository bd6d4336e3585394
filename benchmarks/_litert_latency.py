"""The ``sample-litert`` half of ``model_latency.py``: a model through the LiteRT driver process
and through the default ``all`` plan, side by side with LiteRT standalone, plus the per-layer
breakdown of a traced run.

Modes, alternating in rounds (order rotating): ``litert`` (LiteRT's ``Interpreter`` on the
``.tflite`` with the same thread count, each run ``set_tensor`` + ``invoke`` + ``get_tensor``, as
an application does), ``sample-litert`` (a reusable ``Execution.compute()`` compiled for that
driver alone: a separate process, through the HAL), ``burst`` (the same through a ``Burst``:
fast message queues, polled) and ``all`` (``Compilation(model)``: the default plan over every
device). Ratios are medians of per-round ratios. The breakdown parses a
traced run of the ``sample-litert`` execution with ``parse_systrace`` (self-times of the
execution phase per layer, per execution) and sums the driver's ``[NN_LD_PE]LiteRT::invoke``.

Example (from ``model_latency.py``):
    >>> measure_litert(FACE, FACE_REFERENCE, rounds=15, runs=20)    # doctest: +SKIP
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from nnscope import parse_systrace
from nnscope import tracing
from nnscope.runtime import Burst, Compilation, Model
from nnscope.runtime.manager import get_device
from nnscope.runtime.tflite import load_tflite
from nnscope.tracing import Phase
from nnscope.tracing.exporters.systrace import SystraceTextExporter

from _common import reusable_execution  # noqa: E402

TARGETS = {"sample_litert_ratio": 1.3, "all_ratio": 1.5}
#: Breakdown key -> parse_systrace layer codes (the driver process's CPU-layer time is the driver's).
_LAYERS = {"runtime": ("LR",), "ipc": ("LI",), "driver": ("LD", "LC")}


def standalone(path: Path, inputs: list[np.ndarray], threads: int):
    """A run of LiteRT standalone: set the inputs, invoke, copy the outputs out."""
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    interpreter = Interpreter(model_path=str(path), num_threads=threads)
    interpreter.allocate_tensors()
    ins = [d["index"] for d in interpreter.get_input_details()]
    outs = [d["index"] for d in interpreter.get_output_details()]

    def run() -> None:
        for index, value in zip(ins, inputs):
            interpreter.set_tensor(index, value)
        interpreter.invoke()
        for index in outs:
            interpreter.get_tensor(index)
    return run


def breakdown(execution, device, runs: int, name: str) -> dict:
    """ms per execution by layer (execution-phase self-times) and the driver's invoke time."""
    with tracing.TraceSession() as session:
        device.launch()  # a running driver joins the session
        with tracing.application(Phase.OVERALL, name):
            for _ in range(runs):
                execution.compute()
    data = session.collect()
    invoke_ns = sum(s.duration_ns for s in data.spans() if s.name == "[NN_LD_PE]LiteRT::invoke")
    fd, path = tempfile.mkstemp(suffix=".txt", prefix="nnscope-bench-")
    os.close(fd)
    try:
        SystraceTextExporter(path).export(data)
        (summary,) = parse_systrace.summarize(path, tolerant=True)
    finally:
        os.unlink(path)
    execution_times = summary.self_times.get("PE", {})
    out = {key: round(sum(_ms(execution_times.get(code)) for code in codes) / runs, 3)
           for key, codes in _LAYERS.items()}
    out["litert_invoke"] = round(invoke_ns / runs / 1e6, 3)
    return out


def _ms(value) -> float:
    return 0.0 if value is None or value != value else float(value)


def measure_litert(path: Path, reference: Path, rounds: int, runs: int, threads: int, timed) -> dict:
    """Figures of one model; ``timed``: ``model_latency``'s (median_ms, interleaved)."""
    median_ms, interleaved = timed
    hal, _, _ = load_tflite(path)
    data = np.load(reference)
    inputs = [data["input0"]]
    model = Model.from_hal(hal, name=path.stem)
    device = get_device("sample-litert")
    driver = Compilation.for_devices(model, [device])
    driver.finish()
    default = Compilation(model)
    default.finish()
    on_driver, outputs = reusable_execution(driver, inputs)
    on_all, all_outputs = reusable_execution(default, inputs)
    on_driver.compute()
    on_all.compute()
    errors = [float(np.abs(o - data[f"output0_{k}"]).max())
              for result in (outputs, all_outputs) for k, o in enumerate(result)]
    burst = Burst(driver)
    on_burst, _ = reusable_execution(driver, inputs)
    modes = {"litert": standalone(path, inputs, threads), "sample-litert": on_driver.compute,
             "all": on_all.compute, "burst": lambda: on_burst.burst_compute(burst)}
    runners = {name: (lambda n, run=run: median_ms(run, n)) for name, run in modes.items()}
    for run in runners.values():
        run(max(1, runs // 4))  # warm-up
    medians = {name: np.asarray(values) for name, values in interleaved(runners, rounds, runs).items()}
    plan = [f"{s.device.name} ({len(s.operations)} ops)" for s in default.plan.steps]
    return {"model": path.stem, "threads": threads,
            "litert_ms": round(float(np.median(medians["litert"])), 3),
            "sample_litert_ms": round(float(np.median(medians["sample-litert"])), 3),
            "all_ms": round(float(np.median(medians["all"])), 3),
            "sample_litert_ratio": round(float(np.median(medians["sample-litert"] / medians["litert"])), 2),
            "all_ratio": round(float(np.median(medians["all"] / medians["litert"])), 2),
            "sample_litert_burst_ms": round(float(np.median(medians["burst"])), 3),
            "sample_litert_burst_ratio": round(float(np.median(medians["burst"] / medians["litert"])), 2),
            "all_plan": plan, "max_abs_error_vs_litert": max(errors),
            "breakdown_ms": breakdown(on_driver, device, runs, path.stem),
            "rounds": rounds, "runs_per_round": runs}


def report(result: dict) -> None:
    """Print one model's figures."""
    threads = f"{result['threads']} thread" + ("s" if result["threads"] > 1 else "")
    print(f"{result['model']}: LiteRT standalone ({threads}) {result['litert_ms']} ms; "
          f"sample-litert {result['sample_litert_ms']} ms (ratio {result['sample_litert_ratio']}, target "
          f"<= {TARGETS['sample_litert_ratio']}); all {result['all_ms']} ms (ratio {result['all_ratio']}, "
          f"target <= {TARGETS['all_ratio']}); through a burst {result['sample_litert_burst_ms']} ms "
          f"(ratio {result['sample_litert_burst_ratio']}); plan {', '.join(result['all_plan'])}")
    print(f"  breakdown per execution (traced, ms): {result['breakdown_ms']}; "
          f"max |nnscope - LiteRT reference| = {result['max_abs_error_vs_litert']:.3g}")
