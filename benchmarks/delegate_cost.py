"""What one operator left on the CPU costs in delegate mode (``nnscope run model.tflite``).

The model is a small convnet on a 1x56x56x32 float32 input, as the middle of a mobile network:
``CONV_2D -> DEPTHWISE_CONV_2D -> ADD (residual) -> MIDDLE -> CONV_2D -> DEPTHWISE_CONV_2D ->
ADD (residual)``, all 3x3, SAME padding, 32 channels. Three variants of it are built with the
runtime's flatbuffer builder (``runtime.tflite._flatbuffer``):

* ``gelu``: MIDDLE is a ``GELU``, which has no NNAPI form (``runtime/delegate/validate.py``:
  *unsupported operator*), so the delegate splits the model into partition 0, the GELU on
  LiteRT's CPU kernels in the app process, and partition 1: two NNAPI<->CPU boundaries, one
  1x56x56x32 tensor crossing each;
* ``relu``: its twin with a ``RELU`` there, which NNAPI takes: one partition, fully delegated;
* ``none``: the model without MIDDLE (the ADD feeds the second CONV_2D): one partition.

Cases, timed in interleaved rounds (the order rotating each round, so that load from other
processes hits them alike), each round ``--executions`` runs of each:

* ``delegate``: ``DelegatedModel(gelu).run`` (delegate mode, as ``nnscope run`` runs it);
* ``twin``: ``DelegatedModel(relu).run``, the same model with that operator delegated;
* ``without``: ``DelegatedModel(none).run``;
* ``litert``: the whole ``gelu`` model on LiteRT alone (an ``Interpreter`` with one thread, as
  the delegate mode's CPU kernels have: ``set_tensor`` + ``invoke`` + ``get_tensor``,
  ``_litert_latency.standalone``);
* ``cpu_op``: the GELU's own LiteRT time: ``invoke()`` of the very interpreter the delegate
  mode built for it, its input already in place (no copy in or out);
* ``tiny``: ``DelegatedModel`` of one RELU on a 1x1 tensor: the fixed cost of running a
  partition (an NNAPI execution: its request, the driver's round trip), next to nothing computed;
* ``copy``: one ``np.copyto`` of a crossing tensor (1x56x56x32 float32, 392 KiB) into a
  preallocated array.

Latencies are the median and p90 of every run over all rounds; a ratio is the median of the
per-round ratios of per-round medians.

The cost of one boundary. ``delegate`` runs partition 0, the GELU and partition 1;
``without`` runs the same CONV/DEPTHWISE/ADD work as one partition. So ``delegate - without -
cpu_op`` is what splitting costs beyond the GELU's own arithmetic: a second NNAPI execution
(its request, the IPC round trip to a driver process), each crossing tensor copied out of NNAPI's
output buffer into the interpreter and back into NNAPI's request, and the Python in between.
Halved (two boundaries), it is the cost of one boundary, computed per round and reported as the
median over rounds. ``without`` rather than the ``twin`` is subtracted because the twin also
runs its RELU on NNAPI, work the split model does not do; the twin-based figure (``delegate -
twin - cpu_op``, halved: lower than the boundary by half the RELU's NNAPI time) is printed beside
it. Both are set against one ``np.copyto`` of the crossing tensor: the floor a boundary cannot go
under (a tensor that leaves NNAPI for the CPU and comes back is copied at least once each way),
and ``tiny`` tells how much of the two boundaries is the second NNAPI execution's fixed cost.

The per-step times of one more batch of ``delegate`` runs (``DelegatedModel.run(times=...)``)
are printed too: partition 0, the GELU step (copy in, invoke, copy out) and partition 1.

Usage:
    python benchmarks/delegate_cost.py [--executions N] [--rounds N] [--device NAME]
                                       [--feature-level N] [--json PATH]

``--device`` (repeatable) delegates the partitions to the named devices only (default: every
registered device, NNAPI's own partitioning and CPU fallback inside each partition: with LiteRT
installed ``sample-litert``, a driver process, takes each partition whole; ``--device
nnapi-reference`` runs them in this process on numpy kernels, with no IPC).

Prints human-readable lines, writes ``benchmarks/results/delegate_cost.json`` (with
``--device``: ``delegate_cost_<devices>.json``; or ``--json PATH``) and prints the same JSON
object as the last line.
"""
from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from nnscope.runtime import manager  # noqa: E402
from nnscope.runtime.delegate.delegated import DelegatedModel  # noqa: E402
from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph  # noqa: E402

from _common import write_results  # noqa: E402

SHAPE = (1, 56, 56, 32)
#: variant -> the operator in the middle (None: left out).
MIDDLES = {"gelu": "GELU", "relu": "RELU", "none": None}


# --------------------------------------------------------------------------- the models
def _f32(g: FlatbufferGraph, name: str, shape, data=None) -> int:
    payload = None if data is None else np.asarray(data, np.float32).tobytes()
    return g.tensor(name, shape, "FLOAT32", payload)


def _conv(g: FlatbufferGraph, x: int, name: str, rng) -> int:
    c = SHAPE[-1]
    w = _f32(g, f"{name}_w", (c, 3, 3, c), rng.standard_normal((c, 3, 3, c)) * (1 / np.sqrt(9 * c)))
    b = _f32(g, f"{name}_b", (c,), rng.standard_normal(c) * 0.1)
    y = _f32(g, name, SHAPE)
    g.operator("CONV_2D", [x, w, b], [y], "Conv2DOptions", Padding=0, StrideW=1, StrideH=1,
               DilationWFactor=1, DilationHFactor=1)
    return y


def _depthwise(g: FlatbufferGraph, x: int, name: str, rng) -> int:
    c = SHAPE[-1]
    w = _f32(g, f"{name}_w", (1, 3, 3, c), rng.standard_normal((1, 3, 3, c)) / 3)
    b = _f32(g, f"{name}_b", (c,), rng.standard_normal(c) * 0.1)
    y = _f32(g, name, SHAPE)
    g.operator("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions", Padding=0, StrideW=1,
               StrideH=1, DepthMultiplier=1, DilationWFactor=1, DilationHFactor=1)
    return y


def _block(g: FlatbufferGraph, x: int, name: str, rng) -> int:
    """CONV_2D -> DEPTHWISE_CONV_2D -> ADD of the two (a residual)."""
    a = _conv(g, x, f"{name}_conv", rng)
    b = _depthwise(g, a, f"{name}_dw", rng)
    y = _f32(g, f"{name}_add", SHAPE)
    g.operator("ADD", [a, b], [y], "AddOptions", FusedActivationFunction=0)
    return y


def convnet(middle: str | None) -> bytes:
    """Two residual blocks with ``middle`` (a builtin without options, or None) between them;
    the same weights whatever the middle."""
    rng = np.random.default_rng(36)
    g = FlatbufferGraph()
    x = _f32(g, "input", SHAPE)
    current = _block(g, x, "block0", rng)
    if middle is not None:
        out = _f32(g, middle.lower(), SHAPE)
        g.operator(middle, [current], [out])
        current = out
    y = _block(g, current, "block1", rng)
    g.inputs, g.outputs = [x], [y]
    return g.serialize()


# --------------------------------------------------------------------------- timing
def tiny_relu() -> bytes:
    """One RELU on a 1x1 float32 tensor: delegated, its run is the fixed cost of a partition."""
    g = FlatbufferGraph()
    x, y = _f32(g, "input", (1, 1)), _f32(g, "output", (1, 1))
    g.operator("RELU", [x], [y])
    g.inputs, g.outputs = [x], [y]
    return g.serialize()


def _samples(run, executions: int) -> list[int]:
    clock, samples = time.perf_counter_ns, []
    for _ in range(executions):
        start = clock()
        run()
        samples.append(clock() - start)
    return samples


def interleaved(runners: dict, rounds: int, executions: int) -> tuple[dict, dict]:
    """(per case the per-round median ns, per case every sample ns), order rotating by round."""
    names = list(runners)
    medians = {name: [] for name in names}
    pooled = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            samples = _samples(runners[name], executions)
            medians[name].append(float(np.median(samples)))
            pooled[name] += samples
    return {k: np.asarray(v) for k, v in medians.items()}, pooled


def _standalone(data: bytes, inputs: list):
    """The whole model on LiteRT alone (``_litert_latency.standalone``, one thread)."""
    from _litert_latency import standalone  # noqa: PLC0415 - imports LiteRT

    fd, path = tempfile.mkstemp(suffix=".tflite", prefix="nnscope-delegate-cost-")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    try:
        return standalone(Path(path), inputs, threads=1)
    finally:
        os.unlink(path)  # the interpreter has read it


def _lite_output(data: bytes, inputs: list) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    interpreter = Interpreter(model_content=data, num_threads=1)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], inputs[0])
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def _ms(ns: float) -> float:
    return round(float(ns) / 1e6, 3)


def _us(ns: float) -> float:
    return round(float(ns) / 1e3, 1)


def measure(devices, feature_level: int | None, rounds: int, executions: int) -> dict:
    data = {variant: convnet(middle) for variant, middle in MIDDLES.items()}
    inputs = [np.random.default_rng(7).standard_normal(SHAPE).astype(np.float32)]
    models = {}
    try:
        data["tiny"] = tiny_relu()
        for case, variant in (("delegate", "gelu"), ("twin", "relu"), ("without", "none"), ("tiny", "tiny")):
            models[case] = DelegatedModel(data[variant], devices=devices, feature_level=feature_level,
                                          label=f"{variant}.tflite")
            models[case].compile()
        return _measure(models, data, inputs, rounds, executions)
    finally:
        for model in models.values():
            model.free()


def _measure(models: dict, data: dict, inputs: list, rounds: int, executions: int) -> dict:
    delegated = models["delegate"]
    kinds = [type(step).__name__ for step in delegated.delegation.steps]
    if kinds != ["Partition", "CpuOperator", "Partition"]:
        raise RuntimeError(f"expected partition, CPU operator, partition; the delegate made {kinds}")
    for case in ("twin", "without", "tiny"):
        if len(models[case].delegation.steps) != 1:
            raise RuntimeError(f"{case}: expected one partition, got {models[case].delegation.summary()}")
    gelu = delegated.kernels[1].engine.interpreter  # the GELU's interpreter, built by the delegate mode
    crossing = np.asarray(inputs[0])
    copy_into = np.empty_like(crossing)
    tiny_input = [np.ones((1, 1), np.float32)]
    runners = {"delegate": lambda: delegated.run(inputs), "twin": lambda: models["twin"].run(inputs),
               "without": lambda: models["without"].run(inputs),
               "tiny": lambda: models["tiny"].run(tiny_input),
               "litert": _standalone(data["gelu"], inputs), "cpu_op": gelu.invoke,
               "copy": lambda: np.copyto(copy_into, crossing)}
    reference = _lite_output(data["gelu"], inputs)
    error = float(np.abs(delegated.run(inputs)[0] - reference).max())
    for run in runners.values():  # warm-up (and the GELU interpreter holds its input from here on)
        for _ in range(max(2, executions // 4)):
            run()
    medians, pooled = interleaved(runners, rounds, executions)
    times: list = []
    for _ in range(executions):
        delegated.run(inputs, times)
    steps = np.median(np.asarray(times), axis=0)
    boundary = (medians["delegate"] - medians["without"] - medians["cpu_op"]) / 2
    boundary_twin = (medians["delegate"] - medians["twin"] - medians["cpu_op"]) / 2
    return {
        "model": f"convnet {'x'.join(map(str, SHAPE))} float32: 2 residual blocks "
                 "(CONV_2D, DEPTHWISE_CONV_2D, ADD) with GELU / RELU / nothing between them",
        "delegation": {case: m.delegation.summary() for case, m in models.items()},
        "step_devices": {case: m.step_devices() for case, m in models.items()},
        "feature_level": delegated.delegation.feature_level,
        "median_ms": {name: _ms(np.median(pooled[name])) for name in runners},
        "p90_ms": {name: _ms(np.percentile(pooled[name], 90)) for name in runners},
        "ratios": {"delegate/litert": round(float(np.median(medians["delegate"] / medians["litert"])), 3),
                   "delegate/twin": round(float(np.median(medians["delegate"] / medians["twin"])), 3),
                   "twin/litert": round(float(np.median(medians["twin"] / medians["litert"])), 3)},
        "boundaries": 2,
        "crossing_tensor_bytes": int(crossing.nbytes),
        "boundary_us": _us(np.median(boundary)),
        "boundary_us_range": [_us(boundary.min()), _us(boundary.max())],
        "boundary_vs_twin_us": _us(np.median(boundary_twin)),
        "cpu_op_us": _us(np.median(medians["cpu_op"])),
        "tiny_partition_us": _us(np.median(medians["tiny"])),
        "copy_us": _us(np.median(medians["copy"])),
        "boundary_per_copy": round(float(np.median(boundary / medians["copy"])), 1),
        "delegate_steps_ms": {"partition 0": _ms(steps[0]), "GELU (copy in, invoke, copy out)": _ms(steps[1]),
                              "partition 1": _ms(steps[2])},
        "max_abs_error_vs_litert": error,
    }


def report(r: dict) -> None:
    med, p90, ratios = r["median_ms"], r["p90_ms"], r["ratios"]
    print(r["model"])
    for case in ("delegate", "twin", "without"):
        devices = ", ".join("+".join(d) or "LiteRT" for d in r["step_devices"][case])
        print(f"  {case}: {r['delegation'][case]} (steps on {devices})")
    print("latency (median / p90 ms): " + ", ".join(
        f"{case} {med[case]:.3f} / {p90[case]:.3f}" for case in ("delegate", "twin", "without", "litert")))
    print(f"delegate mode / LiteRT alone = {ratios['delegate/litert']:.2f}x; delegate mode / twin fully "
          f"delegated = {ratios['delegate/twin']:.2f}x (twin / LiteRT alone = {ratios['twin/litert']:.2f}x)")
    print(f"one NNAPI<->CPU boundary: {r['boundary_us']:.1f} us (rounds {r['boundary_us_range'][0]:.1f} to "
          f"{r['boundary_us_range'][1]:.1f}; (delegate - without - GELU's invoke {r['cpu_op_us']:.1f} us) / 2; "
          f"against the RELU twin: {r['boundary_vs_twin_us']:.1f} us); one np.copyto of the crossing tensor "
          f"({r['crossing_tensor_bytes'] // 1024} KiB): {r['copy_us']:.1f} us; "
          f"a boundary = {r['boundary_per_copy']:.1f} copies; a delegated 1x1 RELU runs in "
          f"{r['tiny_partition_us']:.1f} us (the fixed cost of a partition)")
    print("delegate mode per step (median ms): " + ", ".join(f"{k} {v:.3f}" for k, v in r["delegate_steps_ms"].items())
          + f"; max |delegate - LiteRT| = {r['max_abs_error_vs_litert']:.2g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=50, help="timed runs per case and round")
    parser.add_argument("--rounds", type=int, default=9, help="interleaved rounds")
    parser.add_argument("--device", action="append", metavar="NAME",
                        help="delegate to this device only (repeatable; default: every device)")
    parser.add_argument("--feature-level", type=int, default=None,
                        help="NNAPI feature level 27..30 (default: the lowest of the devices in use)")
    parser.add_argument("--json", metavar="PATH", help="write the JSON here "
                        "(default benchmarks/results/delegate_cost[_DEVICES].json)")
    args = parser.parse_args()
    devices = [manager.get_device(name) for name in args.device] if args.device else None
    drivers = [d.name for d in manager.devices()]
    start = time.perf_counter()
    try:
        figures = measure(devices, args.feature_level, args.rounds, args.executions)
    finally:
        manager.shutdown()
    results = {"rounds": args.rounds, "executions": args.executions, "devices": args.device or "all",
               "drivers": drivers, **figures,
               "seconds": round(time.perf_counter() - start, 1)}
    report(results)
    name = "delegate_cost" + ("_" + "_".join(args.device) if args.device else "")
    write_results(name, results, args.json)


if __name__ == "__main__":
    main()
