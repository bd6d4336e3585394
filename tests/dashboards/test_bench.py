"""Bench reports: detection by content, the schema checks, and the page's data.

The report under test is measured in this session (:mod:`tests.dashboards.bench_data`):
real compilations and executions with the runtime API, real child processes for stress.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from nnscope import dashboards
from nnscope.dashboards.__main__ import main
from nnscope.dashboards.bench import BenchFormatError, bench_view, check_bench, is_bench_file
from tests.dashboards.bench_data import measure_bench
from tests.dashboards.pages import json_block


@pytest.fixture(scope="module")
def bench():
    return measure_bench(devices=("nnapi-reference", "sample-float-fast", "sample-quant"),
                         executions=4, hang_timeout=2.0)


def test_measured_report_is_valid_and_classified(bench):
    check_bench(bench)
    status = {(r["model"], r["device"]): r["status"] for r in bench["results"]}
    assert status[("mobilenet", "sample-quant")] == "unsupported"  # float model, quant device
    assert status[("mobilenet", "sample-float-fast")] == "ok"
    reference = [r for r in bench["results"] if r["device"] == "nnapi-reference"]
    assert all(r["accuracy"]["max_abs_error"] == 0.0 for r in reference)
    assert [c["outcome"] for c in bench["stress"]] == ["SUCCESS", "FAILURE", "CRASH", "HANG"]


def test_view_distributions_follow_the_samples(bench):
    view = bench_view(bench, "b.json")
    by_model = {m["model"]: {d["label"]: d for d in m["distributions"]} for m in view["models"]}
    for result in bench["results"]:
        if result["status"] != "ok":
            assert result["device"] not in by_model[result["model"]]
            continue
        samples = np.array(result["latency_ms"]["samples"])
        shown = by_model[result["model"]][result["device"]]
        assert shown["n"] == len(samples) == 4
        assert shown["median"] == pytest.approx(np.median(samples))
        assert shown["median"] == pytest.approx(result["latency_ms"]["median"])
        assert shown["max"] == samples.max() and shown["cdf"][-1] == [samples.max(), 1.0]
        assert sum(shown["hist"]["counts"]) == len(samples)
    for model in view["models"]:  # one model's histograms share their bins
        edges = [d["hist"]["edges"] for d in model["distributions"]]
        assert len(edges) >= 2 and all(e == edges[0] for e in edges)
    assert view["stress_counts"] == {"SUCCESS": 1, "FAILURE": 1, "HANG": 1, "CRASH": 1}


def test_cli_detects_bench_by_content(tmp_path, bench, capsys):
    source = tmp_path / "results.txt"  # the name says nothing: content decides
    source.write_text(json.dumps(bench, indent=1))
    assert is_bench_file(source)
    out = tmp_path / "bench.html"
    assert main([str(source), "-o", str(out)]) == 0
    page = out.read_text()
    assert json_block(page, "nnscope-bench") == bench_view(bench, str(source))
    assert "<title>nnscope bench · results.txt</title>" in page
    for needle in ("src=", "href=", "@import", "url(", "https://"):
        assert needle not in page
    assert dashboards.render_bench(bench, str(source)) == page


@pytest.mark.parametrize("change, reason", [
    (lambda d: d.update(schema="other"), 'not a bench report ("schema" is not "nnscope-bench")'),
    (lambda d: d.update(version=2), "unsupported bench report version 2"),
    (lambda d: d["results"][0].update(status="fine"), 'results[0]: "status" must be one of'),
    (lambda d: d["results"][0]["latency_ms"].update(samples=[1.0, "x"]),
     'results[0]: "latency_ms.samples" must be a list of finite numbers'),
    (lambda d: d["stress"][0].update(outcome="OK"), 'stress[0]: "outcome" must be one of'),
], ids=["schema", "version", "status", "samples", "outcome"])
def test_bad_bench_is_one_line_and_exit_2(tmp_path, bench, capsys, change, reason):
    data = json.loads(json.dumps(bench))
    change(data)
    with pytest.raises(BenchFormatError, match=reason.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        check_bench(data)
    source = tmp_path / "bench.json"
    source.write_text(json.dumps(data))
    if data["schema"] != "nnscope-bench":
        return  # not detected as a bench report: read as a trace (see test_cli)
    assert main([str(source), "-o", str(tmp_path / "out.html")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nnscope-dashboard: error: {source}: ")
    assert reason in lines[0] and not (tmp_path / "out.html").exists()


def test_truncated_bench_json(tmp_path, bench, capsys):
    source = tmp_path / "bench.json"
    source.write_text(json.dumps(bench)[:-20])
    assert main([str(source), "-o", str(tmp_path / "out.html")]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and len(err.splitlines()) == 1


def test_graph_option_errors_are_one_line(tmp_path, capsys):
    from tests.support.paths import SYSTRACE_FIXTURES
    trace = SYSTRACE_FIXTURES / "synthetic" / "cpu.html"
    assert main([str(trace), "--graph", str(tmp_path / "none.dot"), "-o",
                 str(tmp_path / "o.html")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"nnscope-dashboard: error: --graph {tmp_path / 'none.dot'}: no such file"]
