"""One ``nnscope bench --stress`` case, run in its own process by :mod:`runtime.cli._bench_stress`.

``python -m nnscope.runtime.cli._bench_child RESULT CASE MODEL EXECUTIONS WARMUP [--duration S]
[--target DRIVER]`` compiles MODEL with the default plan (every device, CPU fallback on),
warms up, then times EXECUTIONS executions; half-way through, ``driver-killed`` sends SIGKILL
and ``driver-stopped`` SIGSTOP to the DRIVER process. It then checks the outputs of one more
execution against the ``nnapi-reference`` outputs with the bench's model-level criterion, float32
outputs held to the float16 threshold (a fault must not corrupt them; see ``_bench_models``) and writes
``{"outcome": "SUCCESS"|"FAILURE", "detail": ...}`` (JSON) to RESULT. It creates
``RESULT.started`` when set-up is done and the run begins (the parent's HANG clock starts
then). A process that dies writes nothing: the parent calls that a CRASH, and one that does not
finish in time a HANG.

Example:
    $ python -m nnscope.runtime.cli._bench_child /tmp/r.json driver-killed tiny_add 10 1 \\
          --target sample-minimal
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from nnscope.runtime import manager
from nnscope.runtime.cli._backend import _output_buffers, compute_arrays
from nnscope.runtime.cli._bench_models import accuracy, load_model, reference_outputs
from nnscope.runtime.cli._bench_run import ALL, compile_for, run_executions

NORMAL, DRIVER_KILLED, DRIVER_STOPPED = "normal", "driver-killed", "driver-stopped"
CASES = (NORMAL, DRIVER_KILLED, DRIVER_STOPPED)
_SIGNALS = {DRIVER_KILLED: signal.SIGKILL, DRIVER_STOPPED: signal.SIGSTOP}

NNSCOPE_forTest_BENCH_ABORT = "NNSCOPE_forTest_BENCH_ABORT"
"""Test hook (environment variable): the stress case of this name calls ``os.abort()``
half-way through its executions, so tests can check that a dying child is a CRASH."""


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


def run_case(case: str, spec: str, executions: int, warmup: int, duration_s: float | None,
             target: str | None, on_start=lambda: None) -> dict:
    """The case's outcome (SUCCESS or FAILURE) and a one-line detail; ``on_start`` is called
    when set-up (loading, compiling) is done and the run (warm-up, executions) begins."""
    bench_model = load_model(spec)
    kind, expected = reference_outputs(bench_model, litert=False)  # faults must not change outputs
    compilation = compile_for(bench_model, ALL)
    pid = manager.get_device(target).pid if target else None
    if case in _SIGNALS and not pid:
        return {"outcome": "FAILURE", "detail": f"driver {target} has no process to signal"}
    outputs = _output_buffers(compilation, None)
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
    parser = argparse.ArgumentParser(prog="python -m nnscope.runtime.cli._bench_child")
    parser.add_argument("result")
    parser.add_argument("case", choices=CASES)
    parser.add_argument("model")
    parser.add_argument("executions", type=int)
    parser.add_argument("warmup", type=int)
    parser.add_argument("--duration", type=float)
    parser.add_argument("--target")
    return parser


def started_path(result: str) -> str:
    """The file the child creates when its run begins (set-up done)."""
    return result + ".started"


def _write(path: str, result: dict) -> None:
    """Write ``result`` whole or not at all (the parent reads it as soon as it appears)."""
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    os.replace(path + ".tmp", path)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        result = run_case(args.case, args.model, args.executions, args.warmup, args.duration,
                          args.target, lambda: open(started_path(args.result), "x").close())
    except Exception as error:  # noqa: BLE001 - any error of the case is its FAILURE
        result = {"outcome": "FAILURE", "detail": f"{type(error).__name__}: {error}"}
    _write(args.result, result)
    manager.shutdown()  # the parent has the result; it may kill us from here on
    return 0


if __name__ == "__main__":
    sys.exit(main())
