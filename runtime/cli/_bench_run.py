"""One ``nnscope bench`` measurement: a model on one device (or on all of them), its latency
and its accuracy.

Models: a model spec is a built-in name (``mobilenet``, ``tiny_add``; see
:data:`runtime.builtin_models.BUILTIN`) or a ``.tflite`` path, loaded as one NNAPI model
(:data:`WHOLE_MODEL`) or, with ``delegate``, read for the delegate mode (:data:`DELEGATE`,
measured by ``_bench_delegate``). The reference outputs come from the ``nnapi-reference`` CPU
device, or, for a .tflite when ``ai-edge-litert`` is installed, from LiteRT itself (one thread,
TFLite's built-in kernels).

Devices (whole-model mode): ``device`` is a device name, compiled with
``Compilation.for_devices`` (no CPU fallback, as MLTS benchmarks one accelerator at a time), or
:data:`ALL`: the default compilation over every device, partitioned with CPU fallback as an
application gets it. A device that cannot run the whole model is reported ``"unsupported"``
with how many operations it does support; it is not run with a share of the model (that is
what the ``all`` row shows, and what the delegate mode does).

Accuracy is judged for the whole model, as Android's MLTS benchmark judges a model's outputs
(its error against the expected outputs, not CTS's per-operation, per-element tolerance, which
a deep network's float32 summation order alone can exceed): per output, the largest absolute
error relative to the range of the reference output (``max |out - ref| / (max ref - min ref)``),
within a threshold per output type (:data:`RELATIVE_THRESHOLDS`).

Each result is a dict of the ``results`` list of the bench JSON (docs/bench-schema.md).

Example:
    >>> model = load_model("tiny_add")
    >>> reference = reference_outputs(model)
    >>> accuracy(model, reference[1], reference[1])["max_abs_error"]
    0.0
    >>> result = measure(model, "nnapi-reference", Settings(5, 1), reference)  # a driver name starts its process
    >>> result["status"], len(result["latency_ms"]["samples"]), result["accuracy"]["within_tolerance"]
    ('ok', 5, True)
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from nnscope import runtime
from nnscope import tracing
from nnscope.runtime import builtin_models
from nnscope.runtime.api import NnError
from nnscope.runtime.cli._backend import compute_arrays, output_buffers
from nnscope.runtime.cli.delegation import sample_arrays
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.execution import Execution
from nnscope.runtime.hal.types import OperandType
from nnscope.runtime.manager import CPU_DEVICE_NAME, cpu_device, get_device
from nnscope.runtime.model import Model
from nnscope.runtime.partition import UnsupportedOperationError
from nnscope.tracing import Phase


# --------------------------------------------------------------------------- models
REFERENCE_NNAPI, REFERENCE_LITERT = "nnapi-reference", "litert"
WHOLE_MODEL, DELEGATE = "whole-model", "delegate"
"""The modes of a result: one NNAPI model (a built-in, or a .tflite translated whole), or a
.tflite as the TFLite NNAPI delegate runs it (partitions on NNAPI, the rest on LiteRT's CPU)."""
_FLOAT16 = (OperandType.TENSOR_FLOAT16, OperandType.FLOAT16)


@dataclass
class BenchModel:
    """A model with its sample inputs; ``path`` is the .tflite file (None: built-in).

    ``model`` is the finished NNAPI model (None in :data:`DELEGATE` mode, which builds its
    own per device); ``output_types`` and ``loose`` (float16 arithmetic) set the accuracy
    thresholds (:func:`threshold_of`)."""

    name: str
    model: Model | None
    inputs: list[np.ndarray]
    output_names: list[str]
    path: str | None = None
    output_types: tuple[OperandType | None, ...] = ()
    loose: bool = False
    mode: str = WHOLE_MODEL


def load_model(spec: str, delegate: bool = False) -> BenchModel:
    """The model named by ``spec`` (built-in name or .tflite path); a .tflite is read for
    the delegate mode with ``delegate``, else translated into one NNAPI model.

    Raises:
        FileNotFoundError: no such built-in and no such file.
        ValueError: the file is not a model the loader can convert (read, in delegate mode).
    """
    if spec in builtin_models.BUILTIN:
        model = builtin_models.BUILTIN[spec]()
        return _whole(model, builtin_models.sample_input(model), [], None)
    if not Path(spec).is_file():
        names = ", ".join(builtin_models.BUILTIN)
        raise FileNotFoundError(f"no such model file {spec!r} (built-in models: {names})")
    if delegate:
        return _delegate_mode_model(spec)
    from nnscope.runtime.tflite import load_tflite  # noqa: PLC0415 - flatbuffer reader on demand
    hal, _, output_names = load_tflite(spec)
    model = Model.from_hal(hal, name=Path(spec).stem)
    return _whole(model, builtin_models.sample_input(model), output_names, spec)


def _whole(model: Model, inputs, output_names: list[str], path: str | None) -> BenchModel:
    kinds = tuple(model.operands[i].type for i in model.outputs)
    loose = model.relaxed or any(op.type in _FLOAT16 for op in model.operands)
    return BenchModel(model.name, model, inputs, output_names, path, kinds, loose)


def _delegate_mode_model(path: str) -> BenchModel:
    """A .tflite for the delegate mode: its graph read (not translated), sample inputs of its
    input tensors, its outputs' types; float16 arithmetic (a float16 tensor that is not a
    constant) makes it ``loose``."""
    from nnscope.runtime.tflite._builder import operand_type  # noqa: PLC0415
    from nnscope.runtime.tflite._reader import element_dtype, read_graph  # noqa: PLC0415
    try:
        graph = read_graph(Path(path).read_bytes())
    except ValueError as error:
        raise type(error)(f"{path}: {error}") from None
    tensors = graph.tensors
    inputs = sample_arrays([(tensors[i].shape, element_dtype(tensors[i].type_name))
                            for i in graph.inputs])
    kinds = []
    for index in graph.outputs:
        try:
            kinds.append(operand_type(tensors[index]))
        except ValueError:
            kinds.append(None)  # no NNAPI type (e.g. INT64): judged exactly
    loose = any(t.type_name == "FLOAT16" and t.data is None for t in tensors)
    return BenchModel(Path(path).stem, None, inputs, [tensors[i].name for i in graph.outputs],
                      path, tuple(kinds), loose, DELEGATE)


def model_specs(given: Sequence[str]) -> list[str]:
    """The models named (built-in names and .tflite files, in the order given, each once);
    every built-in model when none is named."""
    return list(dict.fromkeys(given or builtin_models.BUILTIN))


def litert_available() -> bool:
    try:
        import ai_edge_litert.interpreter  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def reference_outputs(bench_model: BenchModel, litert: bool = True) -> tuple[str, list[np.ndarray]]:
    """``(reference kind, outputs)`` for the model's sample inputs; LiteRT's for a .tflite when
    installed and ``litert``, else the ``nnapi-reference`` device's."""
    if litert and bench_model.path is not None and litert_available():
        return REFERENCE_LITERT, _litert_outputs(bench_model)
    model = bench_model.model or load_model(bench_model.path).model  # delegate mode: translated
    compilation = Compilation.for_devices(model, [cpu_device()])
    compilation.finish()
    try:
        return REFERENCE_NNAPI, compute_arrays(compilation, bench_model.inputs)
    finally:
        compilation.free()


def _litert_outputs(bench_model: BenchModel) -> list[np.ndarray]:
    """LiteRT's outputs, in the model's output order (matched by tensor name)."""
    from ai_edge_litert import interpreter as litert  # noqa: PLC0415
    interpreter = litert.Interpreter(
        model_path=bench_model.path, num_threads=1,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter.allocate_tensors()
    for detail, value in zip(interpreter.get_input_details(), bench_model.inputs):
        interpreter.set_tensor(detail["index"], value.reshape(detail["shape"]))
    interpreter.invoke()
    by_name = {d["name"]: interpreter.get_tensor(d["index"]).copy()
               for d in interpreter.get_output_details()}
    ordered = list(by_name.values())
    return [by_name.get(name, ordered[i]) for i, name in enumerate(bench_model.output_names)] \
        if bench_model.output_names else ordered


# --------------------------------------------------------------------------- accuracy
#: The largest error an output may have relative to its reference's range, by output type:
#: float32 1e-4; float16 (or a relaxed model's float32) 1e-2, ten float16 steps; quantized and
#: integer outputs two steps of their type's range.
RELATIVE_THRESHOLDS = {
    OperandType.TENSOR_FLOAT32: 1e-4, OperandType.FLOAT32: 1e-4,
    OperandType.TENSOR_FLOAT16: 1e-2, OperandType.FLOAT16: 1e-2,
    OperandType.TENSOR_QUANT8_ASYMM: 2 / 255, OperandType.TENSOR_QUANT8_ASYMM_SIGNED: 2 / 255,
    OperandType.TENSOR_QUANT8_SYMM: 2 / 255, OperandType.TENSOR_QUANT16_ASYMM: 2 / 65535,
    OperandType.TENSOR_QUANT16_SYMM: 2 / 65535,
}
_RELAXED = 1e-2
_EXACT = 0.0  # int32, bool: no rounding to allow for


def threshold_of(bench_model: BenchModel, position: int, relaxed: bool = False) -> float:
    """Output ``position``'s threshold (:data:`RELATIVE_THRESHOLDS`; the float16 one for a
    float32 output when ``relaxed`` or the model is ``loose``: relaxed, or float16 arithmetic)."""
    kind = bench_model.output_types[position]
    if (relaxed or bench_model.loose) and kind in (OperandType.TENSOR_FLOAT32, OperandType.FLOAT32):
        return _RELAXED
    return RELATIVE_THRESHOLDS.get(kind, _EXACT)


def relative_error(want: np.ndarray, got: np.ndarray) -> float:
    """``max |got - want|`` over the range of ``want`` (its largest magnitude when constant;
    the absolute error when that is 0 too)."""
    span = float(want.max() - want.min()) if want.size else 0.0
    scale = span or (float(np.abs(want).max()) if want.size else 0.0) or 1.0
    worst = float(np.abs(got - want).max()) if want.size else 0.0
    return worst / scale


def accuracy(bench_model: BenchModel, expected: Sequence[np.ndarray],
             actual: Sequence[np.ndarray], relaxed: bool = False) -> dict:
    """max abs error and MSE over every output element; the largest relative error of an
    output (see the module docstring) with its threshold, and whether every output is within
    its own (``relaxed``: float32 outputs judged as float16)."""
    within, diffs, worst = len(expected) == len(actual), [], (0.0, 0.0, 0.0)
    for position, (want, got) in enumerate(zip(expected, actual)):
        want64, got64 = np.asarray(want, np.float64).reshape(-1), np.asarray(got, np.float64).reshape(-1)
        finite = np.isfinite(want64)
        if want64.size != got64.size or not np.array_equal(finite, np.isfinite(got64)):
            within = False  # a NaN or inf where the reference has none (or the reverse)
            continue
        want64, got64 = want64[finite], got64[finite]
        diffs.append(np.abs(want64 - got64))
        error, limit = relative_error(want64, got64), threshold_of(bench_model, position, relaxed)
        within = within and error <= limit
        ratio = error / limit if limit else (0.0 if error == 0 else np.inf)
        worst = max(worst, (ratio, error, limit))
    every = np.concatenate(diffs) if diffs else np.zeros(0)
    max_abs = float(every.max()) if every.size else 0.0
    mse = float(np.mean(every * every)) if every.size else 0.0
    return {"max_abs_error": max_abs, "mse": mse, "relative_error": worst[1], "threshold": worst[2],
            "within_tolerance": bool(within)}


# --------------------------------------------------------------------------- timed runs
ALL = "all"
"""The device name of the default plan over every device (CPU fallback on)."""

Tick = Callable[[int], None]


class BurstsUnavailable(RuntimeError):
    """``--burst`` asked for, but this runtime has no ``runtime.Burst``."""


@dataclass(frozen=True)
class Settings:
    """How many executions to time (or for how long), after how many warm-up ones."""

    executions: int
    warmup: int
    duration_s: float | None = None
    burst: bool = False


def bursts_available() -> bool:
    return hasattr(runtime, "Burst")


def compile_for(bench_model: BenchModel, device: str) -> Compilation:
    """A finished compilation of the model for ``device`` (or :data:`ALL`)."""
    if device == ALL:
        compilation = Compilation(bench_model.model)
    else:
        compilation = Compilation.for_devices(bench_model.model, [get_device(device)])
    compilation.finish()
    return compilation


def operations_share(compilation: Compilation, device: str) -> dict:
    """How many of the model's operations the plan gives ``device``; for :data:`ALL`, the
    operations on driver devices (every device but the CPU fallback ``nnapi-reference``)."""
    total = len(compilation.model.operations)
    on_device = sum(len(step.operations) for step in compilation.plan.steps
                    if (step.device.name != CPU_DEVICE_NAME if device == ALL
                        else step.device.name == device))
    return {"total": total, "on_device": on_device, "share": on_device / total if total else 0.0}


def supported_share(bench_model: BenchModel, device: str) -> dict:
    """The operations ``device`` says it supports (for an ``unsupported`` result)."""
    flags = get_device(device).supported_operations(bench_model.model.to_hal())
    total = len(flags)
    return {"total": total, "on_device": sum(flags), "share": sum(flags) / total if total else 0.0}


def burst_for(compilation: Compilation, burst: bool):
    """One ``runtime.Burst`` for every execution of a model x device run (a context manager),
    or a null context without ``burst``."""
    if not burst:
        return contextlib.nullcontext()
    if not bursts_available():
        raise BurstsUnavailable("bursts are not available")
    return runtime.Burst(compilation)


def run_executions(compilation: Compilation, inputs, outputs, count: int,
                   duration_s: float | None, burst, tick: Tick) -> list[int]:
    """Time ``count`` executions (or as many as fit in ``duration_s``, at least one), through
    ``burst`` (a ``runtime.Burst``) unless it is None. Returns nanoseconds per execution."""
    def execute() -> None:
        execution = Execution(compilation)
        for index, value in enumerate(inputs):
            execution.set_input(index, value)
        for index, buffer in enumerate(outputs):
            execution.set_output(index, buffer)
        if burst is None:
            execution.compute()
        else:
            execution.burst_compute(burst)
        execution.free()
    return timed_runs(execute, count, duration_s, tick)


def timed_runs(run_once, count: int, duration_s: float | None, tick: Tick) -> list[int]:
    """Call ``run_once`` ``count`` times (or as often as fits in ``duration_s``, at least
    once), ticking each: nanoseconds per call."""
    latencies: list[int] = []
    end = time.monotonic() + duration_s if duration_s is not None else None
    while _more(len(latencies), count, end):
        start = time.perf_counter_ns()
        run_once()
        latencies.append(time.perf_counter_ns() - start)
        tick(1)
    return latencies


def _more(done: int, count: int, end: float | None) -> bool:
    return done < count if end is None else (done == 0 or time.monotonic() < end)


def latency_stats(latencies_ns: list[int]) -> dict:
    """median, p90, p99, mean, std (population) and every sample, in milliseconds."""
    ms = np.asarray(latencies_ns, np.float64) / 1e6
    return {"median": float(np.median(ms)), "p90": float(np.percentile(ms, 90)),
            "p99": float(np.percentile(ms, 99)), "mean": float(ms.mean()), "std": float(ms.std()),
            "samples": [float(v) for v in ms]}


def empty_result(model: str, device: str, status: str, error: str | None,
                 mode: str = WHOLE_MODEL) -> dict:
    return {"model": model, "device": device, "mode": mode, "status": status, "error": error,
            "compile_ms": None, "latency_ms": None, "accuracy": None, "operations": None}


def measure(bench_model: BenchModel, device: str, settings: Settings,
            reference: tuple[str, list], tick: Tick = lambda n: None) -> dict:
    """Compile, warm up, time and check one model on one device; never raises NnError.

    Traced as an application: ``[NN_LA_PO]<model> on <device>`` around ``[NN_LA_PC]compile``,
    ``[NN_LA_PWU]warmup`` and ``[NN_LA_PBM]benchmark``."""
    with tracing.application(Phase.OVERALL, f"{bench_model.name} on {device}"):
        result = empty_result(bench_model.name, device, "ok", None)
        start = time.perf_counter_ns()
        try:
            with tracing.application(Phase.COMPILATION, "compile"):
                compilation = compile_for(bench_model, device)
        except NnError as error:
            return _not_compiled(bench_model, device, result, error)
        result["compile_ms"] = (time.perf_counter_ns() - start) / 1e6
        result["operations"] = operations_share(compilation, device)
        try:
            latencies, actual = _timed(compilation, bench_model.inputs, settings, tick)
        except NnError as error:
            result.update(status="error", error=str(error))
            return result
        finally:
            compilation.free()
    kind, expected = reference
    result["latency_ms"] = latency_stats(latencies)
    result["accuracy"] = {"reference": kind, **accuracy(bench_model, expected, actual)}
    return result


def _timed(compilation: Compilation, inputs, settings: Settings, tick: Tick):
    """Warm up, time the executions, then one more for the outputs: (latencies, outputs)."""
    outputs = output_buffers(compilation)
    with burst_for(compilation, settings.burst) as burst:
        with tracing.application(Phase.WARMUP, "warmup"):
            run_executions(compilation, inputs, outputs, settings.warmup, None, burst, tick)
        with tracing.application(Phase.BENCHMARK, "benchmark"):
            latencies = run_executions(compilation, inputs, outputs, settings.executions,
                                       settings.duration_s, burst, tick)
    return latencies, compute_arrays(compilation, inputs)


def _not_compiled(bench_model: BenchModel, device: str, result: dict, error: NnError) -> dict:
    if device != ALL and isinstance(error, UnsupportedOperationError):
        result.update(status="unsupported", error=str(error),
                      operations=supported_share(bench_model, device))
    else:
        result.update(status="error", error=str(error))
    return result
