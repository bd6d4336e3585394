"""``nnscope run --html FILE``: the dashboard page of the run, one step from the run to a picture.

The page is the one ``nnscope-dashboard trace.json --graph plan.dot -o FILE`` writes (timeline,
per-operation profile, latency, partition graph, timing summary), made by that very command:
the run's trace (Chrome JSON) and plan (Graphviz dot) go to a temporary directory, and
``python -m nnscope.dashboards`` (the installed CLI module, in this interpreter) renders them.
A subprocess, not an import: in the package map (STYLE.md) the runtime sits below
``parse_systrace`` and ``dashboards``, which read what the runtime writes, so ``runtime`` may
not import them, and the page's entry point cannot move into the runtime without taking
parse_systrace with it.

Example:
    $ nnscope run --device sample-all --executions 20 --html report.html
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Callable

from nnscope import tracing
from nnscope.tracing.exporters import ExportResult

#: The dashboards' CLI module (``nnscope-dashboard``).
DASHBOARD_MODULE = "nnscope.dashboards"


def writer(session: tracing.TraceSession, write_dot: Callable[[str], object]) -> Callable[[str], None]:
    """A writer of the run's page for ``_output_files.write``: ``write_dot(path)`` writes the plan.

    The writer raises OSError with the dashboard's own one-line error when it fails."""
    def write(path: str) -> None:
        with tempfile.TemporaryDirectory(prefix="nnscope-html-") as folder:
            stem = os.path.splitext(os.path.basename(path))[0] or "trace"  # the page's title
            trace, plan = os.path.join(folder, f"{stem}.json"), os.path.join(folder, f"{stem}.dot")
            if session.export(trace) != ExportResult.SUCCESS:
                raise OSError("the trace exporter failed (see the log line above)")
            write_dot(plan)
            done = subprocess.run([sys.executable, "-m", DASHBOARD_MODULE, trace, "--graph", plan,
                                   "-o", path], capture_output=True, text=True)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
                raise OSError(f"the dashboard failed: {lines[-1]}")
    return write
