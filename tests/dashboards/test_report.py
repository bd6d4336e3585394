"""The page's embedded data: parse_systrace's JSON summary verbatim, tables as the goldens.

Every ``NAME.<flags>.txt`` golden of the table variants under the shared fixtures is a
case; the view model embedded in the page must show the same cells, row for row.
"""
from __future__ import annotations

import json

import pytest

from nnscope import dashboards
from nnscope import parse_systrace
from nnscope.dashboards.renderers.html import script_json
from tests.dashboards.pages import GOLDEN_KINDS, golden_tables, json_block, view_rows
from tests.support.paths import SYSTRACE_FIXTURES
from tests.support.trace_convert import chrome_json, gzipped, read_rows

OMR1 = SYSTRACE_FIXTURES / "omr1.html"
SYNTHETIC = SYSTRACE_FIXTURES / "synthetic" / "cpu.html"
VIEW_KEYS = {"all": "tables", "per-execution": "per_execution"}


def _trace_of(golden):
    name = golden.name.partition(".")[0]
    return next(path for path in (golden.with_name(name + ".html"),
                                  golden.with_name(name + ".txt")) if path.exists())


def _cases() -> list:
    cases = []
    for golden in sorted(SYSTRACE_FIXTURES.rglob("*.txt")):
        flags = golden.name.partition(".")[2][:-len(".txt")]
        if flags in GOLDEN_KINDS:
            cases.append(pytest.param(_trace_of(golden), golden, flags,
                                      id=f"{golden.parent.name}/{golden.name}"))
    return cases


@pytest.fixture(scope="module")
def pages():
    cache = {}
    return lambda trace: cache.setdefault(trace, dashboards.render_report(trace))


@pytest.mark.parametrize("trace", [OMR1, SYNTHETIC], ids=["omr1", "synthetic-cpu"])
def test_embedded_summary_is_parse_systrace_json(trace, pages):
    expected = parse_systrace.render_json(parse_systrace.summarize(trace))
    page = pages(trace)
    assert json_block(page, "nnscope-summary") == json.loads(expected)
    assert script_json(expected) in page  # the very text, only "<" escaped


def test_cases_cover_omr1_and_synthetic():
    ids = [case.id for case in _cases()]
    assert "systrace/omr1.default.txt" in ids and "systrace/omr1.total-times.txt" in ids
    assert "synthetic/cpu.per-execution.txt" in ids and len(ids) >= 20
    assert "systrace/omr1_incomplete.default.txt" in ids


@pytest.mark.parametrize("trace, golden, flags", _cases())
def test_tables_match_golden_text(trace, golden, flags, pages):
    kind, mode = GOLDEN_KINDS[flags]
    view = json_block(pages(trace), "nnscope-view")
    shown = [view_rows(run[VIEW_KEYS[kind]][mode]) for run in view["runs"]]
    assert shown == golden_tables(golden.read_text())


def test_header_facts_and_warmup_benchmark(pages):
    view = json_block(pages(SYNTHETIC), "nnscope-view")
    meta = view["meta"]
    assert (meta["file"], meta["format"], meta["runs"]) == ("cpu.html", "systrace", 2)
    assert meta["spans"] == meta["nn_spans"] == 486 and meta["marks"] == 972
    run = view["runs"][0]
    assert run["both"] and run["counts"] == {"PBM": 6, "PO": 0, "PWU": 1}
    rows = dict(view_rows(run["warmup_benchmark"]["self"]))
    summary = json_block(pages(SYNTHETIC), "nnscope-summary")[0]
    benchmark_pe = summary["self_times"]["PBM"]["PE"]["LT"]
    assert rows["Total"][8] == f"{benchmark_pe:.2f}"
    assert rows["Total"][9] == f"{benchmark_pe / 6:.2f}" == run["ms_per_execution"]


def test_page_is_self_contained(pages):
    page = pages(OMR1)
    assert "<style>" in page and "data-rendered" in page
    for needle in ("src=", "href=", "@import", "url(", "https://"):
        assert needle not in page
    assert page.count("http://") == page.count("http://www.w3.org/2000/svg")


def _ftrace(tmp_path, marks) -> str:
    lines = ["# tracer: nop"]
    for tgid, ts, mark in marks:
        lines.append(f"  app-{tgid} ({tgid}) [000] ...1 {ts:.6f}: tracing_mark_write: {mark}")
    path = tmp_path / "two-clients.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_merged_client_processes_are_noted(tmp_path):
    marks = []
    for tgid, start in ((100, 1.0), (200, 3.0)):
        marks += [(tgid, start, f"B|{tgid}|[NN_LA_PO]m{tgid}"),
                  (tgid, start + 0.1, f"B|{tgid}|[NN_LR_PC]c"),
                  (tgid, start + 0.2, f"E|{tgid}"), (tgid, start + 0.5, f"E|{tgid}")]
    page = dashboards.render_report(_ftrace(tmp_path, marks))
    meta = json_block(page, "nnscope-view")["meta"]
    assert meta["format"] == "ftrace" and meta["processes"] == 2
    assert any("merges 2 client processes" in note for note in meta["notes"])
    assert "merges 2 client processes" in page.split("<main")[0]


def test_json_renderer_and_write_report(tmp_path):
    out = dashboards.write_report(SYNTHETIC, tmp_path / "r.json", renderer="json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert out.endswith("r.json") and data["meta"]["runs"] == 2
    assert data["summary"] == json.loads(parse_systrace.render_json(
        parse_systrace.summarize(SYNTHETIC)))


def test_other_formats_give_the_same_summary(tmp_path, pages):
    trace = tmp_path / "cpu.trace.json.gz"
    trace.write_bytes(gzipped(chrome_json(read_rows(SYNTHETIC))))
    page = dashboards.render_report(trace)
    assert json_block(page, "nnscope-view")["meta"]["format"] == "chrome_json"
    assert json_block(page, "nnscope-summary") == json_block(pages(SYNTHETIC), "nnscope-summary")


def test_trace_without_complete_runs_still_renders(tmp_path):
    page = dashboards.render_report(_ftrace(tmp_path, [(5, 1.0, "B|5|[NN_LR_PC]c")]))
    view = json_block(page, "nnscope-view")
    assert view["runs"] == [] and view["meta"]["incomplete_runs"] == 1
    assert json_block(page, "nnscope-summary") == []
    assert "1 incomplete, not shown" in page
