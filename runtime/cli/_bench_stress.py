"""``nnscope bench --stress``: MLTS-style crash tests, each case in a child process.

Per model: ``normal`` (the default plan, nothing injected), ``driver-killed`` (SIGKILL to the
driver running the most operations of the plan, half-way through the executions) and
``driver-stopped`` (SIGSTOP to it: the driver stops answering). The child
(:mod:`runtime.cli._bench_child`) runs in its own process group with its driver processes.

Outcomes: the child's own SUCCESS or FAILURE; HANG when it has no result within
``(run seconds + 30) * hang_scale`` from the start of its run (set-up: :data:`SETUP_LIMIT_S`),
after which the whole process group is killed; CRASH when it died (a signal, or an exit without
a result). The parent never waits longer than these limits.
The runtime recovers from a dead driver (CPU fallback, or the driver restarted), so a killed
driver is usually SUCCESS; a stopped driver is HANG unless the budget outlasts the driver timeout
(``runtime.drivers.ipc.client.device.DEFAULT_TIMEOUT_S``), after which the runtime recovers too.

Example:
    >>> case = StressCase("driver-killed", "tiny_add", "sample-minimal")
    >>> run_case(case, Settings(10, 1), hang_scale=1.0, run_s=0.1)["outcome"]  # starts and kills a driver  # doctest: +SKIP
    'SUCCESS'
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nnscope.runtime.cli._bench_child import CASES, NORMAL, started_path
from nnscope.runtime.cli._bench_run import ALL, Settings

HANG_GRACE_S = 30.0
"""MLTS's allowance beyond the run's own duration before a case is a HANG."""
SETUP_LIMIT_S = 120.0
"""How long a child may take to start its run (interpreter, driver processes, compilation)
before it is a HANG; not scaled by ``--hang-scale``."""
EXIT_GRACE_S = 5.0
"""How long a child that has written its result may take to stop its drivers and exit."""
_POLL_S = 0.02


@dataclass(frozen=True)
class StressCase:
    case: str
    model: str  # the spec: built-in name or .tflite path
    device: str  # ALL for the normal case, else the driver signalled
    name: str = ""  # the model's name, as in the bench results (default: the spec)


def target_driver(plan_steps, allowed: set[str] | None) -> str | None:
    """The driver (not the CPU fallback) with the most operations in the plan's steps."""
    from nnscope.runtime.manager import CPU_DEVICE_NAME  # noqa: PLC0415
    counts: dict[str, int] = {}
    for step in plan_steps:
        name = step.device.name
        if name != CPU_DEVICE_NAME and (allowed is None or name in allowed):
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
    command = [sys.executable, "-m", "nnscope.runtime.cli._bench_child", str(result), case.case,
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
