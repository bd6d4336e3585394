"""What a person sees at 1400 px, measured in headless Chromium by the page's own self-test.

Pages: the ``--systrace`` export and the report of a real ``nnscope run``, and the page of a
real ``nnscope bench --stress`` run with unsupported devices. The self-test (``#selftest``)
reports every chart text that is clipped by its plot, overlaps another text or a bar, the
tick labels, the timeline's axis labels, anything that sticks out of its card and the height
of each result row; the tests hold those to the issue's rules.
"""
from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nnscope import dashboards
from nnscope import parse_systrace
from tests.dashboards.pages import dom_tables, golden_tables, json_block
from tests.dashboards.test_browser import chromium
from tests.dashboards.test_browser_views import expected_lanes
from tests.support.paths import REPO
from tests.support.programs import cpu_kernel_drivers_env, needs_chromium, needs_litert

pytestmark = needs_chromium
WIDTH = "--window-size=1400,900"
ROUND = (1.0, 2.0, 2.5, 5.0)


def selftest(tmp_path, page) -> tuple[dict, str]:
    """The self-test's findings and the DOM, at 1400 px."""
    result = chromium(tmp_path, page, "--dump-dom", WIDTH, fragment="#selftest")
    assert "Uncaught" not in result.stderr, result.stderr[-2000:]
    found = re.findall(r'<pre id="nnscope-selftest">(\{.*?)</pre>', result.stdout, re.S)
    assert len(found) == 1, result.stdout[-2000:]
    data = json.loads(html.unescape(found[0]))
    assert data["errors"] == [] and data["viewport"] == 1400
    return data, result.stdout


def assert_round_steps(labels: list, unit: str = "") -> None:
    """Labels ``<number><unit>`` evenly spaced by 1, 2, 2.5 or 5 times a power of ten."""
    assert len(labels) >= 3, labels
    values = []
    for label in labels:
        assert label.endswith(unit), (label, labels)
        values.append(float(label[:len(label) - len(unit)]))
    steps = {round(b - a, 9) for a, b in zip(values, values[1:])}
    assert len(steps) == 1, labels
    step = steps.pop()
    assert round(step / 10 ** math.floor(math.log10(step)), 6) in ROUND, labels
    assert all(label[:len(label) - len(unit)] == f"{value:.{_decimals(step)}f}"
               for label, value in zip(labels, values)), labels


def _decimals(step: float) -> int:
    return next(d for d in range(7) if abs(round(step * 10 ** d) - step * 10 ** d) < 1e-6)


@pytest.fixture(scope="module")
def run_pages(tmp_path_factory, nnscope_run):
    report = tmp_path_factory.mktemp("run-pages") / "report.html"
    dashboards.write_report(nnscope_run.trace, report, graph_path=nnscope_run.dot)
    return {"report": report, "systrace": nnscope_run.systrace}


@pytest.fixture(scope="module")
def bench_page(tmp_path_factory):
    """``nnscope bench --stress`` on a driver and a device that supports nothing of the model."""
    out = tmp_path_factory.mktemp("bench-page")
    nnscope = Path(sys.executable).with_name("nnscope")  # the console script of this install
    nnscope = nnscope if nnscope.exists() else Path(shutil.which("nnscope") or "nnscope")
    done = subprocess.run([str(nnscope), "bench", "tiny_add", "--device", "sample-minimal",
                           "--device", "sample-quant", "--executions", "3", "--warmup", "0",
                           "--stress", "--hang-scale", "0.1", "--json", str(out / "bench.json"),
                           "--html", str(out / "bench.html")],
                          cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **cpu_kernel_drivers_env()})  # the plan on sample-minimal
    assert done.returncode == 0, done.stderr
    return out / "bench.html", json.loads((out / "bench.json").read_text())


def test_the_systrace_export_opens_as_the_report(tmp_path, nnscope_run):
    data, dom = selftest(tmp_path, nnscope_run.systrace)
    assert '<body data-rendered="true"' in dom and "NNAPI timing report" in dom
    assert data["page"] == "trace" and data["lanesDrawn"] == expected_lanes(nnscope_run.systrace) > 2
    runs = parse_systrace.summarize(str(nnscope_run.systrace))
    text = "".join(parse_systrace.render_text(run) for run in runs if run.complete)
    assert dom_tables(dom)[("all", "self")] == golden_tables(text)
    graph_ops = re.findall(r'<tr class="link" data-span="\d+"><td>([^<]*)</td>', dom)
    assert len(graph_ops) > 5 and all(re.fullmatch(r"#\d+", op) for op in graph_ops), graph_ops


@pytest.mark.parametrize("kind", ["report", "systrace"])
def test_the_timeline_axis_speaks_one_unit_on_round_steps(tmp_path, run_pages, kind):
    data, _ = selftest(tmp_path, run_pages[kind])
    fold = data["fold"]  # the run's start-up is folded: the axis starts at the executions
    assert fold and data["rangeBefore"] == [fold["start"], fold["end"]]
    assert data["axisOverlapsStart"] == data["axisOverlaps"] == 0  # no label runs into the next
    for labels in (data["axisLabelsStart"], data["axisLabels"]):
        unit = labels[-1][labels[-1].index(" "):]
        assert unit in (" s", " ms", " µs"), labels
        assert_round_steps(labels, unit)
    for readout in (data["rangeTextStart"], data["rangeText"]):  # "-0.036 s – 3.644 s (3.680 s shown)"
        found = re.fullmatch(r"(-?[\d.]+) (s|ms|µs) – ([\d.]+) (s|ms|µs) \(([\d.]+) (s|ms|µs) shown\)", readout)
        assert found and len({found.group(2), found.group(4), found.group(6)}) == 1, readout
        start, end, length = (float(found.group(i)) for i in (1, 3, 5))
        assert end - start == pytest.approx(length, rel=0.01) and length > 0, readout


@pytest.mark.parametrize("kind", ["report", "systrace"])
def test_the_timeline_opens_on_the_executions_and_the_start_up_unfolds(tmp_path, run_pages, kind):
    """Issue 37: 50 executions squeezed into 40 px of a 2.5 s strip. The page opens on the
    executions, says how much start-up is folded, and its button shows the whole trace."""
    data, dom = selftest(tmp_path, run_pages[kind])
    timeline = json_block(run_pages[kind].read_text(encoding="utf-8"), "nnscope-timeline")
    fold = timeline["fold"]
    assert data["fold"] == fold and fold["startup"] > 0.2 * timeline["t1"]
    assert data["rangeBefore"] == [fold["start"], fold["end"]] == data["rangeRefolded"]
    seconds = f"{fold['startup'] / 1e6:.3f} s"
    assert data["foldNote"] == f"◀ {seconds} start-up folded"
    assert data["foldButton"] == f"show start-up ({seconds})"
    unfolded = data["rangeUnfolded"]
    assert unfolded[0] <= 0 and unfolded[1] >= timeline["t1"]
    assert data["foldNoteUnfolded"] == "" and data["foldButtonUnfolded"] == "fold start-up"
    assert 'id="timeline-fold"' in dom


@pytest.mark.parametrize("kind", ["report", "bench"])
def test_latency_charts_have_round_ticks_and_nothing_clipped_or_overlapping(tmp_path, run_pages,
                                                                            bench_page, kind):
    data, _ = selftest(tmp_path, run_pages["report"] if kind == "report" else bench_page[0])
    plots = data["plotChecks"]
    assert sum(p["label"] == "latency CDF" for p in plots) >= 1 and len(plots) >= 2
    for plot in plots:
        assert plot["clipped"] == [] and plot["overlaps"] == [] and plot["overBars"] == [], plot
        assert plot["ticks"][0] == "0" or float(plot["ticks"][0]) == 0
        assert_round_steps(plot["ticks"])
        assert "latency per execution (ms)" in plot["axisTitles"]
        if plot["label"] == "latency CDF":
            assert "fraction ≤ x" in plot["axisTitles"]


def test_every_operation_is_listed_with_its_device_beyond_the_first_rows(tmp_path, nnscope_run,
                                                                         monkeypatch):
    """Issue 37: all operations, with a device column; beyond the first rows they are
    folded under a "show all" button (here after 10, so that the 31-operation model folds)."""
    from nnscope.dashboards import _profile
    monkeypatch.setattr(_profile, "TOP_OPERATIONS", 10)
    page = tmp_path / "report.html"
    dashboards.write_report(nnscope_run.trace, page, graph_path=nnscope_run.dot)
    data, dom = selftest(tmp_path, page)
    rows, total = data["profileRows"], sum(n for _, _, n in nnscope_run.plan)
    assert rows["all"] == total > 10 and rows["visible"] == 10 and rows["visibleAfter"] == total
    assert rows["button"] == f"show all {total} operations ({total - 10} more)"
    assert rows["buttonAfter"] == "show the top 10 only"
    assert set(rows["devices"]) == {device for _, device, _ in nnscope_run.plan}
    head = re.search(r'<table class="mini profile ops"><thead><tr>(.*?)</tr>', dom).group(1)
    assert re.findall(r"<th>([^<]*)</th>", head)[:3] == ["graph op", "kernel", "device"]


@pytest.mark.parametrize("kind", ["report", "bench"])
def test_histograms_share_the_x_range_and_have_a_count_axis(tmp_path, run_pages, bench_page, kind):
    """Issue 37: histograms without a y-axis, each on its own x-range, cannot be compared."""
    data, _ = selftest(tmp_path, run_pages["report"] if kind == "report" else bench_page[0])
    figures = {}
    for plot in data["plotChecks"]:
        figures.setdefault(plot["figure"], []).append(plot)
    assert figures and -1 not in figures
    for plots in figures.values():
        cdf = [plot for plot in plots if plot["label"] == "latency CDF"]
        histograms = [plot for plot in plots if plot["label"].startswith("latency histogram ")]
        assert len(cdf) == 1 and len(histograms) == len(cdf[0]["series"]) >= 1
        for plot in histograms:
            assert plot["ticks"] == cdf[0]["ticks"]  # one x-range for the whole figure
            assert plot["yticks"] == histograms[0]["yticks"] and plot["yticks"][0] == "0"
            assert_round_steps(plot["yticks"])
            assert "executions" in plot["axisTitles"]


def _lab(color: str) -> tuple:
    """CIE L*a*b* (D65) of ``#rrggbb``."""
    linear = [(c / 255) for c in bytes.fromhex(color[1:])]
    linear = [((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92 for c in linear]
    matrix = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))
    xyz = [sum(m * c for m, c in zip(row, linear)) / white
           for row, white in zip(matrix, (0.95047, 1.0, 1.08883))]
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


@needs_litert
def test_bench_cdf_series_are_told_apart_by_colour_and_dash(tmp_path, pages_for_palette):
    """Issue 37: sample-litert and all looked alike. Series differ by colour (CIE76 distance
    of at least 25 between any two of the first eight) and neighbours also by dash."""
    data, _ = selftest(tmp_path, pages_for_palette)
    series = next(p for p in data["plotChecks"] if p["label"] == "latency CDF")["series"]
    assert len(series) >= 6 and {"sample-litert", "all"} <= {s["label"] for s in series}
    assert len({(s["stroke"], s["dash"]) for s in series}) == len(series)
    for a, b in zip(series, series[1:]):
        assert a["dash"] != b["dash"], (a, b)
    colours = [s["stroke"] for s in series[:8]]
    for i, a in enumerate(colours):
        for b in colours[i + 1:]:
            assert math.dist(_lab(a), _lab(b)) >= 25, (a, b)
    litert, everything = (next(s for s in series if s["label"] == name) for name in ("sample-litert", "all"))
    assert litert["dash"] != everything["dash"] and litert["stroke"] != everything["stroke"]


@pytest.fixture(scope="module")
def pages_for_palette(tmp_path_factory):
    """The bench page of six devices measured now, in the order ``nnscope bench`` lists
    the devices that run the face detector (sample-litert and all last)."""
    from tests.dashboards.bench_data import measure_bench
    report = measure_bench(devices=("nnapi-reference", "sample-all", "sample-float-fast",
                                    "sample-float-slow", "sample-litert", "all"),
                           executions=3, hang_timeout=0.5)
    out = tmp_path_factory.mktemp("palette") / "bench.html"
    dashboards.write_bench_report(report, out)
    return out


@pytest.mark.parametrize("kind", ["report", "systrace", "bench"])
def test_pages_fit_1400_px(tmp_path, run_pages, bench_page, kind):
    data, _ = selftest(tmp_path, bench_page[0] if kind == "bench" else run_pages[kind])
    assert data["overflow"]["cards"] == [] and data["overflow"]["page"] <= 0, data["overflow"]


def test_unsupported_combinations_take_one_line(tmp_path, bench_page):
    page, report = bench_page
    data, dom = selftest(tmp_path, page)
    unsupported = [r for r in report["results"] if r["status"] == "unsupported"]
    heights = data["rowHeights"]
    assert len(heights["unsupported"]) == len(unsupported) >= 1
    assert max(heights["unsupported"]) <= max(heights["ok"]) + 1
    assert 'title="BAD_DATA: no device can do operation 0 (ADD); devices: sample-quant"' in dom
    head = re.search(r'<table class="mini bench-results"><thead><tr>(.*?)</tr>', dom).group(1)
    assert re.findall(r"<th>([^<]*)</th>", head)[10:13] == ["max |err|", "rel err", "accurate"]
    verdicts = re.findall(r"<td>(yes|NO)( \([^<]*\))?</td>", dom)
    assert verdicts and all(v == ("yes", " (≤ 0.0001)") for v in verdicts), verdicts  # float32: MLTS 1e-4
    assert len(report["stress"]) == 3 and "HANG" in heights  # the long stress details fit too


@needs_litert
def test_a_run_on_the_default_devices_says_why_its_profile_is_empty(tmp_path):
    """Default devices: sample-litert takes the model whole as one LiteRT step, which has no
    kernel spans; the page says so, and how to get a per-operation profile."""
    nnscope = Path(sys.executable).with_name("nnscope")
    nnscope = nnscope if nnscope.exists() else Path(shutil.which("nnscope") or "nnscope")
    page = tmp_path / "run.html"
    env = {k: v for k, v in os.environ.items() if k != "NNSCOPE_DRIVERS"}
    done = subprocess.run([str(nnscope), "run", "--executions", "1", "--warmup", "0",
                           "--systrace", str(page), "--no-summary"],
                          cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    assert "plan: step 0: sample-litert (31 ops)" in done.stdout  # one step: the whole model
    data, dom = selftest(tmp_path, page)
    note = re.search(r'<p class="note" id="profile-note">([^<]*)</p>', dom)
    assert note, dom[-2000:]
    text = html.unescape(note.group(1))
    assert "its plan ran the model's 31 operations as one step on sample-litert" in text, text
    assert "nnscope run [MODEL] --device sample-all" in text and "--device nnapi-reference" in text
    assert data["overflow"]["cards"] == [], data["overflow"]


def _text(dom: str, pattern: str) -> str:
    """The text of the first element matching ``pattern`` (a regex up to its opening tag's end)."""
    found = re.search(pattern + r"(.*?)</(?:p|div|td|h3)>", dom, re.S)
    assert found, pattern
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip()


def test_every_per_execution_figure_counts_the_benchmark_as_the_cli_does(tmp_path, run_pages,
                                                                        nnscope_run):
    """Issue 37: the latency table said n=55 (warm-up included) where the CLI said "over 50
    executions", and the page's per-execution figures disagreed. At 1400 px, in Chromium: the
    latency counts the benchmark executions the CLI counts, its median and mean are the CLI's
    p50 and mean, the headline card is the mean of the same executions as the per-execution
    table, and "Where did the time go" says what its bars add up to."""
    cli = nnscope_run.latencies
    _, dom = selftest(tmp_path, run_pages["report"])
    assert _text(dom, r'<p class="sub" id="latency-counts">').startswith(
        f"Per benchmark execution ({cli['executions']}; the {cli['warmup_executions']} warm-up "
        f"execution{' is' if cli['warmup_executions'] == 1 else 's are'} not counted")
    stats = re.search(r'<table class="mini stats">(.*?)</table>', dom, re.S).group(1)
    rows = [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", stats.split("<tbody>", 1)[1], re.S)]
    assert rows and all(int(row[1]) == cli["executions"] for row in rows)  # every series: n=5, not 6
    [end_to_end] = [row for row in rows if row[0] == "execution (end to end)"]
    for cell, key in ((end_to_end[2], "p50_ms"), (end_to_end[5], "mean_ms")):  # the same executions:
        assert abs(float(cell) - cli[key]) <= 0.05 * cli[key], (cell, key, cli)  # span vs app clock
    card = _text(dom, r'<div class="label">per benchmark execution \(mean of ')
    assert card == f"{cli['executions']})"
    value = re.search(r'<div class="value">([0-9.]+) ms</div><div class="label">per benchmark', dom).group(1)
    per_execution = dom_tables(dom)[("per-execution", "self")][0]
    assert dict(per_execution)["Total"][-2] == value  # the Benchmark, per execution table's Total
    total_row = dict(dom_tables(dom)[("all", "self")][0])["Total"]
    main = [total_row[i].rstrip("*") for i in (0, 1, 2, 6, 7)]  # Init., Prep., Compilation, Ex. total, Term.
    phases = sum(float(cell) for cell in main if cell not in ("-", "n/a"))
    claim = re.search(r'class="sub chart-sum" data-sum="([0-9.]+)">(.*?)</p>', dom, re.S)
    assert float(claim.group(1)) == pytest.approx(phases, abs=0.026)  # 5 cells rounded
    assert f"the run's wall-clock is {total_row[-1].rstrip('*')} ms" in html.unescape(claim.group(2))
