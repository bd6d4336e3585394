"""The page of a delegate-mode run (issue 36): its Delegation section shows the run's delegation
report, and the other sections say what they cover when a model is split between NNAPI and
LiteRT. ``delegate_run`` (conftest) is a real ``nnscope run face_landmark.tflite --html``."""
from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from nnscope import dashboards
from nnscope.dashboards import delegation as page_delegation
from nnscope.dashboards.__main__ import main
from nnscope.dashboards.report import build_report
from tests.support.paths import SYSTRACE_FIXTURES

SYNTHETIC = SYSTRACE_FIXTURES / "synthetic" / "cpu.html"
ROW_KEYS = ("data-operator", "data-partition", "data-category")


class _Tables(HTMLParser):
    """The body rows of each ``table.delegation`` (by its kind class) and the summary line."""

    def __init__(self):
        super().__init__()
        self.tables, self.summary, self._kind, self._row, self._in = {}, None, None, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "table" and "delegation" in classes:
            self._kind = classes[-1]
            self.tables[self._kind] = []
        elif tag == "tr" and self._kind and any(key in attrs for key in ROW_KEYS):
            self._row = []
        elif tag == "td" and self._row is not None:
            self._row.append("")
            self._in = "td"
        elif attrs.get("id") == "delegation-summary":
            self.summary, self._in = "", "summary"

    def handle_endtag(self, tag):
        if tag == "tr" and self._row is not None:
            self.tables[self._kind].append(self._row)
            self._row = None
        elif tag == "table":
            self._kind = None
        elif tag in ("td", "p"):
            self._in = None

    def handle_data(self, data):
        if self._in == "td":
            self._row[-1] += data
        elif self._in == "summary":
            self.summary += data


def tables(page: str) -> _Tables:
    parser = _Tables()
    parser.feed(page)
    return parser


def expected_operator(row: dict) -> list:
    """An operator row as the report gives it: index, operator, where, category, time."""
    if row["partition"] is not None:
        where = f"partition {row['partition']} on {', '.join(row['devices'])}"
    else:
        where = f"CPU: {row['reason']}"
    time = "" if row["time_ms"] is None else f"{row['time_ms']:.3f}"
    note = f" [{row['note']}]" if row["note"] else ""
    return [str(row["index"]), row["operator"] + note, where, row["category"] or "", time]


def test_the_delegation_table_is_the_reports_rows(delegate_run):
    data, found = delegate_run.delegation, tables(delegate_run.page.read_text())
    assert found.summary == data["summary"]
    assert data["summary"].startswith(f"{data['delegated']} of {data['total']} operators delegated")
    assert found.tables["operators"] == [expected_operator(row) for row in data["operators"]]
    assert len(found.tables["operators"]) == data["total"] > data["delegated"] > 0
    cpu = [row for row in data["operators"] if row["partition"] is None]
    assert all(row["time_ms"] is not None for row in cpu)  # 3 benchmark executions: medians
    partitions = [[f"partition {p['partition']}", str(p["operators"]), ", ".join(p["devices"]),
                   f"{p['median_ms']:.3f}"] for p in data["partitions"]]
    cpu_row = ["CPU (LiteRT, in the app)", str(len(cpu)), "the app process",
               f"{sum(row['time_ms'] for row in cpu):.3f}"]
    assert found.tables["partitions"] == partitions + [cpu_row]


def test_cpu_operators_are_counted_by_why_and_a_long_operator_table_starts_folded(delegate_run):
    data, page = delegate_run.delegation, delegate_run.page.read_text()
    cpu = [row for row in data["operators"] if row["partition"] is None]
    counts: dict = {}
    for row in cpu:
        counts.setdefault(row["category"] or "CONSTANT_ONLY", []).append(row["time_ms"])
    found = tables(page).tables["reasons"]
    assert {r[0]: int(r[1]) for r in found} == {k: len(v) for k, v in counts.items()}
    assert sum(int(r[1]) for r in found) == len(cpu) and [int(r[1]) for r in found] == \
        sorted((int(r[1]) for r in found), reverse=True)
    assert len(data["operators"]) > page_delegation.FOLD_OVER_ROWS
    assert (f'<details class="delegation-operators"><summary>Per operator: {data["total"]} rows '
            f'({data["total"] - len(cpu)} delegated, {len(cpu)} on the CPU)</summary>') in page


def test_the_run_page_is_the_dashboards_page_of_its_trace_and_report(delegate_run, tmp_path):
    """``nnscope run --html`` hands the page its delegation report, nothing else."""
    report = tmp_path / "delegation.json"
    report.write_text(json.dumps(delegate_run.delegation))
    again = tmp_path / "again.html"
    assert main([str(delegate_run.trace), "--delegation", str(report), "-o", str(again)]) == 0
    assert again.read_text() == delegate_run.page.read_text()


def test_the_other_sections_say_what_they_cover_in_delegate_mode(delegate_run):
    data = delegate_run.delegation
    views = build_report(delegate_run.trace, delegation=data)["views"]
    profile = views["profile"]
    assert views["profile_note"] == (page_delegation.KERNELS_NOTE if profile["operations"]
                                     else page_delegation.PROFILE_NOTE)
    assert profile["graph_links"] == {} and all(row["graph_op"] is None for row in profile["ops"])
    assert views["graph"]["svg"] is None and views["graph"]["note"] == page_delegation.GRAPH_NOTE
    assert views["graph"]["steps"] == []  # each partition is its own model: no single plan
    latency = {d["label"]: d for d in views["latency"]}
    assert latency["execution (end to end)"]["n"] == data["executions"] == 3
    [litert] = [label for label in latency if label.startswith("LiteRT CPU operators (")]
    end_to_end = latency["execution (end to end)"]["median"]
    assert 0 < latency[litert]["median"] < end_to_end
    names = views["timeline"]["names"]
    assert "TfLiteNnapiDelegate" in names
    assert {row["operator"] for row in data["operators"] if row["partition"] is None} <= set(names)


def test_a_whole_model_page_has_no_delegation_section():
    page = dashboards.render_report(SYNTHETIC)
    assert 'id="delegation-section"' not in page
    assert build_report(SYNTHETIC)["delegation"] is None


@pytest.mark.parametrize("content, reason", [
    ("[1, 2]", "not a delegation report (a JSON object)"),
    ('{"summary": "x", "operators": []}', "not a delegation report: no list 'partitions'"),
    ("{", "not JSON: "),
])
def test_a_bad_delegation_file_is_one_line_and_exit_2(tmp_path, capsys, content, reason):
    bad = tmp_path / "d.json"
    bad.write_text(content)
    assert main([str(SYNTHETIC), "--delegation", str(bad), "-o", str(tmp_path / "out.html")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"nnscope-dashboard: error: --delegation {bad}: {reason}")
    assert not (tmp_path / "out.html").exists()


def test_run_help_says_html_works_in_delegate_mode():
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "run", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert "in delegate mode the delegation report instead of the plan" in " ".join(done.stdout.split())
