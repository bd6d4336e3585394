"""Every format we read gives the same summary as the systrace it was converted from.

Each fixture is read through the systrace/ftrace reader, converted by
:mod:`tests.support.trace_convert` into Chrome JSON (B/E, X, bare list,
systemTraceEvents), Perfetto (ftrace print events with a process tree, track events with
interned names) and gzip forms, and the CLI's default-mode output (stdout, stderr, exit
status) must be identical to the original's.
"""
import functools

import pytest

from tests.support import trace_convert
from tests.support.paths import SYSTRACE_FIXTURES

FIXTURES = ["omr1.html", "omr1_incomplete.html", "synthetic/cpu.html",
            "synthetic/driver.html", "synthetic/mixed.html", "synthetic/driver-plain.txt",
            "synthetic/mixed-old.txt"]


@functools.lru_cache(maxsize=None)
def original(fixture: str) -> tuple:
    path = SYSTRACE_FIXTURES / fixture
    return trace_convert.read_rows(path), trace_convert.run_main([str(path)])


@pytest.mark.parametrize("converter", sorted(trace_convert.CONVERTERS))
@pytest.mark.parametrize("fixture", FIXTURES)
def test_converted_trace_gives_the_same_summary(fixture, converter, tmp_path):
    rows, expected = original(fixture)
    path = tmp_path / "converted.trace"
    path.write_bytes(trace_convert.CONVERTERS[converter](rows))
    status, stdout, stderr = trace_convert.run_main([str(path)])
    assert (status, stdout) == expected[:2]
    assert stderr.replace(str(path), "FILE") == expected[2].replace(
        str(SYSTRACE_FIXTURES / fixture), "FILE")


@pytest.mark.parametrize("fixture", [f for f in FIXTURES if "incomplete" not in f])
def test_trace_written_by_our_perfetto_exporter_gives_the_same_summary(fixture, tmp_path):
    rows, expected = original(fixture)
    path = tmp_path / "exported.pftrace"
    path.write_bytes(trace_convert.perfetto_exporter(rows))
    assert trace_convert.run_main([str(path)])[:2] == expected[:2]


def test_originals_match_their_golden_summaries():
    for fixture in FIXTURES:
        golden = SYSTRACE_FIXTURES / fixture.replace(".html", ".default.txt").replace(
            "-plain.txt", "-plain.default.txt").replace("-old.txt", "-old.default.txt")
        status, stdout, stderr = original(fixture)[1]
        assert status == (3 if "Incomplete trace" in stderr else 0), fixture  # 3: a partial trace
        assert stdout == golden.read_text(), fixture
