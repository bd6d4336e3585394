"""Start-up: ``parse_systrace`` on a plain systrace/ftrace file imports no module it does not
need (each costs start-up time); content a plugin reads still loads the plugins.

Each case runs in a fresh interpreter: pytest itself has imported most of these modules.
"""
import gzip
import json
import subprocess
import sys

import pytest

from tests.support.paths import REPO, SYSTRACE_FIXTURES

OMR1 = SYSTRACE_FIXTURES / "omr1.html"
PLUGINS = tuple(f"nnscope.parse_systrace.readers.{name}"
                for name in ("chrome_json", "perfetto", "_gzip"))
UNNEEDED = ("typing", "decimal", "heapq", "gzip", "signal", "threading") + PLUGINS
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
