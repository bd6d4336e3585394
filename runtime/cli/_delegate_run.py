"""``nnscope run``/``bench`` of a .tflite in delegate mode: the model as the TFLite NNAPI
delegate runs it (``runtime.delegate``), with the run's application spans.

:func:`profile` builds the :class:`DelegatedModel` inside ``[NN_LA_PC]compile`` (validation,
partitioning, each partition's compilation, each CPU operator's interpreter), then warms up and
benchmarks it, each execution an ``[NN_LA_PE]execution`` span holding the partitions'
``TfLiteNnapiDelegate`` spans (NNAPI's inside) and one span per CPU operator. The step times
of the benchmark executions feed the delegation report (``--per-op``) and its summary line.

Example:
    $ nnscope run model.tflite                     # delegate mode, the default for a .tflite
    $ nnscope run model.tflite --per-op            # + the delegation report with times
    $ nnscope run model.tflite --html report.html  # the page, with its Delegation section
    $ nnscope run model.tflite --svg model.svg     # the TFLite graph coloured by where it ran
    $ nnscope run model.tflite --whole-model       # the whole model as one NNAPI model
"""
from __future__ import annotations

import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from nnscope import tracing
from nnscope.runtime import manager
from nnscope.runtime.cli._backend import read_inputs
from nnscope.runtime.cli._startup import start_drivers
from nnscope.runtime.cli.delegation import sample_inputs
from nnscope.runtime.delegate import graph
from nnscope.runtime.delegate.delegated import DelegatedModel
from nnscope.runtime.delegate.report import render, report
from nnscope.runtime.hal.types import Operand
from nnscope.runtime.tflite._builder import operand_type
from nnscope.tracing import Phase

#: Flags that drive an NNAPI compilation of the whole model (``--dot``/``--svg`` draw the
#: TFLite graph in delegate mode, ``runtime.delegate.graph``).
WHOLE_MODEL_FLAGS = ("burst",)


@dataclass
class DelegatedRun:
    """What a delegate-mode run measured: latencies (ns), step times per benchmark execution,
    compile figures (ms), the ``--outputs`` arrays with the output names, the report data."""

    model: DelegatedModel
    latencies: list = field(default_factory=list)
    step_times: list = field(default_factory=list)
    times: dict = field(default_factory=dict)
    saved: tuple | None = None
    data: dict = field(default_factory=dict)


def refused_flags(args) -> list[str]:
    """The whole-model flags given to a delegate-mode run."""
    return [f"--{name}" for name in WHOLE_MODEL_FLAGS if getattr(args, name, None)]


def _build(args, data: bytes) -> DelegatedModel:
    devices = [manager.get_device(name) for name in args.device] if args.device else None
    return DelegatedModel(data, devices, args.feature_level, args.max_partitions, label=args.model)


def _inputs(args, model: DelegatedModel) -> list:
    if args.inputs is None:
        return sample_inputs(model)
    operands = [Operand(operand_type(model.graph.tensors[i]), model.graph.tensors[i].shape)
                for i in model.graph.inputs]
    return read_inputs(args.inputs, operands, model.input_names)


def _execute(model: DelegatedModel, inputs, step_times: list | None = None):
    start = time.perf_counter_ns()
    with tracing.application(Phase.EXECUTION, "execution"):
        outputs = model.run(inputs, step_times)
    return time.perf_counter_ns() - start, outputs


def profile(args, preference: int) -> DelegatedRun:
    """Build, warm up, benchmark (and with ``--outputs`` run once more) in delegate mode."""
    with tracing.application(Phase.OVERALL, Path(args.model).stem):
        with tracing.application(Phase.COMPILATION, "start drivers"):
            started = time.perf_counter_ns()
            devices = [manager.get_device(n) for n in args.device] if args.device else manager.devices()
            start_drivers(devices)
        with tracing.application(Phase.PREPARATION, "build model"):
            data = Path(args.model).read_bytes()
            run = DelegatedRun(_build(args, data))
        with tracing.application(Phase.COMPILATION, "compile"):
            cold = time.perf_counter_ns()
            run.model.compile(preference)
            run.times = {"startup_ms": (cold - started) / 1e6,
                         "cold_compile_ms": (time.perf_counter_ns() - cold) / 1e6}
        _measure(args, run, _inputs(args, run.model))
        run.times["warm_compile_ms"] = _warm_compile(args, data, preference)
        with tracing.application(Phase.TERMINATION, "shutdown drivers"):
            run.model.free()
            manager.shutdown()
    return run


def _measure(args, run: DelegatedRun, inputs) -> None:
    with tracing.application(Phase.WARMUP, "warmup"):
        for _ in range(args.warmup):
            _execute(run.model, inputs)
    with tracing.application(Phase.BENCHMARK, "benchmark"):
        for _ in range(args.executions):
            run.latencies.append(_execute(run.model, inputs, run.step_times)[0])
    if args.outputs:
        with tracing.application(Phase.EXECUTION, "outputs"):
            run.saved = run.model.run(inputs), run.model.output_names
    run.data = report(run.model.delegation, run.model.step_devices(), run.step_times)


def _warm_compile(args, data: bytes, preference: int) -> float:
    """The ms of building and compiling the delegated model again on the running drivers."""
    with tracing.application(Phase.COMPILATION, "compile (warm)"):
        start = time.perf_counter_ns()
        again = _build(args, data)
        again.compile(preference)
        elapsed = (time.perf_counter_ns() - start) / 1e6
        again.free()
    return elapsed


def delegation_line(run: DelegatedRun, width: int = 100) -> str:
    """``delegate mode (feature level L, at most P partitions): <summary>; partition 0 on ...``."""
    data = run.data
    where = "; ".join(f"partition {p['partition']} on {', '.join(p['devices'])}"
                      for p in data["partitions"])
    limit = data["max_partitions"] if data["max_partitions"] > 0 else "any number of"
    text = (f"delegate mode (feature level {data['feature_level']}, at most {limit} partitions): "
            f"{data['summary']}" + (f"; {where}" if where else ""))
    return textwrap.fill(text, width, subsequent_indent="    ", break_on_hyphens=False) + "\n"


def graph_writers(run: DelegatedRun, name: str) -> dict:
    """The ``--dot`` and ``--svg`` writers of a delegate-mode run: the TFLite graph, each
    operator coloured by its partition or as a CPU operator (``runtime.delegate.graph``)."""
    model = run.model
    return {"--dot": lambda path: graph.write_dot(model.graph, model.delegation, run.data, path, name),
            "--svg": lambda path: graph.write_svg(model.graph, model.delegation, run.data, path, name)}


def per_op_table(run: DelegatedRun) -> str:
    """The delegation report with the benchmark's times (``--per-op`` in delegate mode)."""
    return render(run.data) + "\n"
