"""``nnscope run --html FILE``: the dashboard page of the run, one step from the run to a picture.

The page is the one ``nnscope-dashboard trace.json --graph plan.dot -o FILE`` writes (timeline,
per-operation profile, latency, partition graph, timing summary), made by that very command:
the run's trace (Chrome JSON) and plan (Graphviz dot) go to a temporary directory, and
``python -m nnscope.dashboards`` (the installed CLI module, in this interpreter) renders them.
A subprocess, not an import: in the package map (STYLE.md) the runtime sits below
``parse_systrace`` and ``dashboards``, which read what the runtime writes, so ``runtime`` may
not import them, and the page's entry point cannot move into the runtime without taking
parse_systrace with it.

A .tflite in delegate mode has no single plan: its page gets the run's delegation report
instead (``--delegation``, a JSON file beside the trace), shown as the page's Delegation section.

Example:
    $ nnscope run --device sample-all --executions 20 --html report.html
    $ nnscope run model.tflite --html report.html   # delegate mode: + the Delegation section
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Callable

from nnscope import tracing
from nnscope.tracing.exporters import ExportResult

#: The dashboards' CLI module (``nnscope-dashboard``).
DASHBOARD_MODULE = "nnscope.dashboards"


def writer(session: tracing.TraceSession, write_dot: Callable[[str], object] | None,
           delegation: dict | None = None) -> Callable[[str], None]:
    """A writer of the run's page for ``_output_files.write``: ``write_dot(path)`` writes the plan
    (None: no plan, as in delegate mode); ``delegation``: a delegate-mode run's delegation report.

    The writer raises OSError with the dashboard's own one-line error when it fails."""
    def write(path: str) -> None:
        with tempfile.TemporaryDirectory(prefix="nnscope-html-") as folder:
            stem = os.path.splitext(os.path.basename(path))[0] or "trace"  # the page's title
            trace = os.path.join(folder, f"{stem}.json")
            if session.export(trace) != ExportResult.SUCCESS:
                raise OSError("the trace exporter failed (see the log line above)")
            command = [sys.executable, "-m", DASHBOARD_MODULE, trace]
            if write_dot is not None:
                write_dot(os.path.join(folder, f"{stem}.dot"))
                command += ["--graph", os.path.join(folder, f"{stem}.dot")]
            if delegation is not None:
                command += ["--delegation", _dump(delegation, os.path.join(folder, "delegation.json"))]
            done = subprocess.run(command + ["-o", path], capture_output=True, text=True)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
                raise OSError(f"the dashboard failed: {lines[-1]}")
    return write


def _dump(data: dict, path: str) -> str:
    """Write ``data`` as JSON to ``path`` and return ``path``."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    return path
