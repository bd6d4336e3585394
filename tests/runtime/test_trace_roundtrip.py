"""Every export of a real ``nnscope run`` reads back in ``parse_systrace`` with the run's summary.

The run prints parse_systrace's table of its own trace (exported as systrace text, so with
microsecond timestamps). The ``.html`` and ``.txt`` exports must give that very table; the
``.json`` and ``.perfetto-trace`` exports carry nanoseconds, so their cells may differ in the
last printed digit (and agree exactly with each other). Gzip forms read like their originals.
All through the real CLIs, in fresh processes (driver processes included on all devices).
"""
from __future__ import annotations

import functools
import gzip
import os
import re
import subprocess
import sys

import pytest

from tests.support.paths import REPO
from tests.support.programs import cpu_kernel_drivers_env

#: One unit of the last printed digit (cells are ``%.2f`` ms) is 0.01; a cell sums many spans,
#: each end truncated to the microsecond in the text export: allow a few units.
LAST_DIGIT = 0.05
_TABLE_END = "* This total ignores missing"


def _nnscope_run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "run", "--executions", "2",
                           "--warmup", "1", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "NNSCOPE_TRACE": "", **cpu_kernel_drivers_env()}, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@functools.lru_cache(maxsize=None)
def _parse_systrace(path) -> str:
    """The real CLI's output (once per file: every file of a run is its own path)."""
    done = subprocess.run([sys.executable, "-m", "nnscope.parse_systrace", str(path)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, f"{path.name}: {done.stderr}"
    return done.stdout


def _run_summary(stdout: str) -> str:
    """The table the run printed: from its starting mark to the footnote line."""
    lines = stdout.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("B|"))
    end = next(i for i, line in enumerate(lines) if line.startswith(_TABLE_END))
    return "".join(lines[start:end + 1])


def _gzipped(path):
    packed = path.with_name(path.name + ".gz")
    packed.write_bytes(gzip.compress(path.read_bytes()))
    return packed


def _cells(line: str) -> list:
    return [float(t.rstrip("*")) if re.fullmatch(r"-?\d+\.\d+\*?", t) else
            0.0 if t.rstrip("*") == "-" else t for t in line.split()]


def assert_same_but_last_digit(table: str, expected: str) -> None:
    """Same lines and words; numbers (``-`` is 0) within :data:`LAST_DIGIT`."""
    got, want = table.splitlines(), expected.splitlines()
    assert len(got) == len(want), table
    for line, reference in zip(got, want):
        cells, reference_cells = _cells(line), _cells(reference)
        assert len(cells) == len(reference_cells), (line, reference)
        for cell, reference_cell in zip(cells, reference_cells):
            if isinstance(reference_cell, float) and isinstance(cell, float):
                assert abs(cell - reference_cell) <= LAST_DIGIT, (line, reference)
            else:
                assert cell == reference_cell, (line, reference)


@pytest.fixture(scope="module", params=[("--device", "nnapi-reference"), ()],
                ids=["nnapi-reference", "all-devices"])
def exports(request, tmp_path_factory):
    """Two runs: one writes .json, .html and .perfetto-trace, the other .txt (``--trace``
    takes one file); each with its own printed summary."""
    out = tmp_path_factory.mktemp("roundtrip")
    paths = {"json": out / "run.json", "html": out / "run.html",
             "perfetto": out / "run.perfetto-trace", "txt": out / "run.txt"}
    first = _nnscope_run(*request.param, "--trace", str(paths["json"]), "--systrace",
                         str(paths["html"]), "--perfetto", str(paths["perfetto"]))
    second = _nnscope_run(*request.param, "--trace", str(paths["txt"]))
    summaries = {"json": first, "html": first, "perfetto": first, "txt": second}
    return paths, {key: _run_summary(text) for key, text in summaries.items()}


@pytest.mark.parametrize("kind", ["html", "txt"])
def test_text_exports_read_back_with_the_runs_own_summary(exports, kind):
    paths, summaries = exports
    assert _parse_systrace(paths[kind]) == summaries[kind]


@pytest.mark.parametrize("kind", ["json", "perfetto"])
def test_nanosecond_exports_read_back_with_the_runs_summary_but_the_last_digit(exports, kind):
    paths, summaries = exports
    table = _parse_systrace(paths[kind])
    assert_same_but_last_digit(table, summaries[kind])
    assert "[SW][NN_LC_PCO]" in paths[kind].read_bytes().decode("utf-8", "replace")


def test_json_and_perfetto_exports_agree_exactly(exports):
    paths, _ = exports
    assert _parse_systrace(paths["json"]) == _parse_systrace(paths["perfetto"])


@pytest.mark.parametrize("kind", ["json", "html", "perfetto", "txt"])
def test_gzip_forms_read_like_the_originals(exports, kind):
    paths, _ = exports
    assert _parse_systrace(_gzipped(paths[kind])) == _parse_systrace(paths[kind])


def test_the_tolerance_is_only_the_last_digit():
    table = "Runtime   1.25   -   n/a\n"
    assert_same_but_last_digit("Runtime   1.27   0.01   n/a\n", table)
    for wrong in ("Runtime   1.35   -   n/a\n", "Runtime   1.25   -   -\n", "Runtime   1.25\n"):
        with pytest.raises(AssertionError):
            assert_same_but_last_digit(wrong, table)


def _row(table: str, layer: str) -> list:
    return _cells(next(line for line in table.splitlines() if line.startswith(layer)))


def test_a_burst_run_reads_back_with_ipc_and_driver_execution_time(tmp_path):
    """``nnscope run --burst``: the FMQ exchange is IPC time, the listener thread's work is
    Driver time, and the export reads back with the run's own summary."""
    trace = tmp_path / "burst.json"
    stdout = _nnscope_run("--burst", "--trace", str(trace))
    table = _parse_systrace(trace)
    assert_same_but_last_digit(_run_summary(table), _run_summary(stdout))
    ipc, driver = _row(table, "IPC"), _row(table, "Driver")
    execution_total = 7  # the "Ex. total" column (layer name, six phases before it)
    assert ipc[execution_total] > 0 and driver[execution_total] > 0, table
