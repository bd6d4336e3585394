"""Fixtures of the dashboard view tests: one real ``nnscope run`` on all CPU-kernel devices
(without ``sample-litert``, which would take the model as one step without per-operation spans).

``nnscope_run`` runs the installed ``nnscope`` CLI once per session in a subprocess with
``--trace run.json`` (Chrome JSON), ``--perfetto run.pftrace``, ``--systrace run.html``
and ``--dot plan.dot``, and keeps what it printed: the plan line (steps and their devices
and operation counts) and the ``--json`` latencies.

``delegate_run`` runs ``face_landmark.tflite`` in delegate mode at feature level 28 (PRELU
needs 29, and at most 3 partitions: most operators stay on LiteRT's CPU kernels) with
``--html`` and ``--trace`` of the same run, and keeps the ``--json`` delegation report.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import MODEL_FIXTURES, REPO
from tests.support.programs import cpu_kernel_drivers_env

EXECUTIONS, WARMUP = 5, 1


@dataclass
class NnscopeRun:
    trace: Path
    perfetto: Path
    systrace: Path
    dot: Path
    plan: list  # [(step, device, operations), ...] as printed
    latencies: dict  # the --json line


def parse_plan(line: str) -> list:
    """``step 0: sample-minimal (28 ops), ...`` -> ``[(0, "sample-minimal", 28), ...]``."""
    return [(int(s), d, int(n)) for s, d, n in re.findall(r"step (\d+): (\S+) \((\d+) ops\)", line)]


def _plan_lines(text: str) -> str:
    """The plan as printed: its ``model ...: plan:`` line and the indented lines it wraps onto."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "plan:" in line)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
    return " ".join(lines[start:end])


def nnscope_program() -> str:
    """The ``nnscope`` console script of this install."""
    nnscope = Path(sys.executable).with_name("nnscope")
    return str(nnscope if nnscope.exists() else Path(shutil.which("nnscope") or "nnscope"))


@dataclass
class DelegateRun:
    trace: Path  # --trace run.json
    page: Path  # --html run.html (its trace is named run.json too)
    delegation: dict  # the "delegation" of --json: runtime.delegate.report.report()


@pytest.fixture(scope="session")
def delegate_run(tmp_path_factory) -> DelegateRun:
    out = tmp_path_factory.mktemp("delegate-run")
    trace, page = out / "run.json", out / "run.html"
    done = subprocess.run([nnscope_program(), "run", str(MODEL_FIXTURES / "face_landmark.tflite"),
                           "--feature-level", "28", "--executions", "3", "--warmup", "1",
                           "--no-summary", "--trace", str(trace), "--html", str(page), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return DelegateRun(trace, page, json.loads(done.stdout)["delegation"])


@pytest.fixture(scope="session")
def nnscope_run(tmp_path_factory) -> NnscopeRun:
    out = tmp_path_factory.mktemp("nnscope-run")
    trace, dot = out / "run.json", out / "plan.dot"
    perfetto, systrace = out / "run.pftrace", out / "run.html"
    nnscope = Path(sys.executable).with_name("nnscope")  # the console script of this install
    nnscope = nnscope if nnscope.exists() else Path(shutil.which("nnscope") or "nnscope")
    done = subprocess.run([str(nnscope), "run", "--trace", str(trace),
                           "--perfetto", str(perfetto), "--systrace", str(systrace),
                           "--dot", str(dot), "--executions", str(EXECUTIONS),
                           "--warmup", str(WARMUP), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **cpu_kernel_drivers_env()})
    assert done.returncode == 0, done.stderr
    plan = parse_plan(_plan_lines(done.stderr))  # with --json, stdout is the JSON alone
    latencies = json.loads(done.stdout)
    return NnscopeRun(trace, perfetto, systrace, dot, plan, latencies)
