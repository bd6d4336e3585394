"""``nnscope bench --stress``: MLTS-style crash tests, each case in a child process.

Per model: ``normal`` (the default plan, nothing injected), ``driver-killed`` (SIGKILL to the
driver running the most operations of the plan, half-way through the executions) and
``driver-stopped`` (SIGSTOP to it: the driver stops answering). The child (this module run as
a program, see below) runs in its own process group with its driver processes.

Outcomes: the child's own SUCCESS or FAILURE; HANG when it has no result within
``(run seconds + 30) * hang_scale`` from the start of its run (set-up: :data:`SETUP_LIMIT_S`),
after which the whole process group is killed; CRASH when it died (a signal, or an exit without
a result). The parent never waits longer than these limits.
The runtime recovers from a dead driver (CPU fallback, or the driver restarted), so a killed
driver is usually SUCCESS; a stopped driver is HANG unless the budget outlasts the driver timeout
(``runtime.drivers.ipc.client.device.DEFAULT_TIMEOUT_S``), after which the runtime recovers too.

The child: ``python -m nnscope.runtime.cli._bench_stress RESULT CASE MODEL EXECUTIONS WARMUP
[--duration S] [--target DRIVER]`` (:func:`main`, :func:`run_in_child`) compiles MODEL with the
default plan (every device, CPU fallback on), warms up, then times EXECUTIONS executions;
half-way through, ``driver-killed`` sends SIGKILL and ``driver-stopped`` SIGSTOP to the DRIVER
process. It then checks the outputs of one more execution against the ``nnapi-reference``
outputs with the bench's model-level criterion, float32 outputs held to the float16 threshold (a
fault must not corrupt them; see ``_bench_run``) and writes ``{"outcome": "SUCCESS"|"FAILURE",
"detail": ...}`` (JSON) to RESULT. It creates ``RESULT.started`` when set-up is done and the run
begins (the parent's HANG clock starts then). A process that dies writes nothing: the parent
calls that a CRASH, and one that does not finish in time a HANG.

Example:
    >>> case = StressCase("driver-killed", "tiny_add", "sample-minimal")
    >>> run_case(case, Settings(10, 1), hang_scale=1.0, run_s=0.1)["outcome"]  # starts and kills a driver  # doctest: +SKIP
    'SUCCESS'

The child alone::

    $ python -m nnscope.runtime.cli._bench_stress /tmp/r.json driver-killed tiny_add 10 1 \\
          --target sample-minimal
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nnscope.runtime import manager
from nnscope.runtime.cli._backend import compute_arrays, output_buffers
from nnscope.runtime.cli._bench_run import (ALL, Settings, accuracy, compile_for, load_model,
                                            reference_outputs, run_executions)

NORMAL, DRIVER_KILLED, DRIVER_STOPPED = "normal", "driver-killed", "driver-stopped"
CASES = (NORMAL, DRIVER_KILLED, DRIVER_STOPPED)
_SIGNALS = {DRIVER_KILLED: signal.SIGKILL, DRIVER_STOPPED: signal.SIGSTOP}

NNSCOPE_forTest_BENCH_ABORT = "NNSCOPE_forTest_BENCH_ABORT"
"""Test hook (environment variable): the stress case of this name calls ``os.abort()``
half-way through its executions, so tests can check that a dying child is a CRASH."""

HANG_GRACE_S = 30.0
"""MLTS's allowance beyond the run's own duration before a case is a HANG."""
SETUP_LIMIT_S = 120.0
"""How long a child may take to start its run (interpreter, driver processes, compilation)
before it is a HANG; not scaled by ``--hang-scale``."""
EXIT_GRACE_S = 5.0
"""How long a child that has written its result may take to stop its drivers and exit."""
_POLL_S = 0.02


def started_path(result: str) -> str:
    """The file the child creates when its run begins (set-up done)."""
    return result + ".started"


@dataclass(frozen=True)
class StressCase:
    case: str
    model: str  # the spec: built-in name or .tflite path
    device: str  # ALL for the normal case, else the driver signalled
    name: str = ""  # the model's name, as in the bench results (default: the spec)


def target_driver(plan_steps, allowed: set[str] | None) -> str | None:
    """The driver (not the CPU fallback) with the most operations in the plan's steps."""
    counts: dict[str, int] = {}
    for step in plan_steps:
        name = step.device.name
        if name != manager.CPU_DEVICE_NAME and (allowed is None or name in allowed):
            counts[name] = counts.get(name, 0) + len(step.operations)
    return max(counts, key=counts.get) if counts else None


def plan_cases(spec: str, name: str, target: str | None) -> list[StressCase]:
    """The cases of one model; without a driver in its plan, only the normal case."""
    cases = [StressCase(NORMAL, spec, ALL, name)]
    if target is not None:
        cases += [StressCase(case, spec, target, name) for case in CASES if case != NORMAL]
    return cases


def budget_s(run_s: float, hang_scale: float) -> float:
    return (run_s + HANG_GRACE_S) * hang_scale


def _command(case: StressCase, settings: Settings, result: Path) -> list[str]:
    command = [sys.executable, "-m", "nnscope.runtime.cli._bench_stress", str(result), case.case,
               case.model, str(settings.executions), str(settings.warmup)]
    if settings.duration_s is not None:
        command += ["--duration", repr(settings.duration_s)]
    if case.device != ALL:
        command += ["--target", case.device]
    return command


def run_case(case: StressCase, settings: Settings, hang_scale: float, run_s: float) -> dict:
    """Run one case in a child process; the ``stress`` entry of the bench JSON."""
    limit = budget_s(run_s, hang_scale)
    with tempfile.TemporaryDirectory(prefix="nnscope-stress-") as scratch:
        result, log = Path(scratch) / "result.json", Path(scratch) / "stderr.txt"
        start = time.monotonic()
        with open(log, "wb") as stderr:
            child = subprocess.Popen(_command(case, settings, result), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=stderr,
                                     start_new_session=True)
            hung, seconds = True, 0.0
            try:
                hung = not _wait(child, result, limit)
                seconds = time.monotonic() - start
                if not hung:
                    _wait_exit(child, EXIT_GRACE_S)  # drivers shut down; then the group is killed
            finally:
                _kill_group(child)
        outcome, detail = _classify(child.returncode, hung, result, log, limit, run_s, hang_scale)
    return {"case": case.case, "model": case.name or case.model, "device": case.device,
            "outcome": outcome, "seconds": round(seconds, 3), "detail": detail}


def _wait(child: subprocess.Popen, result: Path, limit: float) -> bool:
    """Until the child exits or writes its result (True), or a limit passes (False): the
    set-up limit until it starts its run, then ``limit`` from that moment."""
    marker = Path(started_path(str(result)))
    deadline, started = time.monotonic() + SETUP_LIMIT_S, False
    while child.poll() is None and not result.exists():
        now = time.monotonic()
        if not started and marker.exists():
            deadline, started = now + limit, True
        if now > deadline:
            return False
        time.sleep(_POLL_S)
    return True


def _wait_exit(child: subprocess.Popen, seconds: float) -> None:
    try:
        child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass


def _kill_group(child: subprocess.Popen) -> None:
    """SIGKILL the child's process group (the child and its driver processes) and reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()


def _classify(code: int, hung: bool, result: Path, log: Path, limit: float, run_s: float,
              hang_scale: float) -> tuple[str, str]:
    if hung:
        if not Path(started_path(str(result))).exists():
            return "HANG", (f"set-up did not finish within {SETUP_LIMIT_S:g} s; its processes "
                            "were killed")
        return "HANG", (f"no result within {limit:.1f} s of its run ((run {run_s:.1f} s + "
                        f"{HANG_GRACE_S:g} s) x {hang_scale:g}); its processes were killed")
    try:
        reported = json.loads(result.read_text(encoding="utf-8"))
        return str(reported["outcome"]), str(reported["detail"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if code < 0:
        return "CRASH", f"child died of {signal.Signals(-code).name}{_last_line(log)}"
    return "CRASH", f"child exited with status {code} without a result{_last_line(log)}"


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
             if line.strip()]
    return f": {lines[-1].strip()[:200]}" if lines else ""


# --------------------------------------------------------------------------- the child
class _Fault:
    """Fires once, after half the executions (or half the duration): the case's signal to the
    driver, or the test hook's abort."""

    def __init__(self, case: str, pid: int | None, executions: int, duration_s: float | None):
        self.case, self.pid, self.done = case, pid, 0
        self.half_count = max(1, executions // 2)
        self.half_time = time.monotonic() + duration_s / 2 if duration_s is not None else None
        self.fired_after: int | None = None

    def __call__(self, count: int) -> None:
        self.done += count
        due = self.done >= self.half_count if self.half_time is None else \
            time.monotonic() >= self.half_time
        if self.fired_after is not None or not due:
            return
        self.fired_after = self.done
        if os.environ.get(NNSCOPE_forTest_BENCH_ABORT) == self.case:
            os.abort()
        if self.case in _SIGNALS and self.pid:
            os.kill(self.pid, _SIGNALS[self.case])


def run_in_child(case: str, spec: str, executions: int, warmup: int, duration_s: float | None,
                 target: str | None, on_start=lambda: None) -> dict:
    """Run the case in this process (the child): its outcome (SUCCESS or FAILURE) and a one-line detail; ``on_start`` is called
    when set-up (loading, compiling) is done and the run (warm-up, executions) begins."""
    bench_model = load_model(spec)
    kind, expected = reference_outputs(bench_model, litert=False)  # faults must not change outputs
    compilation = compile_for(bench_model, ALL)
    pid = manager.get_device(target).pid if target else None
    if case in _SIGNALS and not pid:
        return {"outcome": "FAILURE", "detail": f"driver {target} has no process to signal"}
    outputs = output_buffers(compilation)
    on_start()
    run_executions(compilation, bench_model.inputs, outputs, warmup, None, None, lambda n: None)
    fault = _Fault(case, pid, executions, duration_s)
    latencies = run_executions(compilation, bench_model.inputs, outputs, max(executions, 2),
                               duration_s, None, fault)
    actual = compute_arrays(compilation, bench_model.inputs)
    checked = accuracy(bench_model, expected, actual, relaxed=True)
    where = f"{case} of {target} (pid {pid}) after {fault.fired_after} executions; " if pid else ""
    detail = (f"{where}{len(latencies)} executions; max abs error {checked['max_abs_error']:.3g} "
              f"({checked['relative_error']:.2g} of the output range) vs {kind}")
    if not checked["within_tolerance"]:
        return {"outcome": "FAILURE", "detail": f"{detail}: over the threshold {checked['threshold']:.2g}"}
    return {"outcome": "SUCCESS", "detail": detail}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nnscope.runtime.cli._bench_stress")
    parser.add_argument("result")
    parser.add_argument("case", choices=CASES)
    parser.add_argument("model")
    parser.add_argument("executions", type=int)
    parser.add_argument("warmup", type=int)
    parser.add_argument("--duration", type=float)
    parser.add_argument("--target")
    return parser


def _write(path: str, result: dict) -> None:
    """Write ``result`` whole or not at all (the parent reads it as soon as it appears)."""
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(path + ".tmp", path)


def main(argv: list[str] | None = None) -> int:
    """The child's program: run one case, write its result, stop the drivers."""
    args = _parser().parse_args(argv)
    try:
        result = run_in_child(args.case, args.model, args.executions, args.warmup, args.duration,
                              args.target, lambda: open(started_path(args.result), "x").close())
    except Exception as error:  # noqa: BLE001 - any error of the case is its FAILURE
        result = {"outcome": "FAILURE", "detail": f"{type(error).__name__}: {error}"}
    _write(args.result, result)
    manager.shutdown()  # the parent has the result; it may kill us from here on
    return 0


if __name__ == "__main__":
    sys.exit(main())
