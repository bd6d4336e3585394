"""Every output file of ``nnscope run`` and ``nnscope bench`` is checked before the run, and a
file that still cannot be written after it loses nothing (issue 37): the report is printed, the
content goes to a temporary file named in one error line, and the exit status is 1."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

RUN_FLAGS = {"--trace": "t.json", "--systrace": "t.html", "--perfetto": "t.perfetto-trace",
             "--dot": "p.dot", "--svg": "p.svg", "--outputs": "y.npz"}
BENCH = ["bench", "tiny_add", "--device", "nnapi-reference", "--executions", "2", "--warmup", "0"]


def _nnscope(*args):
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=600)


@pytest.mark.parametrize("flag", sorted(RUN_FLAGS))
def test_run_checks_each_output_path_before_the_run(tmp_path, flag):
    path = tmp_path / "missing" / RUN_FLAGS[flag]
    done = _nnscope("run", "--executions", "1", flag, path)
    assert done.returncode == 1
    assert done.stdout == ""  # no plan line: nothing ran
    assert done.stderr == (f"nnscope: error: {flag} {path}: cannot write there: no directory "
                           f"{path.parent} (nothing was run)\n")


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_bench_checks_its_output_paths_before_the_run(tmp_path, flag):
    done = _nnscope(*BENCH, flag, tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"nnscope: error: {flag} {tmp_path}: cannot write there: it is a directory (nothing was run)\n"


@pytest.mark.parametrize("flag", ["--trace", "--systrace", "--perfetto"])
def test_a_trace_never_replaces_a_device_or_a_fifo(tmp_path, flag):
    """The trace exporters write beside the path and move the file into place: over a FIFO (or,
    as root, /dev/null) that would replace the special file itself."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    done = _nnscope("run", "--executions", "1", flag, fifo)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"nnscope: error: {flag} {fifo}: cannot write there: not a regular file")
    assert not fifo.is_file()


def test_two_flags_that_write_one_file_are_a_usage_error(tmp_path):
    done = _nnscope("run", "--trace", tmp_path / "t.json", "--systrace", tmp_path / "t.json")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"nnscope run: error: --trace and --systrace both write {tmp_path / 't.json'}"


def _fallback(line: str, path: str) -> Path:
    """The temporary file an error line names, after checking the line's form."""
    prefix = f"nnscope: error: cannot write {path} (No space left on device); wrote "
    assert line.startswith(prefix) and line.endswith(" instead"), line
    return Path(line[len(prefix):-len(" instead")])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device that is always full)")
def test_a_write_that_fails_after_the_run_keeps_the_report_and_the_file(tmp_path):
    """/dev/full passes the check (a device is taken as it is) and then fails every write."""
    trace = tmp_path / "t.json"
    done = _nnscope("run", "--executions", "2", "--no-summary", "--dot", "/dev/full", "--trace", trace)
    assert done.returncode == 1
    assert "latency over 2 executions" in done.stdout and f"wrote {trace}" in done.stdout
    (line,) = done.stderr.splitlines()
    kept = _fallback(line, "/dev/full")
    try:
        assert kept.read_text().startswith("digraph") and trace.stat().st_size > 0
    finally:
        kept.unlink()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device that is always full)")
def test_bench_json_that_fails_after_the_run_keeps_the_results():
    done = _nnscope(*BENCH, "--json", "/dev/full")
    assert done.returncode == 1 and "tiny_add" in done.stdout
    (line,) = done.stderr.splitlines()
    kept = _fallback(line, "/dev/full")
    try:
        assert '"schema"' in kept.read_text()
    finally:
        kept.unlink()
