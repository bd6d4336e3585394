"""Generated traces (gen_systrace.py): formats agree, incomplete traces fail cleanly."""
from __future__ import annotations

import subprocess
import sys

import pytest

from nnscope.parse_systrace.__main__ import main
from nnscope.parse_systrace.readers.systrace import CHUNK
from tests.support.paths import GEN_SYSTRACE


def _generate(tmp_path, seed, scenario="mixed", fmt="html", *extra):
    out = tmp_path / f"{seed}-{scenario}.{fmt}"
    subprocess.run([sys.executable, str(GEN_SYSTRACE), "--seed", str(seed), "--scenario",
                    scenario, "--format", fmt, "--runs", "2", "--execs", "5", *extra,
                    "-o", str(out)], check=True)
    return out


def _run(args, capsys):
    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("seed, scenario", [(101, "mixed"), (202, "driver"), (303, "cpu")])
def test_html_text_and_oldtext_give_identical_summaries(tmp_path, capsys, seed, scenario):
    outputs = set()
    for fmt in ("html", "text", "oldtext"):
        status, out, err = _run(["--json", _generate(tmp_path, seed, scenario, fmt)], capsys)
        assert status == 0 and err == ""
        outputs.add(out)
    assert len(outputs) == 1
    assert out.count('"starting_mark": "B|') == 2


def test_every_run_is_printed_with_its_starting_mark(tmp_path, capsys):
    status, out, _ = _run([_generate(tmp_path, 7)], capsys)
    marks = [line for line in out.splitlines() if line.startswith("B|")]
    assert status == 0 and len(marks) == 2
    assert all("[NN_LA_PO]" in mark for mark in marks)


def test_trace_starting_mid_call_is_a_one_line_error(tmp_path, capsys):
    trace = _generate(tmp_path, 8, "mixed", "html", "--incomplete")
    status, out, err = _run([trace], capsys)
    assert status == 2
    assert err.count("\n") == 1
    assert err.startswith(f"parse_systrace: error: {trace}:line ")
    assert "E mark without a matching B" in err


def test_tolerant_drops_orphans_and_still_prints(tmp_path, capsys):
    status, out, err = _run(["--tolerant", _generate(tmp_path, 8, "mixed", "html",
                                                      "--incomplete")], capsys)
    assert status == 0
    assert "NNAPI timing summary" in out
    assert "--tolerant dropped" in err and "orphan rows" in err


def test_python_dash_m_entry_point(tmp_path):
    trace = _generate(tmp_path, 9)
    done = subprocess.run([sys.executable, "-m", "nnscope.parse_systrace", "--per-execution",
                           str(trace)], capture_output=True, text=True)
    assert done.returncode == 0 and "Percentage" in done.stdout and done.stderr == ""


def test_headerless_ftrace_text_larger_than_a_read_block_reads_from_line_one(tmp_path, capsys):
    trace = tmp_path / "big.txt"
    subprocess.run([sys.executable, str(GEN_SYSTRACE), "--seed", "12", "--scenario", "cpu",
                    "--format", "text", "--runs", "4", "--execs", "400", "-o", str(trace)], check=True)
    headerless = tmp_path / "headerless.txt"
    with open(trace, "rb") as source:
        headerless.write_bytes(b"".join(line for line in source if not line.startswith(b"#")))
    assert headerless.stat().st_size > CHUNK
    expected = _run(["--json", trace], capsys)
    assert _run(["--json", headerless], capsys) == expected
    assert expected[0] == 0 and expected[1].count('"starting_mark": "B|') == 4


def test_a_half_trace_exits_3_unless_partial_traces_are_accepted(tmp_path, capsys):
    """Issue 37: a half systrace exited 0 after "Incomplete trace". It still prints the complete
    runs as the established tool does, and exits 3; ``--partial`` accepts it (exit 0)."""
    lines = _generate(tmp_path, 7).read_bytes().splitlines(keepends=True)
    half = tmp_path / "half.html"
    half.write_bytes(b"".join(lines[:len(lines) * 3 // 4]))
    status, out, err = _run([str(half)], capsys)
    assert status == 3 and "Incomplete trace, not able to print all statistics" in err
    assert out.count("NNAPI timing summary") == 1  # the complete run
    assert _run(["--partial", str(half)], capsys) == (0, out, err)
    whole = _run([str(_generate(tmp_path, 7))], capsys)
    assert whole[0] == 0 and "Incomplete" not in whole[2]


def test_help_documents_the_exit_statuses_and_partial(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--partial" in text and "3 the trace is partial" in text
