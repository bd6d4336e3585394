"""``nnscope run``: build, compile and execute a model under a trace; print its NNAPI timing.

The run is wrapped in application spans like an NNAPI benchmark app: ``[NN_LA_PO]<model>``
around everything, ``[NN_LA_PP]`` around model building, ``[NN_LA_PC]`` around compilation,
and ``[NN_LA_PWU]`` / ``[NN_LA_PBM]`` around the ``[NN_LA_PE]`` executions, then
``[NN_LA_PT]`` around stopping the drivers (their spans join the run's trace). A trace session is
always recorded: it is exported to the requested files and, as systrace text, summarized by
``parse_systrace`` (the same table as AOSP's ``parse_systrace``), followed by latency percentiles.

``--inputs x.npz`` feeds the model given arrays (keys ``input0``, ``input1``, ... or the .tflite
input tensor names; an .npy for a one-input model) instead of sample data, and ``--outputs
y.npz`` saves what one more execution on those inputs returns (keys ``output0``, ...).

A .tflite runs as the TFLite NNAPI delegate runs it on a phone (``_delegate_run``): its
delegated partitions on NNAPI, every other operator on LiteRT's CPU kernels, the summary line
saying how much went where; ``--whole-model`` translates it into one NNAPI model instead.

Example:
    $ nnscope run --executions 10 --warmup 2 --systrace run.html --dot plan.dot --svg plan.svg
    $ nnscope run model.tflite --inputs x.npz --outputs y.npz --executions 0 --warmup 0
    $ nnscope run model.tflite --feature-level 28 --per-op   # as the NNAPI delegate on Android 9
    $ nnscope run model.tflite --whole-model --dot plan.dot  # one NNAPI model, no LiteRT
    $ nnscope run model.tflite --svg model.svg   # delegate mode: operators coloured by where they ran
    $ nnscope run --device sample-all --per-op --html report.html  # per-op table and the page
    $ nnscope run model.tflite --html report.html   # delegate mode: the page + Delegation section
    $ nnscope run --example fibonacci --dot fib.dot   # vendor extension (needs the allowlist)
    $ nnscope run --otlp http://127.0.0.1:4318 --trace t.json   # also to an OTLP collector
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from nnscope import tracing
from nnscope.runtime import builtin_models, graphdump
from nnscope.runtime.burst import Burst
from nnscope.runtime.cli import _delegate_run, _html_report, _otlp, _output_files, _per_op
from nnscope.runtime.cli._args import count, description
from nnscope.runtime.cli._backend import compute_arrays, read_inputs, write_outputs
from nnscope.runtime.cli._startup import start_drivers
from nnscope.runtime.cli.delegation import add_delegate_options
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.extension_models import EXAMPLES
from nnscope.runtime.execution import Execution
from nnscope.runtime.graphdump import graph_dump
from nnscope.runtime.hal.types import Preference, numpy_dtype
from nnscope.runtime import manager
from nnscope.runtime.manager import get_device
from nnscope.runtime.model import Model
from nnscope.tracing import Phase

PREFERENCES = {"fast": Preference.FAST_SINGLE_ANSWER, "sustained": Preference.SUSTAINED_SPEED,
               "low-power": Preference.LOW_POWER}


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("run", help="execute a model under a trace and print its timing",
                                   description=description(__doc__))
    parser.add_argument("model", nargs="?", metavar="MODEL",
                        help="a .tflite file (default: built-in MobileNet-style float model)")
    parser.add_argument("--example", choices=sorted(EXAMPLES),
                        help="run an example vendor-extension model (com.example.fibonacci on "
                             "sample-fibonacci; the program must be allowed extensions, see README)")
    parser.add_argument("--device", action="append", metavar="NAME",
                        help="compile for this device only (repeatable; see `nnscope devices`)")
    parser.add_argument("--executions", type=count, default=10, metavar="N",
                        help="timed executions, traced as the Benchmark phase (default: %(default)s)")
    parser.add_argument("--warmup", type=count, default=1, metavar="N",
                        help="executions before the timed ones, traced as Warmup (default: %(default)s)")
    parser.add_argument("--preference", choices=sorted(PREFERENCES), default="fast",
                        help="the compilation's execution preference (default: %(default)s)")
    parser.add_argument("--trace", metavar="FILE.json", help="write the trace (format by extension)")
    parser.add_argument("--systrace", metavar="FILE.html", help="write systrace HTML")
    parser.add_argument("--perfetto", metavar="FILE", help="write a Perfetto protobuf trace")
    _otlp.add_argument(parser)
    parser.add_argument("--html", metavar="FILE.html",
                        help="write the run's dashboard page (as nnscope-dashboard TRACE --graph "
                             "PLAN -o FILE.html: timeline, per-operation profile, latency, plan; "
                             "in delegate mode the delegation report instead of the plan)")
    parser.add_argument("--dot", metavar="FILE.dot",
                        help="write the compiled plan as Graphviz dot; in delegate mode the "
                             "TFLite graph, each operator coloured by its partition or the CPU")
    parser.add_argument("--svg", metavar="FILE.svg",
                        help="render what --dot writes to SVG (needs Graphviz's dot on PATH)")
    parser.add_argument("--inputs", metavar="FILE.npz",
                        help="input arrays (keys input0.. or the .tflite input names; .npy for "
                             "one input); default: sample data")
    parser.add_argument("--outputs", metavar="FILE.npz",
                        help="save the outputs of one execution on the inputs (keys output0..)")
    parser.add_argument("--no-summary", action="store_true", help="skip the timing summary")
    parser.add_argument("--json", action="store_true",
                        help="print only the latencies, as JSON, on stdout (the rest goes to stderr)")
    parser.add_argument("--per-op", action="store_true",
                        help="print each operation: device and step, median time and share over "
                             "the benchmark executions, and why it went to that device (as "
                             "benchmark_model --enable_op_profiling; times need a device that runs "
                             "kernels, e.g. --device sample-all)")
    parser.add_argument("--burst", action="store_true",
                        help="run the executions as one burst (FMQ channels to each driver)")
    parser.add_argument("--whole-model", action="store_true",
                        help="translate the whole .tflite into one NNAPI model (refused if an "
                             "operator has no NNAPI form) instead of the delegate mode: "
                             "partitions on NNAPI, the rest on LiteRT's CPU kernels")
    add_delegate_options(parser)
    return parser


def delegate_mode(args) -> bool:
    """A .tflite runs as the TFLite NNAPI delegate runs it unless ``--whole-model``."""
    return args.model is not None and not args.whole_model


def _load(args) -> tuple[Model, list[np.ndarray], tuple[list, list], list | None]:
    """The model, its inputs (sample data or ``--inputs``), its input and output tensor names
    (a .tflite's; else empty) and, for an ``--example``, its output buffers."""
    if args.example:
        model, inputs, outputs = EXAMPLES[args.example]()
        return model, inputs, ([], []), outputs
    if args.model is None:
        model, input_names, output_names = builtin_models.mobilenet(), [], []
    else:
        from nnscope.runtime.tflite import load_tflite  # noqa: PLC0415 - flatbuffer reader on demand
        hal, input_names, output_names = load_tflite(args.model)
        model = Model.from_hal(hal, name=Path(args.model).stem)
    if args.inputs is None:
        return model, builtin_models.sample_input(model), (input_names, output_names), None
    operands = [model.operands[index] for index in model.inputs]
    names = input_names or [None] * len(operands)
    return model, read_inputs(args.inputs, operands, names), (input_names, output_names), None


def _outputs(model: Model) -> list[np.ndarray]:
    buffers = []
    for index in model.outputs:
        operand = model.operands[index]
        dims = tuple(d or 1 for d in operand.dimensions)
        buffers.append(np.zeros(dims, numpy_dtype(operand.type)))
    return buffers


def _execute(compilation: Compilation, inputs, outputs, burst: Burst | None = None) -> int:
    start = time.perf_counter_ns()
    with tracing.application(Phase.EXECUTION, "execution"):
        execution = Execution(compilation)
        for index, value in enumerate(inputs):
            execution.set_input(index, value)
        for index, buffer in enumerate(outputs):
            execution.set_output(index, buffer)
        if burst is not None:
            execution.burst_compute(burst)
        else:
            execution.start_compute().wait()  # startCompute + Event_wait: what parse_systrace times
        execution.free()
    return time.perf_counter_ns() - start


def _profile(args, session: tracing.TraceSession) -> tuple[Model, Compilation, list[int], tuple | None, dict]:
    """Build, compile, warm up and benchmark; with ``--outputs`` also run one more execution
    (its output arrays and the model's output names, written after the run). The last value
    is the compilation figures in ms (:func:`compile_times`)."""
    label = args.example or (Path(args.model).stem if args.model else "mobilenet_v1_0.5_224")
    with tracing.application(Phase.OVERALL, label):
        with tracing.application(Phase.PREPARATION, "build model"):
            model, inputs, names, outputs = _load(args)
        with tracing.application(Phase.COMPILATION, "compile"):
            devices = [get_device(name) for name in args.device] if args.device else None
            compilation = Compilation(model, devices)
            compilation.set_preference(PREFERENCES[args.preference])
            started = time.perf_counter_ns()
            start_drivers(compilation.devices)  # as finish() would, with a word when it is slow
            cold = time.perf_counter_ns()
            compilation.finish()
            times = {"startup_ms": (cold - started) / 1e6, "cold_compile_ms": (time.perf_counter_ns() - cold) / 1e6}
        outputs = outputs if outputs is not None else _outputs(model)
        burst = _burst(compilation) if args.burst else None
        with tracing.application(Phase.WARMUP, "warmup"):
            for _ in range(args.warmup):
                _execute(compilation, inputs, outputs, burst)
        with tracing.application(Phase.BENCHMARK, "benchmark"):
            latencies = [_execute(compilation, inputs, outputs, burst) for _ in range(args.executions)]
        if burst is not None:
            with tracing.application(Phase.TERMINATION, "free burst"):
                burst.free()
        times["warm_compile_ms"] = _warm_compile(model, compilation, args)
        saved = None
        if args.outputs:
            with tracing.application(Phase.EXECUTION, "outputs"):
                saved = compute_arrays(compilation, inputs), names[1]
        with tracing.application(Phase.TERMINATION, "shutdown drivers"):
            manager.shutdown()  # inside the run: the drivers' last spans join its trace
    return model, compilation, latencies, saved, times, names


def _warm_compile(model: Model, compilation: Compilation, args) -> float:
    """Compile the model again on the same, running drivers (what an app's second compilation
    costs: no driver start-up, the drivers' code loaded); the ms of its ``finish``."""
    with tracing.application(Phase.COMPILATION, "compile (warm)"):
        again = Compilation(model, list(compilation.devices) if args.device else None)
        again.set_preference(PREFERENCES[args.preference])
        start = time.perf_counter_ns()
        again.finish()
        elapsed = (time.perf_counter_ns() - start) / 1e6
        again.free()
    return elapsed


def _burst(compilation: Compilation) -> Burst:
    with tracing.application(Phase.PREPARATION, "burst"):
        return Burst(compilation)


def _output_keys(arrays, names: list[str]) -> str:
    """What the keys of an ``--outputs`` file are: "output0=<name>, ..."."""
    names = names or [f"output{i}" for i in range(len(arrays))]
    return ", ".join(f"output{i}={name}" for i, name in enumerate(names))


def percentiles(latencies_ns: list[int]) -> dict[str, float]:
    """p50/p90/p99/mean/min/max in milliseconds (empty dict for no executions)."""
    if not latencies_ns:
        return {}
    ms = np.asarray(latencies_ns, np.float64) / 1e6
    return {"executions": len(ms), "p50_ms": float(np.percentile(ms, 50)),
            "p90_ms": float(np.percentile(ms, 90)), "p99_ms": float(np.percentile(ms, 99)),
            "mean_ms": float(ms.mean()), "min_ms": float(ms.min()), "max_ms": float(ms.max())}


def timing_summary(trace_data) -> str:
    """parse_systrace's NNAPI table of ``trace_data`` (exported as systrace text)."""
    from nnscope import parse_systrace  # noqa: PLC0415
    from nnscope.tracing.exporters.systrace import SystraceTextExporter  # noqa: PLC0415
    fd, path = tempfile.mkstemp(suffix=".txt", prefix="nnscope-")
    os.close(fd)
    try:
        SystraceTextExporter(path).export(trace_data)
        runs = parse_systrace.summarize(path, tolerant=True)
        return "".join(parse_systrace.render_text(run) for run in runs)
    finally:
        os.unlink(path)


def check_outputs(args, parser: argparse.ArgumentParser) -> None:
    """Reject an unknown ``--trace`` extension, an ``--svg`` file not named .svg, a model file
    with ``--example``, or two flags that write one file, before running (usage error, exit 2)."""
    if args.example and args.model:
        parser.error("give a MODEL file or --example, not both")
    if delegate_mode(args) and _delegate_run.refused_flags(args):
        parser.error(f"{', '.join(_delegate_run.refused_flags(args))} needs --whole-model: it "
                     f"drives one NNAPI compilation of the whole model, and a .tflite "
                     f"runs as the NNAPI delegate runs it by default")
    _otlp.check(args, parser)
    if args.svg and not args.svg.lower().endswith(".svg"):
        parser.error(f"--svg: {args.svg} does not end in .svg; for another format write --dot "
                     f"plan.dot, then e.g. dot -Tpng plan.dot -o plan.png")
    from nnscope.tracing.exporters import exporter_for_path, get_exporter  # noqa: PLC0415
    checks = {"--trace": lambda: exporter_for_path(args.trace),  # an unknown extension, or
              "--perfetto": lambda: get_exporter("perfetto")}   # an exporter whose extra is missing
    for flag, path in (("--trace", args.trace), ("--perfetto", args.perfetto)):
        try:
            if path:
                checks[flag]()
        except ValueError as error:
            parser.error(f"{flag}: {error}")
    if args.outputs and not args.outputs.endswith(".npz"):
        args.outputs += ".npz"  # what numpy writes: the line that names the file says so
    named: dict[str, str] = {}
    for flag, path in _output_paths(args).items():
        if path is None:
            continue
        if os.path.abspath(path) in named:
            parser.error(f"{named[os.path.abspath(path)]} and {flag} both write {path}")
        named[os.path.abspath(path)] = flag


def _output_paths(args) -> dict[str, str | None]:
    """Every file the run writes, by flag (None: not asked for)."""
    return {"--outputs": args.outputs, "--trace": args.trace, "--systrace": args.systrace,
            "--perfetto": args.perfetto, "--html": args.html, "--dot": args.dot, "--svg": args.svg}


def _trace_writer(session: tracing.TraceSession, exporter: str | None):
    """A writer of the session's trace (by extension, or by exporter name) for ``_output_files``."""
    from nnscope.tracing.exporters import ExportResult, get_exporter  # noqa: PLC0415

    def write(path: str) -> None:
        target = path if exporter is None else get_exporter(exporter)(path)
        if session.export(target) != ExportResult.SUCCESS:
            raise OSError(f"the {exporter or 'trace'} exporter failed (see the log line above)")
    return write


def _write_files(args, session: tracing.TraceSession, compilation: Compilation,
                 saved: tuple | None, names: tuple = ((), ()),
                 delegation: dict | None = None,
                 drawings: dict | None = None) -> tuple[list[str], list[str], list[str]]:
    """Write every requested file (a failure goes to a temporary file, see ``_output_files``):
    the ``wrote`` lines, the error lines and the files written where asked. ``delegation``: the
    delegation report of a delegate-mode run (its page shows it instead of a plan);
    ``drawings``: its ``--dot``/``--svg`` writers (``_delegate_run.graph_writers``)."""
    plan = None if delegation is not None else lambda path: graph_dump(compilation, path, *names)
    writers = {"--outputs": lambda path: write_outputs(path, saved[0]),
               "--trace": _trace_writer(session, None),
               "--systrace": _trace_writer(session, "systrace-html"),
               "--perfetto": _trace_writer(session, "perfetto"),
               "--html": _html_report.writer(session, plan, delegation),
               "--dot": lambda path: graph_dump(compilation, path, *names),
               "--svg": lambda path: graphdump.render_svg(compilation, path, *names)}
    writers.update(drawings or {})  # delegate mode: the TFLite graph instead of a plan
    wrote, errors, files = [], [], []
    for flag, path in _output_paths(args).items():
        if path is None:
            continue
        written, line = _output_files.write(path, writers[flag])
        ok = written == path
        if ok and flag == "--outputs":
            line += f" ({_output_keys(*saved)})"
        (wrote if ok else errors).append(line)
        files += [path] if ok else []
    return wrote, errors, files


def _check_files(args) -> None:
    """A MODEL or ``--inputs`` file that does not exist fails before any driver starts."""
    for path, what in ((args.model, "model file"), (args.inputs, "inputs file")):
        if path is not None and not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such {what}")


def main(args) -> int:
    """Run the command; NnError propagates to ``runtime.__main__``. Every output path is
    checked before the run; the report is printed even when a file then cannot be written
    (exit 1, its content in a temporary file)."""
    _check_files(args)
    _output_files.check(_output_paths(args), replaced=("--trace", "--systrace", "--perfetto"))
    if args.svg and graphdump.dot_program() is None:
        raise FileNotFoundError(graphdump.MISSING_DOT)  # before the run, not after it
    session = tracing.TraceSession()
    session.start()
    try:
        if delegate_mode(args):
            return _main_delegated(args, session)
        model, compilation, latencies, saved, compile_ms, names = _profile(args, session)
    finally:
        manager.shutdown()  # after a failed run (a no-op after a normal one)
        session.stop()
    wrote, errors, files = _write_files(args, session, compilation, saved, names)
    stats = percentiles(latencies)
    stats.update(warmup_executions=args.warmup, **{k: round(v, 3) for k, v in compile_ms.items()})
    trace = session.collect()
    per_op = _per_op.table(compilation, trace) if args.per_op else _per_op.hint(trace)
    return _report(args, session, plan_line(model, compilation), compile_ms, stats, per_op,
                   (wrote, errors, files))


def _main_delegated(args, session: tracing.TraceSession) -> int:
    """``main`` for a .tflite in delegate mode (``_delegate_run``); the session stops after."""
    try:
        run = _delegate_run.profile(args, PREFERENCES[args.preference])
    finally:
        manager.shutdown()
        session.stop()
    wrote, errors, files = _write_files(args, session, None, run.saved,
                                        (run.model.input_names, run.model.output_names), run.data,
                                        _delegate_run.graph_writers(run, Path(args.model).stem))
    stats = percentiles(run.latencies)
    stats.update(warmup_executions=args.warmup, **{k: round(v, 3) for k, v in run.times.items()},
                 delegation=run.data)
    per_op = _delegate_run.per_op_table(run) if args.per_op else ""
    return _report(args, session, _delegate_run.delegation_line(run), run.times, stats, per_op,
                   (wrote, errors, files))


def _report(args, session: tracing.TraceSession, headline: str, compile_ms: dict, stats: dict,
            per_op: str, written: tuple) -> int:
    """Print a run's report (to stderr with ``--json``, which prints ``stats``), the files'
    errors, send the trace to OTLP; the exit status (1 when a file could not be written)."""
    wrote, errors, files = written
    out = io.StringIO()
    out.write(headline)
    if not args.no_summary:
        out.write(timing_summary(session.collect()))
    if not args.json:
        out.write(compile_line(compile_ms))
    if stats.get("executions") and not args.json:
        out.write(_latency_line(stats, args.warmup))
    out.write(per_op)
    for line in wrote:
        out.write(line + "\n")
    print(out.getvalue(), end="", file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps(stats))
    for line in errors:
        print(line, file=sys.stderr)
    _otlp.send(session.collect(), args.otlp, files)
    return 1 if errors else 0


def _latency_line(stats: dict, warmup: int) -> str:
    note = f" (after {warmup} warm-up, not counted)" if warmup else ""
    count = stats["executions"]
    return (f"latency over {count} execution{'s' if count != 1 else ''}{note}: p50 {stats['p50_ms']:.3f} ms, "
            f"p90 {stats['p90_ms']:.3f} ms, p99 {stats['p99_ms']:.3f} ms, "
            f"mean {stats['mean_ms']:.3f} ms\n")


def compile_line(times: dict[str, float], width: int = 100) -> str:
    """Driver start-up, cold and warm compilation, each on its own, as MLTS reports them, and
    where the timing table counts them."""
    text = (f"compilation: driver start-up {times['startup_ms']:.2f} ms (the table's "
            f"Initialization), cold {times['cold_compile_ms']:.2f} ms (first finish, drivers up), "
            f"warm {times['warm_compile_ms']:.2f} ms (the same model again; the table's "
            f"Compilation counts both)")
    return textwrap.fill(text, width, subsequent_indent="    ") + "\n"


def plan_line(model: Model, compilation: Compilation, width: int = 100) -> str:
    """``model NAME: N operations; plan: step 0: DEVICE (K ops), ...`` wrapped to ``width``."""
    steps = ", ".join(f"step {s.index}: {s.device.name} ({len(s.operations)} ops)".replace(" ", _KEEP)
                      for s in compilation.plan.steps)
    text = f"model {model.name}: {len(model.operations)} operations; plan: {steps}"
    return textwrap.fill(text, width, subsequent_indent="    ", break_on_hyphens=False).replace(_KEEP, " ") + "\n"


_KEEP = "\xa0"  # a space textwrap does not break at: one step stays on one line
