"""Start-up: ``parse_systrace`` on a plain systrace/ftrace file imports no module it does not
need (each costs start-up time); content a plugin reads still loads the plugins.

Each case runs in a fresh interpreter: pytest itself has imported most of these modules.
"""
import gzip
import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import GEN_SYSTRACE, REPO, SYSTRACE_FIXTURES

OMR1 = SYSTRACE_FIXTURES / "omr1.html"
PLUGINS = tuple(f"nnscope.parse_systrace.readers.{name}"
                for name in ("chrome_json", "perfetto", "_gzip"))
UNNEEDED = ("typing", "decimal", "heapq", "gzip", "signal", "threading", "shutil") + PLUGINS
MAIN = """import sys
from nnscope.parse_systrace.__main__ import main
status = main(sys.argv[1:])
print(status, [name for name in {names!r} if name in sys.modules], file=sys.stderr)"""
FORMAT = """import sys
from nnscope.parse_systrace.readers import open_rows
print(open_rows(sys.argv[1]).format)"""


def run(code: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, check=True)


def summarise(path) -> tuple:
    """``(stdout, exit status, the modules of UNNEEDED imported)`` of ``parse_systrace path``."""
    done = run(MAIN.format(names=UNNEEDED), path)
    status, modules = done.stderr.splitlines()[-1].split(" ", 1)
    return done.stdout, int(status), modules


@pytest.mark.parametrize("name", ["omr1.html", "synthetic/driver-plain.txt"])
def test_a_plain_trace_imports_no_module_it_does_not_need(name):
    path = SYSTRACE_FIXTURES / name
    stdout, status, modules = summarise(path)
    assert (stdout, status, modules) == (path.with_suffix(".default.txt").read_text(), 0, "[]")


@pytest.mark.parametrize("recorded", ["", "trace-data.html"], ids=["unnamed", "named"])
def test_a_gzipped_trace_loads_the_plugins_and_reads_like_the_plain_one(recorded, tmp_path):
    """``recorded``: the file name in the gzip header; "trace-data" in the raw bytes is what
    the systrace sniffer looks for."""
    path = tmp_path / "trace.gz"
    with open(path, "wb") as raw, gzip.GzipFile(recorded, "wb", fileobj=raw) as handle:
        handle.write(OMR1.read_bytes())
    stdout, status, modules = summarise(path)
    assert (stdout, status) == summarise(OMR1)[:2]
    assert "nnscope.parse_systrace.readers._gzip" in modules


def test_json_holding_ftrace_text_is_chrome_json_though_the_plugins_are_not_loaded(tmp_path):
    text = "# tracer: nop\n  app-12 (12) [000] ...1 5.000001: tracing_mark_write: B|12|[NN_LA_PO]x\n"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [], "systemTraceEvents": text}))
    assert run(FORMAT, path).stdout == "chrome_json\n"


SPLIT = """import os, sys
from nnscope.parse_systrace import _parallel
_parallel.MIN_BYTES = 0
forks = []
fork = os.fork
os.fork = lambda: forks.append(1) or fork()
""" + MAIN + """
print(len(forks), file=sys.stderr)"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one usable CPU: no split")
def test_a_split_run_imports_no_module_it_does_not_need(tmp_path):
    """The two-process run counts threads without importing ``threading``."""
    path = tmp_path / "mixed.html"
    subprocess.run([sys.executable, str(GEN_SYSTRACE), "--seed", "5", "--scenario", "mixed",
                    "--runs", "6", "--execs", "4", "-o", str(path)], check=True)
    serial = subprocess.run([sys.executable, "-m", "nnscope.parse_systrace", str(path)],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout
    done = run(SPLIT.format(names=UNNEEDED), path)
    status_modules, forks = done.stderr.splitlines()[-2:]
    assert (done.stdout, status_modules, int(forks) > 0) == (serial, "0 []", True)


@pytest.mark.parametrize("columns", [None, "50", "200", "x"])
def test_the_help_wraps_as_argparse_would(columns, monkeypatch):
    """The formatter sized without shutil wraps the help as argparse's own does."""
    import argparse  # noqa: PLC0415

    from nnscope.parse_systrace.__main__ import build_parser  # noqa: PLC0415
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    ours = build_parser()
    theirs = build_parser()
    theirs.formatter_class = argparse.RawDescriptionHelpFormatter
    assert ours.format_help() == theirs.format_help()
    assert ours.formatter_class is not theirs.formatter_class
