"""One ``nnscope bench`` measurement: a model on one device (or on all of them).

``device`` is a device name, compiled with ``Compilation.for_devices`` (no CPU fallback, as
MLTS benchmarks one accelerator at a time), or :data:`ALL`: the default compilation over every
device, partitioned with CPU fallback as an application gets it. A device that cannot run the
whole model is reported ``"unsupported"`` with how many operations it does support; it is not
run with a share of the model (that is what the ``all`` row shows).

Each result is a dict of the ``results`` list of the bench JSON (docs/bench-schema.md).

Example:
    >>> from nnscope.runtime.cli._bench_models import load_model, reference_outputs
    >>> model = load_model("tiny_add")
    >>> reference = reference_outputs(model)
    >>> result = measure(model, "nnapi-reference", Settings(5, 1), reference)  # a driver name starts its process
    >>> result["status"], len(result["latency_ms"]["samples"]), result["accuracy"]["within_tolerance"]
    ('ok', 5, True)
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from nnscope import runtime
from nnscope import tracing
from nnscope.runtime.api import NnError
from nnscope.runtime.cli._backend import _output_buffers, compute_arrays
from nnscope.runtime.cli._bench_models import BenchModel, accuracy
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.execution import Execution
from nnscope.runtime.manager import CPU_DEVICE_NAME, get_device
from nnscope.runtime.partition import UnsupportedOperationError
from nnscope.tracing import Phase

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
    latencies: list[int] = []
    end = time.monotonic() + duration_s if duration_s is not None else None
    while _more(len(latencies), count, end):
        start = time.perf_counter_ns()
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


def empty_result(model: str, device: str, status: str, error: str | None) -> dict:
    return {"model": model, "device": device, "status": status, "error": error, "compile_ms": None,
            "latency_ms": None, "accuracy": None, "operations": None}


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
    outputs = _output_buffers(compilation, None)
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
