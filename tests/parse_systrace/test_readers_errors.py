"""Bad input of every kind: the real CLI prints one clear line, exits non-zero, no traceback."""
import gzip
import random
import subprocess
import sys

import pytest

from tests.support import trace_convert
from nnscope.parse_systrace._engine import NO_RUNTIME
from tests.support.paths import REPO, SYSTRACE_FIXTURES

ROWS = [(5.000001, 12, 12, "[NN_LA_PO]x", 2), (5.000002, 12, 12, None, 3)]
TRACK = trace_convert.perfetto_track_events(ROWS)
FTRACE = trace_convert.ftrace_text(ROWS).encode()


def _corrupt_protobuf() -> bytes:
    data = bytearray(TRACK)
    data[-3] = 0x0B  # a wire type 3 tag inside the last packet
    return bytes(data)


BAD_INPUTS = {
    "empty": (b"", "empty"),
    "unknown format": (b"hello, world\nthis is not a trace\n", "unrecognised trace format"),
    "binary garbage": (b"\x00" + random.Random(7).randbytes(4000), "unrecognised trace format"),
    "gzip garbage": (gzip.compress(b"\x00\x01\x02"), "unrecognised trace format"),
    "truncated gzip": (trace_convert.gzipped(FTRACE)[:-6], "truncated gzip data"),
    "truncated protobuf": (TRACK[:-5], "truncated protobuf"),
    "corrupt protobuf": (_corrupt_protobuf(), "corrupt TracePacket"),
    "malformed JSON": (b'{"traceEvents": [{"ph": "B",', "malformed JSON"),
    "JSON scalar": (b'"just a string"', "unrecognised trace format"),
    "JSON list of numbers": (b"[42]", "event 1: event is not an object"),
    "JSON wrong keys": (b'{"events": []}', "neither traceEvents nor systemTraceEvents"),
    "traceEvents not a list": (b'{"traceEvents": 3}', "traceEvents is not a list"),
    "event missing ts": (b'[{"ph": "B", "name": "a", "pid": 1, "tid": 1}]', "'ts'"),
    "event string pid": (b'[{"ph": "E", "ts": 1, "pid": "1", "tid": 1}]', "'pid'"),
    "event bad dur": (b'[{"ph": "X", "name": "a", "ts": 1, "dur": "5", "pid": 1, "tid": 1}]',
                      "'dur'"),
    "HTML page without trace data": (b"<!DOCTYPE html>\n<html><head><title>x</title></head>"
                                     b"<body><p>no trace here</p></body></html>\n",
                                     "unrecognised trace format: an HTML page with no systrace"),
    "gzip HTML page without trace data": (gzip.compress(b"<html><body>tracing_mark_write"
                                                        b"</body></html>\n"),
                                          "unrecognised trace format: an HTML page"),
    "bad ftrace in JSON": (b'{"systemTraceEvents": "a-1 (1) [0] ...1 x: '
                           b'tracing_mark_write: B|1|[NN_LA_PO]m"}', "cannot parse trace row"),
}


def run_cli(path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnscope.parse_systrace", *flags, str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def assert_one_line_error(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_gives_one_line_error_and_non_zero_exit(case, tmp_path):
    data, message = BAD_INPUTS[case]
    path = tmp_path / "trace"
    path.write_bytes(data)
    assert_one_line_error(run_cli(path), message)


def test_missing_file(tmp_path):
    assert_one_line_error(run_cli(tmp_path / "nope.html"), "No such file")


def test_directory_instead_of_a_file(tmp_path):
    assert_one_line_error(run_cli(tmp_path), "")


@pytest.mark.parametrize("flags", [(), ("--json",), ("--per-execution", "--total-times")])
def test_an_html_page_without_trace_data_is_an_unknown_format_in_every_mode(tmp_path, flags):
    path = tmp_path / "page.html"
    path.write_text("<!DOCTYPE html>\n<html><body>" + "<p>text</p>\n" * 50_000 + "</body></html>\n")
    result = run_cli(path, *flags)
    assert result.returncode == 2
    assert_one_line_error(result, "page.html:file: unrecognised trace format")


def _without_nnapi_marks(html: bytes) -> bytes:
    lines = html.splitlines(keepends=True)
    return b"".join(line for line in lines if b"[NN" not in line and b"HIDL::" not in line)


@pytest.mark.parametrize("suffix", [".html", ".html.gz"])
def test_a_real_trace_without_nnapi_marks_keeps_the_established_output(tmp_path, suffix):
    """Section 2 of the semantics: no ``NN_LR`` mark warns on stderr and goes on, so the
    summary is the empty table of a run with no starting mark."""
    original = (SYSTRACE_FIXTURES / "omr1.html").read_bytes()
    stripped = _without_nnapi_marks(original)
    assert b"tracing_mark_write: B|" in stripped and b"[NN" not in stripped  # still a trace
    path = tmp_path / f"plain{suffix}"
    path.write_bytes(gzip.compress(stripped) if suffix.endswith(".gz") else stripped)
    result = run_cli(path)
    assert (result.returncode, result.stderr) == (0, NO_RUNTIME)
    lines = result.stdout.splitlines()
    assert lines[:2] == ["", ""] and lines[3].startswith("NNAPI timing summary (self-times")
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.strip()}
    assert rows["Application"] == ["n/a"] * 8 + ["n/a*"]
    assert rows["Runtime"] == rows["IPC"] == ["-"] * 9 and "CPU" not in rows
    header_only = tmp_path / "header-only.txt"
    header_only.write_bytes(b"# tracer: nop\n#           TASK-PID    TGID   CPU#  ||||    "
                            b"TIMESTAMP  FUNCTION\n")
    assert run_cli(header_only).stdout == result.stdout
