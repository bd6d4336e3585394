"""Each page type in a real headless Chromium: a trace of ``nnscope run`` on all devices
(with its partition graph), the real Android ``omr1.html`` systrace, and a bench report
measured in this session.

The page's own self-test (``#selftest``: it reads ``window.__nnscopeTest``, zooms in by
4 and writes what it saw into the DOM) is read back with ``--dump-dom``: no script
errors, the canvas drew one lane per thread that has spans (counted here from the rows),
zooming narrows the visible range, graph nodes are linked to spans. Screenshots must
not be blank and must show the layer colours the timeline paints.
"""
from __future__ import annotations

import html
import json
import re

import pytest

from nnscope import dashboards
from nnscope.dashboards import _graph
from nnscope.parse_systrace.readers import open_rows
from tests.dashboards.bench_data import measure_bench
from tests.dashboards.test_browser import chromium, png_rows
from tests.support.paths import SYSTRACE_FIXTURES
from tests.support.programs import needs_chromium

pytestmark = needs_chromium
OMR1 = SYSTRACE_FIXTURES / "omr1.html"
APPLICATION_BLUE, DRIVER_GREEN = (59, 130, 246), (16, 185, 129)


def expected_lanes(trace) -> int:
    return len({(tgid, tid) for _, tid, tgid, name, _ in open_rows(trace).rows() if name})


@pytest.fixture(scope="module")
def pages(tmp_path_factory, nnscope_run):
    out = tmp_path_factory.mktemp("pages")
    bench = measure_bench(devices=("nnapi-reference", "sample-float-fast", "all"),
                          executions=5, hang_timeout=2.0)
    bench_json = out / "bench.json"
    bench_json.write_text(json.dumps(bench))
    run_page, omr1_page, bench_page = out / "run.html", out / "omr1.html", out / "bench.html"
    dashboards.write_report(nnscope_run.trace, run_page, graph_path=nnscope_run.dot)
    dashboards.write_report(OMR1, omr1_page)
    from nnscope.dashboards.__main__ import main
    assert main([str(bench_json), "-o", str(bench_page)]) == 0
    return dict(run=(run_page, expected_lanes(nnscope_run.trace)),
                omr1=(omr1_page, expected_lanes(OMR1)), bench=(bench_page, bench))


def selftest(tmp_path, page) -> dict:
    result = chromium(tmp_path, page, "--dump-dom", fragment="#selftest")
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    assert "Uncaught" not in result.stderr and not console, result.stderr[-2000:]
    found = re.findall(r'<pre id="nnscope-selftest">(\{.*?)</pre>', result.stdout, re.S)
    assert len(found) == 1, result.stdout[-2000:]
    data = json.loads(html.unescape(found[0]))
    assert data["errors"] == []
    return data


@pytest.mark.parametrize("kind", ["run", "omr1"])
def test_trace_page_timeline(tmp_path, pages, kind, nnscope_run):
    page, lanes = pages[kind]
    data = selftest(tmp_path, page)
    assert data["page"] == "trace"
    assert data["lanes"] == data["lanesDrawn"] == lanes
    assert data["spansDrawn"] > 0 and data["spansDrawnZoomed"] > 0
    (b0, b1), (a0, a1) = data["rangeBefore"], data["rangeAfter"]
    assert b0 < a0 < a1 < b1
    assert a1 - a0 == pytest.approx((b1 - b0) / 4)
    if kind == "run":
        assert data["graphLinked"] == sum(n for _, _, n in nnscope_run.plan)
        check_selection(data, nnscope_run)


def thread_spans(trace, pid, tid) -> list:
    """``(depth, start µs, end µs, name)`` of one thread of a Chrome JSON trace."""
    stack, spans = [], []
    for event in json.loads(trace.read_text())["traceEvents"]:
        if (event.get("pid"), event.get("tid")) != (pid, tid) or event["ph"] not in "BE":
            continue
        if event["ph"] == "B":
            stack.append((event["ts"], event["name"]))
        else:
            begin, name = stack.pop()
            spans.append((len(stack), begin, event["ts"], name))
    return sorted(spans, key=lambda span: span[1])


def check_selection(data, nnscope_run):
    """Clicking the first top-level span lists its children's self-times; a graph node
    selects a span of its operation's kernel."""
    spans = thread_spans(nnscope_run.trace, *first_lane(nnscope_run.trace))
    _, start, end, name = next(span for span in spans if span[0] == 0)
    assert data["selectedFirst"]["name"] == name
    assert data["hitFirst"] == data["selectedFirst"]["index"]  # hover finds the same span
    inside = [s for s in spans if start <= s[1] and s[2] <= end]
    expected = {}
    for depth, a, b, child in inside:
        if depth != 1:
            continue
        grandchildren = sum(y - x for d, x, y, _ in inside if d == 2 and a <= x and y <= b)
        count, self = expected.get(child, (0, 0.0))
        expected[child] = (count + 1, self + (b - a) - grandchildren)
    shown = {row["name"]: (row["count"], row["self"]) for row in data["children"]}
    assert shown.keys() == expected.keys()
    for child, (count, self) in expected.items():
        assert shown[child][0] == count
        assert shown[child][1] == pytest.approx(self, abs=0.05)
    steps = _graph.plan_steps(nnscope_run.dot.read_text())
    types = {f"o{index}": kind for step in steps for index, kind in step["ops"]}
    clicked = data["graphClick"]
    kernel = clicked["selected"]["name"].rpartition("]")[2]
    assert _graph.kernel_matches(kernel, types[clicked["node"]])


def first_lane(trace) -> tuple:
    """(pid, tid) of the application's main thread: the thread of the [NN_LA_PO] span."""
    for event in json.loads(trace.read_text())["traceEvents"]:
        if event["ph"] == "B" and event["name"].startswith("[NN_LA_PO]"):
            return event["pid"], event["tid"]
    raise AssertionError("no [NN_LA_PO] span")


def test_bench_page(tmp_path, pages):
    page, bench = pages["bench"]
    data = selftest(tmp_path, page)
    measured = [r for r in bench["results"] if r["latency_ms"]]
    models = {r["model"] for r in measured}
    assert data["page"] == "bench" and data["lanes"] == 0
    assert data["plots"] == len(models) + len(measured)  # one CDF per model, one histogram each
    dom = chromium(tmp_path, page, "--dump-dom").stdout
    assert dom.count('<tr data-status="ok"') == len(measured)
    assert dom.count("<tr data-outcome=") == len(bench["stress"]) == 4
    for outcome in ("SUCCESS", "FAILURE", "CRASH", "HANG"):
        assert f'<tr data-outcome="{outcome}"' in dom


def colours(tmp_path, page, rows=700) -> set:
    shot = tmp_path / (page.stem + ".png")
    result = chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1100,760")
    assert shot.exists(), result.stderr
    return {pixel for row in png_rows(shot.read_bytes(), rows)[::3] for pixel in row}


@pytest.mark.parametrize("kind", ["run", "omr1"])
def test_trace_screenshot_shows_the_timeline(tmp_path, pages, kind):
    seen = colours(tmp_path, pages[kind][0])
    assert len(seen) > 40
    assert bytes(APPLICATION_BLUE) in seen or bytes(DRIVER_GREEN) in seen


def test_bench_screenshot_is_not_blank(tmp_path, pages):
    seen = colours(tmp_path, pages["bench"][0])
    assert len(seen) > 40
    assert bytes((22, 163, 74)) in seen  # the green "ok" status badges
