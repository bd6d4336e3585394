"""Shared by the benchmark scripts, which run as ``python benchmarks/<name>.py`` (this
directory is then first on ``sys.path``)."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
#: The face detector shipped as a test fixture.
FACE_DETECTOR = Path(__file__).resolve().parent.parent / "tests" / "data" / "models" / "face_detection_short_range.tflite"
#: ``NNSCOPE_DRIVERS`` naming the numpy-kernel drivers only: then the default plan (``all``) is
#: partitioned (``sample-litert``, when installed, would take a whole model).
CPU_KERNEL_DRIVERS = "sample-all,sample-float-fast,sample-float-slow,sample-quant,sample-minimal"


def median_ns(run, runs: int) -> float:
    """The median nanoseconds of ``runs`` calls of ``run()``."""
    clock = time.perf_counter_ns
    samples = []
    for _ in range(runs):
        start = clock()
        run()
        samples.append(clock() - start)
    return float(np.median(samples))


def write_results(name: str, results: dict, path: str | Path | None = None) -> None:
    """Write ``results`` to ``path`` (default ``benchmarks/results/<name>.json``) and print the
    same JSON object as one line (the benchmark's last line of output)."""
    out = Path(path) if path is not None else RESULTS / f"{name}.json"
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


def face_detector():
    """The shipped face detector (:data:`FACE_DETECTOR`) as a Model named after its file."""
    from nnscope.runtime import Model  # noqa: PLC0415 - after the benchmark's BLAS settings
    from nnscope.runtime.tflite import load_tflite  # noqa: PLC0415

    return Model.from_hal(load_tflite(FACE_DETECTOR)[0], name=FACE_DETECTOR.stem)


def compiled(model, device: str = "all"):
    """A finished compilation of ``model``: for ``"all"`` the default plan over every registered
    device with CPU fallback (``Compilation(model)``), else for the one device named."""
    from nnscope.runtime import Compilation, manager  # noqa: PLC0415 - after the BLAS settings

    if device == "all":
        compilation = Compilation(model)
    else:
        compilation = Compilation.for_devices(model, [manager.get_device(device)])
    compilation.finish()
    return compilation


def add_fifo_option(parser) -> None:
    """``--fifo``: measure under ``SCHED_FIFO`` (see :func:`use_fifo`)."""
    parser.add_argument("--fifo", action="store_true",
                        help="run this process and the drivers it starts under SCHED_FIFO priority 1, "
                             "so that other processes' load on a shared machine does not stand between "
                             "a fence and its waiter (needs root or CAP_SYS_NICE; the figures are then "
                             "those of an otherwise idle machine)")


def use_fifo(asked: bool) -> bool:
    """Switch this process (and the drivers it starts later, which inherit it) to SCHED_FIFO
    priority 1 when ``asked``; False, with a line on stderr, when not permitted."""
    if not asked:
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError:
        print("--fifo: not permitted (root or CAP_SYS_NICE); measuring under the normal scheduler",
              file=sys.stderr)
        return False
    return True
