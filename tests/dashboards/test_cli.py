"""``python -m nnscope.dashboards``: output paths, renderer choice, and one-line errors (exit 2)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from nnscope.dashboards.__main__ import main
from nnscope.dashboards.bench import SCHEMA
from tests.support.paths import REPO, SYSTRACE_FIXTURES

SYNTHETIC = SYSTRACE_FIXTURES / "synthetic" / "cpu.html"


def test_default_output_is_beside_the_trace(tmp_path, capsys):
    trace = tmp_path / "cpu.html"
    shutil.copy(SYNTHETIC, trace)
    assert main([str(trace)]) == 0
    out = tmp_path / "cpu.html.report.html"
    assert capsys.readouterr().out.strip() == str(out)
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_json_on_stdout_and_by_extension(tmp_path, capsys):
    assert main(["--json", str(SYNTHETIC)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["meta"]["runs"] == 2 and len(data["summary"]) == 2
    assert main([str(SYNTHETIC), "-o", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text()) == data


@pytest.mark.parametrize("content, reason", [
    (None, "cannot open"),
    (b"", "empty trace file"),
    (b"hello, not a trace\n" * 3, "unrecognised trace format"),
    (b"# tracer: nop\n" + b"".join(
        b"  app-5 (5) [000] ...1 1.%d00000: tracing_mark_write: %s\n" % (i, mark)
        for i, mark in enumerate((b"B|5|[NN_LA_PO]m", b"E|5", b"E|5"))),
     "line 4: E mark without a matching B"),
], ids=["missing", "empty", "unknown-format", "orphan-end"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, content, reason):
    trace = tmp_path / "bad.trace"
    if content is not None:
        trace.write_bytes(content)
    assert main([str(trace), "-o", str(tmp_path / "out.html")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nnscope-dashboard: error: {trace}:")
    assert reason in lines[0] and captured.out == ""
    assert not (tmp_path / "out.html").exists()


def test_unwritable_output_is_one_line(tmp_path, capsys):
    assert main([str(SYNTHETIC), "-o", str(tmp_path / "no" / "such" / "dir.html")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nnscope-dashboard: error: cannot write")


def test_module_entry_point_has_no_traceback(tmp_path):
    trace = tmp_path / "garbage.bin"
    trace.write_bytes(b"\x00\x01\x02 not a trace")
    result = subprocess.run([sys.executable, "-m", "nnscope.dashboards", str(trace)], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize("graph, reason", [
    (None, "no such file"),
    (b"hello, not a graph\n", "not a Graphviz digraph (write one with `nnscope run --dot plan.dot`)"),
    (b"\xff\xfe\x00binary", "cannot read"),
], ids=["missing", "not-dot", "binary"])
def test_a_graph_that_is_not_a_dot_file_is_one_line_and_exit_2(tmp_path, capsys, graph, reason):
    path = tmp_path / "plan.dot"
    if graph is not None:
        path.write_bytes(graph)
    assert main([str(SYNTHETIC), "--graph", str(path), "-o", str(tmp_path / "out.html")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nnscope-dashboard: error: --graph {path}: {reason}")
    assert captured.out == "" and not (tmp_path / "out.html").exists()


def test_a_bench_report_takes_no_graph(tmp_path, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"schema": SCHEMA, "version": 1, "results": [], "stress": []}))
    graph = tmp_path / "plan.dot"
    graph.write_text("digraph g { a -> b }\n")
    assert main([str(bench), "--graph", str(graph), "-o", str(tmp_path / "out.html")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "--graph: a bench report has no partition graph" in lines[0], lines


def _half(tmp_path, fraction: float = 0.75):
    """The first ``fraction`` of the synthetic two-run trace: one run complete, one cut off."""
    lines = SYNTHETIC.read_bytes().splitlines(keepends=True)
    trace = tmp_path / "half.html"
    trace.write_bytes(b"".join(lines[:int(len(lines) * fraction)]))
    return trace


def test_a_half_trace_gets_a_page_marked_partial_and_exit_3(tmp_path, capsys):
    """Issue 37: a half systrace built a page, exit 0, after parse_systrace's "Incomplete
    trace". The page is written and says at the top that it is partial and what it covers; the
    command exits 3 with one line, unless ``--partial`` accepts partial traces."""
    page = tmp_path / "half.report.html"
    assert main([str(_half(tmp_path)), "-o", str(page)]) == 3
    captured = capsys.readouterr()
    assert captured.out.strip() == str(page)
    [line] = captured.err.splitlines()
    assert line.startswith("nnscope-dashboard: ") and "partial trace: 1 run cut off" in line
    assert "--partial" in line
    html = page.read_text()
    banner = html.split('<p class="partial" data-partial role="alert">', 1)[1].split("</p>", 1)[0]
    assert banner == ("<b>Partial trace:</b> 1 run of 2 was cut off (a thread was still inside an "
                      "NNAPI scope when the trace ended) and left out of the timing tables; every "
                      "timing figure covers the 1 complete run only.")
    assert main([str(_half(tmp_path)), "--partial", "-o", str(page)]) == 0
    assert capsys.readouterr().err == "" and html == page.read_text()


def test_a_trace_with_no_complete_run_says_the_page_has_no_figures(tmp_path, capsys):
    assert main([str(_half(tmp_path, 0.5)), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["meta"]["incomplete_runs"] == 1
    page = tmp_path / "p.html"
    assert main([str(_half(tmp_path, 0.5)), "--partial", "-o", str(page)]) == 0
    assert "no run is complete, so the page has no timing tables." in page.read_text()


def test_a_complete_trace_has_no_partial_banner(tmp_path, capsys):
    page = tmp_path / "whole.html"
    assert main([str(SYNTHETIC), "-o", str(page)]) == 0
    assert "data-partial" not in page.read_text() and capsys.readouterr().err == ""
