"""Latency of real models on ``nnapi-reference`` in-process and through the ``sample-litert``
driver, next to LiteRT on the same machine.

Measures MediaPipe's short-range face detector (``tests/data/models/``, loaded with
``runtime.tflite.load_tflite``) through the public API (a reusable ``Execution.compute()``),
with tracing off and inside a ``TraceSession``, and LiteRT's ``Interpreter`` on the same model
with one thread. The three modes alternate in short rounds (order rotating) so that load from
other processes hits all of them alike; figures are medians per round, then over rounds; the
ratio and the tracing overhead are medians of per-round ratios. Per-operation-type time comes
from the ``[NN_LC_PCO]`` spans of a traced run. The built-in MobileNet-style model is timed the
same way (it has no ``.tflite`` form, so no LiteRT figure). Targets: face detector
``nnscope_ms / litert_ms <= 5`` with tracing off, tracing on <= 10 % more.

With LiteRT installed, each shipped model (face detector, face landmark) is also measured
through ``sample-litert`` (a separate process, through the HAL) and the default ``all`` plan
against LiteRT standalone with the same thread count (``--threads``, default 1; it sets
``NNSCOPE_LITERT_THREADS`` for the driver), with the per-layer breakdown of a traced run
(``_litert_latency``). Targets: ``sample_litert_ratio <= 1.3``, ``all_ratio <= 1.5``.

numpy's BLAS is limited to one thread (``OPENBLAS_NUM_THREADS=1`` and kin, unless already set
in the environment), as LiteRT is: the comparison is one core against one core. LiteRT is the
``bench`` extra (``pip install -e '.[bench]'``); without it the nnscope figures are still
measured and the ratio is null.

Usage:
    python benchmarks/model_latency.py [--rounds N] [--runs N] [--builtin-runs N] [--threads N]

Prints human-readable lines, writes ``benchmarks/results/model_latency.json`` and prints the
same JSON object as the last line (keys include ``nnscope_ms``, ``litert_ms``, ``ratio``,
``nnscope_traced_ms``, ``traced_overhead_pct`` and ``per_operation_ms``; ``litert_driver``: per
model ``sample_litert_ratio``, ``all_ratio`` and ``breakdown_ms``).
"""
from __future__ import annotations

import os

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
for _variable in BLAS_THREAD_VARIABLES:  # before numpy loads its BLAS
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import collections  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from nnscope import tracing  # noqa: E402
from nnscope.runtime import Compilation, Execution, Model  # noqa: E402
from nnscope.runtime.builtin_models import mobilenet, sample_input  # noqa: E402
from nnscope.runtime.manager import cpu_device  # noqa: E402
from nnscope.runtime.tflite import load_tflite  # noqa: E402
from nnscope.tracing.naming import Layer, Phase, parse_name  # noqa: E402

from _common import median_ns, reusable_execution, write_results  # noqa: E402

MODELS = Path(__file__).resolve().parent.parent / "tests" / "data" / "models"
FACE = MODELS / "face_detection_short_range.tflite"
FACE_REFERENCE = MODELS / "face_detection_short_range.litert-reference.npz"
LANDMARK = MODELS / "face_landmark.tflite"
LANDMARK_REFERENCE = MODELS / "face_landmark.litert-reference.npz"
TARGETS = {"ratio": 5.0, "traced_overhead_pct": 10.0}
MISSING_LITERT = "LiteRT is not installed (pip install -e '.[bench]'): no LiteRT figures"


def nnscope_execution(model: Model, inputs: list[np.ndarray]) -> tuple[Execution, list[np.ndarray]]:
    """A reusable execution of ``model`` on nnapi-reference with ``inputs`` bound."""
    compilation = Compilation.for_devices(model, [cpu_device()])
    compilation.finish()
    return reusable_execution(compilation, inputs)


def litert_interpreter(path: Path, inputs: list[np.ndarray]):
    """LiteRT's one-thread interpreter with ``inputs`` set, or None when LiteRT is missing."""
    try:
        from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415
    except ImportError:
        return None
    interpreter = Interpreter(model_path=str(path), num_threads=1)
    interpreter.allocate_tensors()
    for detail, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], value)
    return interpreter


def median_ms(run, runs: int) -> float:
    return median_ns(run, runs) / 1e6


def interleaved(modes: dict, rounds: int, runs: int) -> dict[str, list[float]]:
    """Per mode, the median of each round; every round runs all modes, order rotating."""
    names = list(modes)
    medians: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        for name in names[index % len(names):] + names[:index % len(names)]:
            medians[name].append(modes[name](runs))
    return medians


def per_operation_ms(execution: Execution, runs: int) -> dict[str, float]:
    """Milliseconds per compute of each kernel (``[NN_LC_PCO]`` detail), summed over its ops."""
    totals: collections.Counter = collections.Counter()
    with tracing.TraceSession() as session:
        for _ in range(runs):
            execution.compute()
    for span in session.collect().spans():
        parsed = parse_name(span.name)
        if parsed and parsed.layer == Layer.CPU and parsed.phase == Phase.COMPUTATION:
            totals[parsed.detail] += span.duration_ns
    return {name: round(ns / runs / 1e6, 3) for name, ns in totals.most_common()}


def _traced(execution: Execution):
    def run(runs: int) -> float:
        with tracing.TraceSession():
            return median_ms(execution.compute, runs)
    return run


def measure_face(rounds: int, runs: int) -> dict:
    hal_model, _, _ = load_tflite(FACE)
    reference = np.load(FACE_REFERENCE)
    model = Model.from_hal(hal_model, name="face_detection_short_range")
    execution, outputs = nnscope_execution(model, [reference["input0"]])
    execution.compute()
    error = max(float(np.abs(actual - reference[f"output0_{k}"]).max()) for k, actual in enumerate(outputs))
    interpreter = litert_interpreter(FACE, [reference["input0"]])
    modes = {"off": lambda n: median_ms(execution.compute, n), "traced": _traced(execution)}
    if interpreter is not None:
        interpreter.invoke()
        modes["litert"] = lambda n: median_ms(interpreter.invoke, n)
    for run in modes.values():
        run(max(1, runs // 4))  # warm-up
    medians = interleaved(modes, rounds, runs)
    off, on = np.asarray(medians["off"]), np.asarray(medians["traced"])
    results = {"model": FACE.stem, "nnscope_ms": round(float(np.median(off)), 3),
               "nnscope_traced_ms": round(float(np.median(on)), 3),
               "traced_overhead_pct": round(100 * (float(np.median(on / off)) - 1), 1),
               "litert_ms": None, "ratio": None, "max_abs_error_vs_litert": error,
               "rounds": rounds, "runs_per_round": runs}
    if interpreter is not None:
        litert = np.asarray(medians["litert"])
        results.update(litert_ms=round(float(np.median(litert)), 3),
                       ratio=round(float(np.median(off / litert)), 2),
                       ratio_traced=round(float(np.median(on / litert)), 2))
    results["per_operation_ms"] = per_operation_ms(execution, runs)
    return results


def measure_builtin(runs: int) -> dict:
    model = mobilenet()
    execution, _ = nnscope_execution(model, sample_input(model))
    execution.compute()
    medians = interleaved({"off": lambda n: median_ms(execution.compute, n),
                           "traced": _traced(execution)}, 2, runs)
    off, on = np.asarray(medians["off"]), np.asarray(medians["traced"])
    return {"model": model.name, "nnscope_ms": round(float(np.median(off)), 2),
            "nnscope_traced_ms": round(float(np.median(on)), 2),
            "litert_ms": None, "per_operation_ms": per_operation_ms(execution, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per mode")
    parser.add_argument("--runs", type=int, default=20, help="computes per round and mode")
    parser.add_argument("--builtin-runs", type=int, default=3,
                        help="computes of the built-in model per round and mode (0: skip it)")
    parser.add_argument("--threads", type=int, default=1,
                        help="LiteRT threads, standalone and in sample-litert (default 1)")
    args = parser.parse_args()
    if args.rounds < 1 or args.runs < 1 or args.builtin_runs < 0 or not 1 <= args.threads <= 64:
        parser.error("--rounds and --runs must be positive, --builtin-runs non-negative, "
                     "--threads from 1 to 64")
    os.environ["NNSCOPE_LITERT_THREADS"] = str(args.threads)  # the driver process inherits it
    face = measure_face(args.rounds, args.runs)
    if face["litert_ms"] is None:
        print(MISSING_LITERT)
    print(f"{face['model']} on nnapi-reference: median {face['nnscope_ms']} ms, traced "
          f"{face['nnscope_traced_ms']} ms (+{face['traced_overhead_pct']} %); LiteRT one thread "
          f"{face['litert_ms']} ms; ratio {face['ratio']} (target <= {TARGETS['ratio']})")
    print(f"  max |nnscope - LiteRT reference| = {face['max_abs_error_vs_litert']:.3g}")
    for name, ms in face["per_operation_ms"].items():
        print(f"  {name:28s} {ms:8.3f} ms")
    results = {**{key: face[key] for key in ("nnscope_ms", "litert_ms", "ratio")}, "face": face,
               "blas_threads": {name: os.environ[name] for name in BLAS_THREAD_VARIABLES}}
    if args.builtin_runs:
        builtin = measure_builtin(args.builtin_runs)
        print(f"{builtin['model']} on nnapi-reference: median {builtin['nnscope_ms']} ms, "
              f"traced {builtin['nnscope_traced_ms']} ms (no .tflite form: no LiteRT figure)")
        results["builtin"] = builtin
    results["targets"] = TARGETS
    results["targets_met"] = None if face["ratio"] is None else {
        "ratio": face["ratio"] <= TARGETS["ratio"],
        "traced_overhead_pct": face["traced_overhead_pct"] <= TARGETS["traced_overhead_pct"]}
    if face["litert_ms"] is not None:
        import _litert_latency as driver  # noqa: PLC0415 - needs LiteRT
        timed = (median_ms, interleaved)
        results["litert_driver"] = [driver.measure_litert(path, reference, args.rounds, args.runs,
                                                          args.threads, timed)
                                    for path, reference in ((FACE, FACE_REFERENCE),
                                                            (LANDMARK, LANDMARK_REFERENCE))]
        for result in results["litert_driver"]:
            driver.report(result)
        results["litert_driver_targets"] = driver.TARGETS
        results["litert_driver_targets_met"] = {
            r["model"]: {key: r[key] <= target for key, target in driver.TARGETS.items()}
            for r in results["litert_driver"]}
    write_results("model_latency", results)


if __name__ == "__main__":
    main()
