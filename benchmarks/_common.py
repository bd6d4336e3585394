"""Shared by the benchmark scripts, which run as ``python benchmarks/<name>.py`` (this
directory is then first on ``sys.path``)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def median_ns(run, runs: int) -> float:
    """The median nanoseconds of ``runs`` calls of ``run()``."""
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        start = clock()
        run()
        samples.append(clock() - start)
    return float(np.median(samples))


def write_results(name: str, results: dict) -> None:
    """Write ``results`` to ``benchmarks/results/<name>.json`` and print the same JSON object
    as one line (the benchmark's last line of output)."""
    out = RESULTS / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))


def reusable_execution(compilation, inputs: list) -> tuple:
    """(execution, output buffers): a reusable Execution of the finished ``compilation`` with
    ``inputs`` bound and a float32 buffer per model output."""
    from nnscope.runtime import Execution  # noqa: PLC0415 - after the benchmark's BLAS settings

    graph = compilation.model.to_hal().main
    outputs = [np.zeros(graph.operands[i].dimensions, np.float32) for i in graph.output_indexes]
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    for index, buffer in enumerate(outputs):
        execution.set_output(index, buffer)
    execution.set_reusable(True)  # computed again and again on purpose
    return execution, outputs
