"""The ``.html`` systrace export is the report page around the trace (dashboards.systrace_page).

The same recorded trace goes through the bare systrace HTML exporter and the page exporter:
parse_systrace's outputs (default, total times, per execution, JSON) are byte-identical, and
the rows AOSP's parser takes (``get_trace_part``: from the column header to the next line with
``</script>``) are the same lines. A trace no report can be made of still gets its rows.
"""
from __future__ import annotations

import logging

import pytest

from nnscope import parse_systrace
from nnscope.dashboards import systrace_page
from nnscope.dashboards.systrace_page import SystraceReportExporter
from nnscope.parse_systrace.errors import TraceFormatError
from tests.support.sample_traces import random_trace
from nnscope.tracing.exporters import ExportResult, exporter_for_path, get_exporter
from nnscope.tracing.exporters.systrace import COLUMN_HEADER, SystraceHtmlExporter
from nnscope.tracing.span import ThreadTrack, TraceData

OLD_HEADER = "#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION"


def aosp_trace_part(path) -> list:
    """The rows AOSP's systrace_parser reads from an HTML file (its get_trace_part)."""
    seen, rows = False, []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if COLUMN_HEADER in line or OLD_HEADER in line:
                seen = True
            if seen:
                if "</script>" in line:
                    break
                rows.append(line)
    return rows


def summaries(path) -> list:
    runs = parse_systrace.summarize(str(path))
    out = [parse_systrace.render_json(runs)]
    for total in (False, True):
        for per_execution in (False, True):
            out += [parse_systrace.render_text(run, total, per_execution) for run in runs if run.complete]
            out.append(parse_systrace.render_json(runs, total, per_execution))
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("systrace-page")
    trace = random_trace(3)
    bare, page = out / "bare.html", out / "page.html"
    assert SystraceHtmlExporter(bare).export(trace) is ExportResult.SUCCESS
    assert exporter_for_path(page) is SystraceReportExporter
    assert get_exporter("systrace-html")(page).export(trace) is ExportResult.SUCCESS
    return bare, page


def test_the_page_is_the_report_with_the_trace_block_first(exported):
    bare, page = exported
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<h1>NNAPI timing report</h1>" in text
    assert '<p class="sub mono" id="trace-file">page.html</p>' in text
    body = text.index('<body data-rendered="false"')
    block = text.index('<script class="trace-data" type="application/text">')
    assert body < block < text.index('<div class="page">')
    assert text.count(COLUMN_HEADER) == 1 and text.index(COLUMN_HEADER) > block
    bare_text = bare.read_text()
    trace_block = bare_text[bare_text.index("  <script class"):bare_text.index("</body>")]
    assert trace_block in text  # byte for byte
    assert list(page.parent.glob("*.tmp")) == []


def test_parsers_read_the_same_trace(exported):
    bare, page = exported
    assert aosp_trace_part(page) == aosp_trace_part(bare) and len(aosp_trace_part(bare)) > 10
    assert summaries(page) == summaries(bare)


def test_a_trace_without_a_report_still_gets_its_rows(tmp_path, caplog, monkeypatch):
    def reject(path, graph_path=None, process_names=None):
        raise TraceFormatError("line 3", "nesting violation")
    monkeypatch.setattr(systrace_page, "build_report", reject)
    trace = TraceData(threads=[ThreadTrack(1, 1, "main", [(1_000_000, "[NN_LA_PO]kept"), (2_000_000, None)])])
    page = tmp_path / "t.html"
    with caplog.at_level(logging.WARNING):
        assert SystraceReportExporter(page).export(trace) is ExportResult.SUCCESS
    assert "no report page" in caplog.text and str(page) in caplog.text
    assert "tracing_mark_write: B|1|[NN_LA_PO]kept" in page.read_text()
    assert list(tmp_path.glob("*.tmp")) == []


def test_an_unwritable_path_fails_and_logs(tmp_path, caplog):
    result = SystraceReportExporter(tmp_path / "missing" / "t.html").export(random_trace(1))
    assert result is ExportResult.FAILURE
    assert "export to" in caplog.text


def test_the_html_exporter_is_published_as_an_entry_point():
    from importlib.metadata import entry_points
    published = {e.name: e.load() for e in entry_points(group="nnscope.trace_exporters")}
    assert published["systrace-html"] is SystraceReportExporter is get_exporter("systrace-html")
    assert published["systrace-html-bare"] is SystraceHtmlExporter
