"""A generated device lab: trees of NNAPI traces whose truth is known (issue 35).

:func:`generate_fleet` writes ``ROOT/<device>/<build>/<model>/<n>.<ext>``: for each device,
build and model a number of traces, each one run (``[NN_LA_PO]<model>``) of a simulated NNAPI
application (model building, compilation with a driver's ``prepareModel`` or the CPU,
executions through the driver's ``IPreparedModel::execute`` or the CPU's operations, warmup and
benchmark, teardown), in a mix of the formats ``parse_systrace`` reads: systrace HTML, ftrace
text, Chrome JSON, Perfetto (written by our own exporter) and gzip forms. Durations follow a
device's speed, a model's weight and a per-run jitter (lognormal, sigma :data:`JITTER`), so
groups without a change differ only by noise.

:data:`REGRESSIONS` are injected: a factor on the work of one layer's phase for one device and
build (all models). With ``broken=True`` each group of the first device and the last build also
gets broken files, one of each kind in :data:`BROKEN` (empty, corrupt, truncated, not a trace,
truncated gzip), which a fleet must report as errors. The returned :class:`Truth` lists
what was written (the command line writes it to ``--truth FILE``).

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as root:
    ...     truth = generate_fleet(root, devices=("pixel6",), builds=("b1",), models=("mobilenet",),
    ...                            traces_per_group=2, execs=2, broken=False)
    ...     sorted(path.rpartition(".")[2] for path in truth.traces)
    ['html', 'txt']

Command line (the benchmark's fleets): ``python -m tests.support.fleet_gen ROOT --traces-per-group 40``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.support import trace_convert
from tests.support.gen_systrace import render, wrap_html

#: device -> (speed factor, whether it has an NNAPI driver; without one, the CPU runs the model).
DEVICES = {"pixel6": (1.0, True), "pixel7": (0.8, True), "galaxy": (1.2, False)}
#: model -> (operations, compute weight).
MODELS = {"mobilenet": (8, 1.0), "ssd_lite": (12, 1.6), "asr": (5, 2.2)}
BUILDS = ("b100", "b101")
_CODE = re.compile(r"\[NN_(L[A-Z]_P[A-Z]+)\]")
#: One run's overall speed: exp(N(0, JITTER)).
JITTER = 0.04


@dataclass(frozen=True)
class Regression:
    """``factor`` on the work of ``layer``'s ``phase`` scopes on ``device`` in ``build``."""

    device: str
    build: str
    layer: str
    phase: str
    factor: float


#: The injected changes: pixel6's driver executes 20 % slower in b101; galaxy's CPU compute is
#: 15 % faster in b101.
REGRESSIONS = (Regression("pixel6", "b101", "LD", "PE", 1.20),
               Regression("galaxy", "b101", "LC", "PE", 0.85))
#: Format of the n-th trace of a group, in turn.
FORMATS = ("html", "txt", "json", "pftrace", "txt.gz", "json.gz", "html", "txt")
#: Broken files (name -> kind), written into the broken groups.
BROKEN = {"empty.txt": "empty", "corrupt.pftrace": "corrupt", "truncated.txt": "truncated",
          "notes.html": "not a trace", "truncated.json.gz": "truncated gzip"}


@dataclass
class Truth:
    """What :func:`generate_fleet` wrote: trace path (relative to the root) -> its group, and
    broken path -> kind."""

    traces: dict = field(default_factory=dict)
    broken: dict = field(default_factory=dict)
    regressions: list = field(default_factory=list)
    bytes: int = 0


class _Sim:
    """Marks of one application process and one driver process, in time order."""

    def __init__(self, rng: random.Random, speed: float, scales: dict) -> None:
        self.rng, self.speed, self.scales = rng, speed, scales
        self.t = 1000.0 + rng.uniform(0, 500)
        self.rows = []  # (ts, seq, task, tid, tgid, mark)
        self.scale = 1.0

    def step(self, lo: float, hi: float, scale: float = 1.0) -> None:
        self.t += self.rng.uniform(lo, hi) * self.speed * scale

    def mark(self, thread: tuple, name=None) -> None:
        task, tid, tgid = thread
        self.rows.append((round(self.t, 6), len(self.rows), task, tid, tgid,
                          f"B|{tgid}|{name}" if name else f"E|{tgid}"))
        self.t += 1e-6

    def scope(self, thread, name, work=(1e-5, 5e-4), inner=None) -> None:
        code = _CODE.search(name)
        scale = self.scales.get(code.group(1), 1.0) if code else 1.0
        self.mark(thread, name)
        self.step(*work, scale)
        if inner:
            inner()
            self.step(*work, scale)
        self.mark(thread)
        self.step(2e-6, 5e-5)

    def hidl(self, client, server, iface, method, work, inner=None, callback=None) -> None:
        self.mark(client, f"HIDL::{iface}::{method}::client")
        self.step(1e-5, 5e-5)
        self.mark(server, f"HIDL::{iface}::{method}::server")
        self.step(5e-6, 2e-5)
        if inner:
            inner()
        self.step(*work)
        if callback:
            callback()
        self.mark(server)
        self.step(5e-6, 3e-5)
        self.mark(client)
        self.step(2e-6, 2e-5)


def simulate(rng: random.Random, model: str, ops: int, weight: float, speed: float,
             driver: bool, execs: int, scales: dict) -> list:
    """The rows ``(ts, seq, task, tid, tgid, mark)`` of one traced run of ``model``."""
    sim = _Sim(rng, speed * math.exp(rng.gauss(0.0, JITTER)), scales)
    app, drv = rng.randint(3000, 30000), rng.randint(500, 2000)
    main, worker = ("bench", app, app), ("NeuralNetworks", app + 7, app)
    binder, dthread = (f"HwBinder:{app}_1", app + 3, app), ("neuralnetworks", drv, drv)

    def build() -> None:
        sim.scope(main, "[NN_LR_PP]ANeuralNetworksModel_create")
        for _ in range(ops * 3):
            sim.scope(main, "[NN_LR_PP]ANeuralNetworksModel_addOperand", (2e-6, 2e-5))
        for _ in range(ops):
            sim.scope(main, "[NN_LR_PP]ANeuralNetworksModel_addOperation", (2e-6, 3e-5))
        sim.scope(main, "[NN_LR_PP]ANeuralNetworksModel_finish", (1e-5, 2e-4))

    def notify(callback: str) -> None:
        sim.mark(dthread, f"HIDL::{callback}::notify::client")
        sim.step(1e-5, 5e-5)
        sim.mark(binder, f"HIDL::{callback}::notify::server")
        sim.step(1e-5, 4e-5)
        sim.mark(binder)
        sim.mark(dthread)

    def compile_() -> None:
        def finish() -> None:
            if driver:
                sim.scope(main, "[NN_LR_PC]ExecutionPlan::partitionTheWork", (5e-5, 5e-4))
                sim.scope(main, "[NN_LI_PC]prepareModel", (1e-5, 5e-5), inner=lambda: sim.hidl(
                    main, dthread, "IDevice", "prepareModel_1_1", (1e-5, 1e-4),
                    inner=lambda: sim.scope(dthread, "[NN_LD_PC]SampleDriver::prepareModel",
                                            (1e-3 * weight, 2e-2 * weight)),
                    callback=lambda: notify("IPreparedModelCallback")))
            else:
                sim.scope(main, "[NN_LR_PC]CpuDevice::prepareModel", (1e-4, 2e-3))
        sim.scope(main, "[NN_LR_PC]ANeuralNetworksCompilation_create")
        sim.scope(main, "[NN_LR_PC]ANeuralNetworksCompilation_finish", inner=finish)

    def cpu_ops() -> None:
        for op in range(ops):
            sim.mark(worker, f"[NN_LC_PTR]op{op}Float32")
            sim.step(1e-5, 1e-4, scales.get("LC_PE", 1.0))
            sim.mark(worker, f"[SW][NN_LC_PCO]op{op}Float32")
            sim.step(4e-4 * weight, 5e-4 * weight, scales.get("LC_PE", 1.0))
            sim.mark(worker)
            sim.mark(worker)

    def work() -> None:
        if driver:
            sim.scope(worker, "[NN_LI_PE]StepExecutor::startComputeOnDevice::execute", (1e-5, 1e-4),
                      inner=lambda: sim.hidl(worker, dthread, "IPreparedModel", "execute", (1e-5, 1e-4),
                                             inner=lambda: sim.scope(
                                                 dthread, "[NN_LD_PE]SampleDriver::execute",
                                                 (2e-3 * weight, 2.6e-3 * weight)),
                                             callback=lambda: notify("IExecutionCallback")))
        else:
            sim.scope(worker, "[NN_LR_PE]StepExecutor::startComputeOnCpu", (1e-5, 1e-4), inner=cpu_ops)

    def execution() -> None:
        sim.scope(main, "[NN_LR_PE]ANeuralNetworksExecution_create")
        sim.scope(main, "[NN_LR_PIO]ANeuralNetworksExecution_setInput")
        sim.scope(main, "[NN_LR_PIO]ANeuralNetworksExecution_setOutput")
        sim.scope(main, "[NN_LR_PE]ANeuralNetworksExecution_startCompute")
        sim.scope(worker, "[NN_LR_PE]asyncStartComputePartitioned", (1e-5, 1e-4), inner=work)
        sim.scope(main, "[NN_LR_PE]ANeuralNetworksEvent_wait", (1e-5, 2e-4))
        sim.scope(main, "[NN_LR_PE]ANeuralNetworksEvent_free")
        sim.scope(main, "[NN_LR_PE]ANeuralNetworksExecution_free")

    def executions(count: int) -> None:
        for _ in range(count):
            sim.scope(main, "[NN_LA_PE]runInference", (1e-5, 3e-4), inner=execution)

    def body() -> None:
        sim.scope(main, "[NN_LA_PP]buildModel", inner=build)
        sim.scope(main, "[NN_LA_PC]compileModel", inner=compile_)
        sim.scope(main, "[NN_LA_PWU]warmup", inner=lambda: executions(max(1, execs // 4)))
        sim.scope(main, "[NN_LA_PBM]benchmark", inner=lambda: executions(execs))
        sim.scope(main, "[NN_LA_PT]teardown", inner=lambda: (
            sim.scope(main, "[NN_LR_PT]ANeuralNetworksCompilation_free"),
            sim.scope(main, "[NN_LR_PT]ANeuralNetworksModel_free")))
    sim.scope(main, f"[NN_LA_PO]{model}", inner=body)
    return sorted(sim.rows)


def encode(rows: list, fmt: str) -> bytes:
    """The rows of :func:`simulate` as a file of format ``fmt`` (a :data:`FORMATS` entry)."""
    base, _, packed = fmt.partition(".")
    if base in ("html", "txt"):
        text = render(rows, "text")
        data = (wrap_html(text) if base == "html" else text).encode()
    else:
        reader_rows = [(ts, tid, tgid, None if mark.startswith("E|") else mark.split("|", 2)[2], i)
                       for i, (ts, _, _, tid, tgid, mark) in enumerate(rows)]
        data = (trace_convert.chrome_json(reader_rows, "X") if base == "json"
                else trace_convert.perfetto_exporter(reader_rows))
    return gzip.compress(data, mtime=0) if packed == "gz" else data


def broken_file(kind: str, rng: random.Random, good: bytes) -> bytes:
    """A file of ``kind`` (a :data:`BROKEN` value), from the text of a good trace."""
    if kind == "empty":
        return b""
    if kind == "corrupt":
        return b"\x0a\xff\xff\xff\xff\x0f" + bytes(rng.getrandbits(8) for _ in range(512))
    if kind == "truncated":
        return good[:len(good) // 2]
    if kind == "not a trace":
        return b"<html><body><p>lab notes: phone 3 rebooted twice</p></body></html>\n"
    packed = gzip.compress(good, mtime=0)
    return packed[:len(packed) // 2]


def generate_fleet(root, *, devices=tuple(DEVICES), builds=BUILDS, models=tuple(MODELS),
                   traces_per_group: int = 8, execs: int = 8, seed: int = 0,
                   regressions=REGRESSIONS, broken: bool = True, formats=FORMATS) -> Truth:
    """Write the fleet under ``root`` (see the module docstring) and return its :class:`Truth`."""
    root = Path(root)
    truth = Truth(regressions=[asdict(r) for r in regressions])
    for device in devices:
        speed, driver = DEVICES[device]
        for build in builds:
            scales = {f"{r.layer}_{r.phase}": r.factor for r in regressions
                      if r.device == device and r.build == build}
            for model in models:
                ops, weight = MODELS[model]
                folder = root / device / build / model
                folder.mkdir(parents=True, exist_ok=True)
                rng = random.Random(f"{seed}/{device}/{build}/{model}")
                text = b""
                for n in range(traces_per_group):
                    rows = simulate(rng, model, ops, weight, speed, driver, execs, scales)
                    fmt = formats[n % len(formats)]
                    data = encode(rows, fmt)
                    text = text or render(rows, "text").encode()
                    path = folder / f"{n:04d}.{fmt}"
                    path.write_bytes(data)
                    truth.traces[path.relative_to(root).as_posix()] = dict(
                        device=device, build=build, model=model)
                    truth.bytes += len(data)
                if broken and device == devices[0] and build == builds[-1]:
                    for name, kind in BROKEN.items():
                        path = folder / name
                        path.write_bytes(broken_file(kind, rng, text))
                        truth.broken[path.relative_to(root).as_posix()] = kind
    return truth


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.fleet_gen", description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("--traces-per-group", type=int, default=8)
    parser.add_argument("--execs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-broken", action="store_true")
    parser.add_argument("--truth", help="write the truth as JSON to this file")
    args = parser.parse_args(argv)
    truth = generate_fleet(args.root, traces_per_group=args.traces_per_group, execs=args.execs,
                           seed=args.seed, broken=not args.no_broken)
    if args.truth:
        Path(args.truth).write_text(json.dumps(asdict(truth), indent=1) + "\n")
    print(f"{len(truth.traces)} traces, {len(truth.broken)} broken files, {truth.bytes / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
