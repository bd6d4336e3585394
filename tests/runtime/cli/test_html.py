"""``nnscope run --html`` (issue 37, "one step to a picture"): the run's dashboard page, the
very page ``nnscope-dashboard TRACE --graph PLAN -o FILE`` writes of the same run."""
from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _run(*args, cwd):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_run_html_writes_the_page_the_dashboard_writes_of_its_trace_and_plan(tmp_path):
    done = _run("nnscope.runtime", "run", "--device", "nnapi-reference", "--executions", "2",
                "--warmup", "1", "--no-summary", "--html", "r.html", "--trace", "r.json",
                "--dot", "r.dot", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "wrote r.html" in done.stdout.splitlines()
    made = _run("nnscope.dashboards", "r.json", "--graph", "r.dot", "-o", "again.html", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>NNAPI timing · r.json</title>" in page
    assert page == (tmp_path / "again.html").read_text()


def test_run_html_to_a_path_that_cannot_be_written_fails_before_the_run(tmp_path):
    done = _run("nnscope.runtime", "run", "--device", "nnapi-reference", "--html",
                str(tmp_path / "no" / "r.html"), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().endswith("(nothing was run)") and "--html" in done.stderr
    assert "latency" not in done.stdout
