"""Golden diffs: our stdout (and stderr) must equal the established tool's, byte for byte.

Every ``NAME.<flags>.txt`` under the shared fixtures is one case; the trace is the
``NAME.html`` or ``NAME.txt`` beside it. Warnings do not depend on the flags, so a case
without its own ``.stderr`` file expects the trace's ``default.stderr`` (or nothing).
"""
from __future__ import annotations

import pytest

from nnscope.parse_systrace import iter_summaries
from nnscope.parse_systrace.__main__ import PARTIAL_EXIT, main
from nnscope.parse_systrace._engine import INCOMPLETE
from nnscope.parse_systrace.render import render_text
from tests.support.paths import SYSTRACE_FIXTURES

FLAGS = {
    "default": [],
    "total-times": ["--total-times"],
    "per-execution": ["--per-execution"],
    "total-times.per-execution": ["--total-times", "--per-execution"],
    "json": ["--json"],
    "per-execution.json": ["--per-execution", "--json"],
}


def _cases() -> list:
    cases = []
    for golden in sorted(SYSTRACE_FIXTURES.rglob("*.txt")):
        name, _, rest = golden.name.partition(".")
        flags = rest[:-len(".txt")]
        if flags not in FLAGS:
            continue  # a trace in text form, not a golden
        traces = [golden.with_name(name + ext) for ext in (".html", ".txt")]
        trace = next(path for path in traces if path.exists())
        cases.append(pytest.param(trace, golden, flags,
                                  id=f"{golden.parent.name}/{name}.{flags}"))
    return cases


CASES = _cases()


def test_fixtures_present():
    assert len(CASES) >= 33


def _expected_stderr(golden, flags) -> str:
    own = golden.with_name(golden.name[:-len(".txt")] + ".stderr")
    default = golden.with_name(golden.name.split(".")[0] + ".default.stderr")
    for path in (own, default):
        if path.exists():
            return path.read_text()
    return ""


@pytest.mark.parametrize("trace, golden, flags", CASES)
def test_golden(trace, golden, flags, capsys):
    status = main(FLAGS[flags] + [str(trace)])
    captured = capsys.readouterr()
    partial = INCOMPLETE in _expected_stderr(golden, flags)  # a run cut off: exit 3 (no --partial)
    assert status == (PARTIAL_EXIT if partial else 0)
    assert captured.out == golden.read_text()
    assert captured.err == _expected_stderr(golden, flags)


TEXT_FLAGS = ("per-execution", "default", "total-times.per-execution", "total-times")


@pytest.mark.parametrize("trace", sorted({case.values[0] for case in CASES}), ids=str)
def test_one_parse_renders_every_table(trace):
    """The tables of every flag set rendered one after the other from the same runs equal
    the goldens: rendering reads the runs, it never changes them (per execution, a
    warmup+benchmark run's Benchmark columns are swapped in on copies)."""
    runs = list(iter_summaries(str(trace)))
    for flags in TEXT_FLAGS:
        golden = trace.with_name(trace.stem + f".{flags}.txt")
        if not golden.exists():
            continue
        total, per_execution = "total-times" in flags, "per-execution" in flags
        assert "".join(render_text(run, total, per_execution) for run in runs) == \
            golden.read_text(), flags
