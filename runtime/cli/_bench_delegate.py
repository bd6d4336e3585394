"""One ``nnscope bench`` measurement of a .tflite in delegate mode: the model as the TFLite
NNAPI delegate runs it (``runtime.delegate``), its delegated partitions on NNAPI and every other
operator on LiteRT's CPU kernels.

Devices: ``device`` is a device name, the delegate's one accelerator
(``DelegatedModel(data, [device])``: operators the device cannot run stay on LiteRT's CPU, as
``getSupportedOperations`` says), or :data:`ALL` (``DelegatedModel(data, None)``: every device,
NNAPI partitioning each delegated partition across them, its CPU fallback on). A device that can
run none of the model is no failure: it is an ``ok`` run with nothing delegated, every operator
on LiteRT.

The result is the whole-model one (``_bench_run.measure``) with ``mode`` ``"delegate"``:
``compile_ms`` covers building (validation, partitioning, slicing, each CPU operator's
interpreter) and compiling the partitions; ``operations`` counts TFLite operators, ``on_device``
the delegated ones; ``delegation`` is the delegation report without its per-operator rows
(feature level, partition limit, the partitions with their devices and median times, the share
of the time in NNAPI, the summary line).

Example (``load_model``, ``reference_outputs`` and ``Settings`` from ``_bench_run``):
    >>> model = load_model("tests/data/models/face_landmark.tflite", delegate=True)  # a checkout's file  # doctest: +SKIP
    >>> result = measure_delegated(model, "sample-minimal", Settings(3, 1), DelegateOptions(),
    ...                            reference_outputs(model))  # starts a driver  # doctest: +SKIP
    >>> result["operations"], result["delegation"]["summary"]  # doctest: +SKIP
    ({'total': 97, 'on_device': 18, 'share': 0.18...}, '18 of 97 operators delegated, in 3 partitions, ...')
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from nnscope import tracing
from nnscope.runtime.api import NnError
from nnscope.runtime.cli._bench_run import (ALL, DELEGATE, BenchModel, Settings, Tick, accuracy,
                                            empty_result, latency_stats, timed_runs)
from nnscope.runtime.delegate import DEFAULT_MAX_PARTITIONS
from nnscope.runtime.delegate.delegated import DelegatedModel
from nnscope.runtime.delegate.report import report
from nnscope.runtime.manager import get_device
from nnscope.tracing import Phase


@dataclass(frozen=True)
class DelegateOptions:
    """The delegate's options: feature level (None: the devices' lowest) and partition limit."""

    feature_level: int | None = None
    max_partitions: int = DEFAULT_MAX_PARTITIONS


def build(bench_model: BenchModel, device: str, options: DelegateOptions,
          data: bytes) -> DelegatedModel:
    """The model split for ``device`` (or :data:`ALL`) and compiled."""
    devices = None if device == ALL else [get_device(device)]
    model = DelegatedModel(data, devices, options.feature_level, options.max_partitions,
                           label=bench_model.path)
    try:
        model.compile()
    except BaseException:
        model.free()
        raise
    return model


def delegation_of(model: DelegatedModel, step_times: list) -> dict:
    """The delegation report of ``model`` without its per-operator rows (the JSON's
    ``delegation``)."""
    data = report(model.delegation, model.step_devices(), step_times)
    return {key: value for key, value in data.items() if key != "operators"}


def measure_delegated(bench_model: BenchModel, device: str, settings: Settings,
                      options: DelegateOptions, reference: tuple[str, list],
                      tick: Tick = lambda n: None) -> dict:
    """Build, compile, warm up, time and check one model on one device in delegate mode;
    never raises NnError or a model's ValueError (an operator LiteRT cannot run either).

    Traced as ``_bench_run.measure``: ``[NN_LA_PO]<model> on <device>`` around
    ``[NN_LA_PC]compile``, ``[NN_LA_PWU]warmup`` and ``[NN_LA_PBM]benchmark``."""
    data = Path(bench_model.path).read_bytes()
    with tracing.application(Phase.OVERALL, f"{bench_model.name} on {device}"):
        result = {**empty_result(bench_model.name, device, "ok", None, DELEGATE), "delegation": None}
        start = time.perf_counter_ns()
        try:
            with tracing.application(Phase.COMPILATION, "compile"):
                model = build(bench_model, device, options, data)
        except (NnError, ValueError) as error:
            result.update(status="error", error=str(error))
            return result
        result["compile_ms"] = (time.perf_counter_ns() - start) / 1e6
        result["operations"] = _delegated_share(model)
        step_times: list = []
        try:
            latencies, actual = _timed(model, bench_model.inputs, settings, step_times, tick)
        except (NnError, ValueError) as error:
            result.update(status="error", error=str(error))
            return result
        finally:
            result["delegation"] = delegation_of(model, step_times)
            model.free()
    kind, expected = reference
    result["latency_ms"] = latency_stats(latencies)
    result["accuracy"] = {"reference": kind, **accuracy(bench_model, expected, actual)}
    return result


def _delegated_share(model: DelegatedModel) -> dict:
    """The model's TFLite operators and how many are delegated (the rest run on LiteRT)."""
    total, delegated = len(model.delegation.verdicts), len(model.delegation.delegated())
    return {"total": total, "on_device": delegated, "share": delegated / total if total else 0.0}


def _timed(model: DelegatedModel, inputs, settings: Settings, step_times: list, tick: Tick):
    """Warm up, time the executions (each step's time into ``step_times``), then one more
    for the outputs: (latencies in ns, outputs)."""
    with tracing.application(Phase.WARMUP, "warmup"):
        _run(model, inputs, settings.warmup, None, None, tick)
    with tracing.application(Phase.BENCHMARK, "benchmark"):
        latencies = _run(model, inputs, settings.executions, settings.duration_s, step_times, tick)
    return latencies, model.run(inputs)


def _run(model: DelegatedModel, inputs, count: int, duration_s: float | None,
         step_times: list | None, tick: Tick) -> list[int]:
    """``count`` executions (or as many as fit in ``duration_s``, at least one): ns each."""
    return timed_runs(lambda: model.run(inputs, step_times), count, duration_s, tick)
