"""``nnscope bench``: MLTS-style latency, accuracy and stress results per model and device.

Models: those named (built-in names and .tflite files), else every built-in one. Devices:
every device one at a time (``Compilation.for_devices``) and ``all`` (the default plan over
every device, CPU fallback on), or those given with ``--device``. Per model x device: compile time, latency
(median, p90, p99, mean, std and every sample), accuracy against the ``nnapi-reference``
outputs (LiteRT's for a .tflite when ``ai-edge-litert`` is installed) by a model-level
criterion (error relative to each output's range, a threshold per output type: see
:mod:`runtime.cli._bench_run`), and the device's share of the operations. A device that cannot run the whole model is
``unsupported``. ``--stress`` adds the crash tests of :mod:`runtime.cli._bench_stress`.

A .tflite is benchmarked as the TFLite NNAPI delegate runs it (:mod:`runtime.cli._bench_delegate`):
each device as the delegate's one accelerator, the operators it cannot run on LiteRT's CPU
kernels, and ``all`` over every device; its share is the delegated operators (a device that
runs none is ``ok`` with ``0/N delegated``). ``--whole-model`` translates it into one NNAPI
model instead, as a built-in model is run; ``--burst`` and ``--stress`` need it for a .tflite.
``--json`` writes docs/bench-schema.md; ``--html`` renders it with ``python -m nnscope.dashboards``
(:mod:`runtime.cli._bench_report`). A progress bar (tqdm, on stderr) shows after
:data:`SHOW_AFTER_S`, only on a terminal.

Example:
    $ nnscope bench --executions 20 --json bench.json
    $ nnscope bench model.tflite --device sample-minimal --device all --max-partitions 1
    $ nnscope bench tiny_add model.tflite --whole-model --device sample-all --device all --stress
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile

from tqdm import tqdm

from nnscope import tracing
from nnscope.runtime.cli import _otlp, _output_files
from nnscope.runtime.cli._args import count, description, positive_float, positive_int
from nnscope.runtime import builtin_models, manager
from nnscope.runtime.api import NnError
from nnscope.runtime.cli._bench_delegate import DelegateOptions, measure_delegated
from nnscope.runtime.cli._bench_report import SCHEMA, VERSION, render_html, summary, write_json
from nnscope.runtime.cli._bench_run import (ALL, DELEGATE, BurstsUnavailable, Settings,
                                            bursts_available, compile_for, load_model, measure,
                                            model_specs, reference_outputs)
from nnscope.runtime.cli._bench_stress import plan_cases, run_case, target_driver
from nnscope.runtime.cli.delegation import add_delegate_options
from nnscope.tracing import Phase

SHOW_AFTER_S = 1.0
"""Runs shorter than this never draw a progress bar."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("bench", help="benchmark models per device (latency, accuracy, "
                                   "stress)", description=description(__doc__))
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help="a built-in model name or a .tflite file (default: every built-in)")
    parser.add_argument("--device", action="append", metavar="NAME",
                        help=f"benchmark on this device (repeatable; '{ALL}' = the default plan "
                             "over every device); default: each device and all")
    parser.add_argument("--executions", type=positive_int, default=10, metavar="N",
                        help="timed executions per model x device (default 10)")
    parser.add_argument("--warmup", type=count, default=1, metavar="N",
                        help="untimed executions first (default 1)")
    parser.add_argument("--duration", type=positive_float, metavar="S",
                        help="time executions for S seconds instead of N executions")
    parser.add_argument("--burst", action="store_true",
                        help="execute through one burst per run (a .tflite: needs --whole-model)")
    parser.add_argument("--stress", action="store_true",
                        help="also run the crash tests, each in a child process (a .tflite: "
                             "needs --whole-model)")
    parser.add_argument("--hang-scale", type=positive_float, default=1.0, metavar="X",
                        help="a stress case is a HANG after (run seconds + 30) * X (default 1)")
    parser.add_argument("--whole-model", action="store_true",
                        help="translate a .tflite into one NNAPI model (a device that cannot run "
                             "all of it is unsupported) instead of the delegate mode: "
                             "partitions on NNAPI, the rest on LiteRT's CPU kernels")
    add_delegate_options(parser)
    _otlp.add_argument(parser)
    parser.add_argument("--json", metavar="FILE", help="write the results (docs/bench-schema.md)")
    parser.add_argument("--html", metavar="FILE", help="write the bench report page")
    return parser


#: Flags that drive one NNAPI compilation of the whole model (a .tflite needs --whole-model).
WHOLE_MODEL_FLAGS = ("burst", "stress")


def delegate_mode(args) -> bool:
    """A .tflite is benchmarked as the NNAPI delegate runs it unless ``--whole-model``."""
    return not args.whole_model and any(spec not in builtin_models.BUILTIN for spec in args.models)


def check_usage(args, parser: argparse.ArgumentParser) -> None:
    """Refuse a whole-model flag in delegate mode and a bad ``--otlp`` (usage error, exit 2)."""
    refused = [f"--{name}" for name in WHOLE_MODEL_FLAGS if getattr(args, name)]
    if delegate_mode(args) and refused:
        parser.error(f"{', '.join(refused)} needs --whole-model for a .tflite: it drives one "
                     f"NNAPI compilation of the whole model, and a .tflite is benchmarked as the "
                     f"NNAPI delegate runs it by default")
    _otlp.check(args, parser)


def progress_bar(total: int | None, title: str, unit: str = "executions") -> tqdm:
    """A tqdm bar (a context manager) on stderr; disabled when stdout is not a TTY.

    Example:
        >>> with progress_bar(100, "bench") as bar:  # prints nothing here: a doctest's output is no terminal
        ...     progress_label(bar, "tiny_add on sample-all")  # "tiny_add on sample-all:  1%| ... 1/100 executions"
        ...     bar.update(1)
    """
    return tqdm(total=total, desc=title, delay=SHOW_AFTER_S, leave=False,
                disable=not sys.stdout.isatty(), file=sys.stderr, unit=f" {unit}")


def progress_label(bar: tqdm, title: str) -> None:
    """Name what the bar counts now (tqdm adds the one ": " after it)."""
    bar.set_description_str(title)


def _device_names(requested: list[str] | None) -> list[str]:
    """The devices to run on, checked (NnError BAD_DATA for an unknown name)."""
    if not requested:
        return [d.name for d in manager.devices()] + [ALL]
    for name in requested:
        if name != ALL:
            manager.get_device(name)
    return list(dict.fromkeys(requested))


def host_info() -> dict:
    import numpy  # noqa: PLC0415
    return {"hostname": platform.node(), "platform": platform.platform(),
            "machine": platform.machine(), "python": platform.python_version(),
            "numpy": numpy.__version__, "cpu_count": os.cpu_count()}


def _benchmark(bench_models, devices: list[str], settings: Settings, options: DelegateOptions,
               bar) -> list[dict]:
    results = []
    for bench_model in bench_models:
        with tracing.application(Phase.OVERALL, f"{bench_model.name} reference outputs"):
            reference = reference_outputs(bench_model)  # one trace of its own, as each case
        for device in devices:
            progress_label(bar, f"{bench_model.name} on {device}")
            if bench_model.mode == DELEGATE:
                results.append(measure_delegated(bench_model, device, settings, options,
                                                 reference, bar.update))
            else:
                results.append(measure(bench_model, device, settings, reference, bar.update))
    return results


def _stress_target(bench_model, allowed: set[str] | None) -> str | None:
    """The driver to kill or stop: the one running the most of the model's default plan."""
    try:
        compilation = compile_for(bench_model, ALL)
    except NnError:
        return None  # the normal case reports the failure
    try:
        return target_driver(compilation.plan.steps, allowed)
    finally:
        compilation.free()


def _stress(specs, bench_models, devices, results, settings, args) -> list[dict]:
    allowed = {d for d in devices if d not in (ALL, manager.CPU_DEVICE_NAME)} or None
    cases = []
    for spec, bench_model in zip(specs, bench_models):
        run_s = _run_seconds(results, bench_model.name, settings)
        target = _stress_target(bench_model, allowed)
        cases += [(case, run_s) for case in plan_cases(spec, bench_model.name, target)]
    manager.shutdown()  # the children start their own drivers
    outcomes = []
    with progress_bar(len(cases), "stress", unit="cases") as bar:
        for case, run_s in cases:
            progress_label(bar, f"stress {case.case} {case.name}")
            outcomes.append(run_case(case, settings, args.hang_scale, run_s))
            bar.update(1)
    return outcomes


def _run_seconds(results: list[dict], model: str, settings: Settings) -> float:
    """The run's duration: ``--duration``, else what the benchmark took on the default plan."""
    if settings.duration_s is not None:
        return settings.duration_s
    for result in results:
        if result["model"] == model and result["device"] == ALL and result["status"] == "ok":
            latency = result["latency_ms"]
            executions = settings.warmup + settings.executions
            return (result["compile_ms"] + latency["mean"] * executions) / 1e3
    return 0.0


def _start_drivers(names: list[str]) -> None:
    """Start the driver processes the run uses and make a first call to each (a driver loads
    its operations then): start-up is not compile time."""
    used = [d for d in manager.devices() if ALL in names or d.name in names]
    manager.start_devices(used)
    probe = builtin_models.tiny_add().to_hal()
    for device in used:
        device.supported_operations(probe)


def run(args) -> dict:
    """The whole bench as the JSON document."""
    settings = Settings(args.executions, args.warmup, args.duration, args.burst)
    devices = _device_names(args.device)
    specs = model_specs(args.models)
    bench_models = [load_model(spec, delegate=not args.whole_model) for spec in specs]
    options = DelegateOptions(args.feature_level, args.max_partitions)
    per_run = args.warmup + args.executions
    total = None if args.duration else len(bench_models) * len(devices) * per_run
    session = tracing.TraceSession().start() if getattr(args, "otlp", None) else None
    try:
        with tracing.application(Phase.INITIALIZATION, "start drivers"):
            _start_drivers(devices)
        with progress_bar(total, "bench") as bar:
            results = _benchmark(bench_models, devices, settings, options, bar)
        stress = _stress(specs, bench_models, devices, results, settings, args) \
            if args.stress else []
    finally:
        with tracing.application(Phase.TERMINATION, "shutdown drivers"):
            manager.shutdown()
        if session is not None:
            session.stop()
    if session is not None:  # each case (its [NN_LA_PO]) is one trace
        _otlp.send(session.collect(), args.otlp)
    return {"schema": SCHEMA, "version": VERSION,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": host_info(),
            "settings": {"executions": args.executions, "warmup": args.warmup,
                         "duration_s": args.duration, "burst": args.burst},
            "results": results, "stress": stress}


def main(args) -> int:
    _output_files.check({"--json": args.json, "--html": args.html})  # before the run
    if args.burst and not bursts_available():
        print("nnscope: error: bursts are not available", file=sys.stderr)
        return 2
    try:
        document = run(args)
    except BurstsUnavailable as error:
        print(f"nnscope: error: {error}", file=sys.stderr)
        return 2
    print(summary(document), end="")
    return _write_outputs(document, args)


def _write_outputs(document: dict, args) -> int:
    """Write --json and --html; a file that cannot be written is one error line and exit 1,
    and the results stay in a temporary JSON file that the line names."""
    json_path = None
    if args.json:
        json_path, line = _output_files.write(args.json, lambda path: write_json(document, path))
        print(line, file=sys.stdout if json_path == args.json else sys.stderr)
    if not args.html:
        return 0 if json_path == args.json else 1
    scratch = None
    if json_path is None:
        fd, scratch = tempfile.mkstemp(suffix=".json", prefix="nnscope-bench-")
        os.close(fd)
        write_json(document, scratch)
    error = render_html(json_path or scratch, args.html)
    if error:
        kept = f"; the results are in {scratch}" if scratch else ""
        print(f"nnscope: error: {error}{kept}", file=sys.stderr)
        return 1
    if scratch:
        os.unlink(scratch)
    print(f"wrote {args.html}")
    return 0 if json_path == args.json else 1
