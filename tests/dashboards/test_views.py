"""Timeline, operation profile, latency and graph data of real traces.

Oracles: the trace file itself (Chrome JSON metadata and events read with ``json``), what
``nnscope run`` printed (its plan and latencies), and Graphviz's own SVG.
"""
from __future__ import annotations

import collections
import json
import re

import numpy as np
import pytest

from nnscope.dashboards import _graph, _timeline
from nnscope.dashboards.report import build_report
from nnscope.parse_systrace.readers import open_rows
from tests.dashboards.conftest import EXECUTIONS, WARMUP
from tests.dashboards.pages import json_block
from tests.support.paths import SYSTRACE_FIXTURES
from tests.support.programs import require_program

OMR1 = SYSTRACE_FIXTURES / "omr1.html"


@pytest.fixture(scope="module")
def run_views(nnscope_run):
    return build_report(nnscope_run.trace, nnscope_run.dot)["views"]


def events(trace) -> list:
    return json.loads(trace.read_text())["traceEvents"]


def test_lanes_are_named_from_the_trace(nnscope_run, run_views):
    lanes = run_views["timeline"]["lanes"]
    meta = {(e["name"], e["pid"], e["tid"]): e["args"]["name"] for e in events(nnscope_run.trace)
            if e["ph"] == "M"}
    begun = {(e["pid"], e["tid"]) for e in events(nnscope_run.trace) if e["ph"] == "B"}
    assert {(lane["pid"], lane["tid"]) for lane in lanes} == begun
    for lane in lanes:
        assert lane["process"] == meta[("process_name", lane["pid"], 0)]
        assert lane["thread"] == meta[("thread_name", lane["pid"], lane["tid"])]
    assert lanes[0]["role"] == "application" and lanes[0]["process"] == "nnscope"
    drivers = {lane["process"] for lane in lanes if lane["role"] == "driver"}
    used = {f"{device}-driver" for _, device, _ in nnscope_run.plan}
    assert used <= drivers and all(name.endswith("-driver") for name in drivers)
    roles = [lane["process_role"] for lane in lanes]
    assert roles == sorted(roles, key=["application", "driver"].index)


def test_omr1_lanes_put_the_app_and_the_nn_driver_first():
    lanes = build_report(OMR1)["views"]["timeline"]["lanes"]
    begun = {(tgid, tid) for _, tid, tgid, name, _ in open_rows(OMR1).rows() if name}
    assert len(lanes) == len(begun) == 86
    assert lanes[0]["pid"] == 27005 and lanes[0]["process_role"] == "application"
    driver = [lane for lane in lanes if lane["role"] == "driver"]
    assert {lane["pid"] for lane in driver} == {756}
    assert driver[0]["process"] == "neuralnetworks"  # the TASK column of the systrace
    assert lanes.index(driver[0]) < min(i for i, lane in enumerate(lanes)
                                        if lane["process_role"] == "IPC")


def test_profile_counts_every_kernel_span(nnscope_run, run_views):
    profile = run_views["profile"]
    kernels = collections.Counter(e["args"]["detail"].split(" ")[0] for e in events(nnscope_run.trace)
                                  if e["ph"] == "B" and e.get("args", {}).get("phase") == "PTR")
    assert {row["name"]: row["count"] for row in profile["types"]} == dict(kernels)
    assert profile["operations"] == sum(kernels.values())
    ops_in_plan = sum(n for _, _, n in nnscope_run.plan)
    assert profile["ops_listed"] == ops_in_plan
    assert all(row["count"] == EXECUTIONS + WARMUP for row in profile["ops"])
    assert sum(row["share"] for row in profile["types"]) == pytest.approx(1.0)
    totals = [row["total_ms"] for row in profile["types"]]
    assert totals == sorted(totals, reverse=True)
    for row in profile["types"]:
        assert row["mean_ms"] * row["count"] == pytest.approx(row["total_ms"])


def test_the_profile_lists_every_operation_with_its_device(nnscope_run, run_views):
    """Issue 37: the table listed the top 40 of 90 operations, without their device. Every
    operation is listed, the most expensive first, with the device of its plan step."""
    profile = run_views["profile"]
    devices = {step: device for step, device, _ in nnscope_run.plan}
    steps = {s["step"]: {index for index, _ in s["ops"]} for s in _graph.plan_steps(nnscope_run.dot.read_text())}
    assert len(profile["ops"]) == profile["ops_listed"] == sum(n for _, _, n in nnscope_run.plan)
    assert sorted(row["graph_op"] for row in profile["ops"]) == list(range(profile["ops_listed"]))
    for row in profile["ops"]:
        assert row["device"] == devices[row["step"]] and row["graph_op"] in steps[row["step"]]
    totals = [row["total_ms"] for row in profile["ops"]]
    assert totals == sorted(totals, reverse=True) and profile["ops_shown"] == 40


def test_without_a_plan_an_operation_s_device_is_the_process_that_ran_it(nnscope_run, monkeypatch):
    monkeypatch.setattr(_graph, "trace_plan_steps", lambda details: [])
    profile = build_report(nnscope_run.trace)["views"]["profile"]
    assert {row["device"] for row in profile["ops"]} == {f"{d}-driver" for _, d, _ in nnscope_run.plan}


def test_operations_link_to_the_graph(nnscope_run, run_views):
    steps = _graph.plan_steps(nnscope_run.dot.read_text())
    assert [(s["step"], s["device"], len(s["ops"])) for s in steps] == nnscope_run.plan
    links = run_views["profile"]["graph_links"]
    assert sorted(map(int, links)) == list(range(sum(n for _, _, n in nnscope_run.plan)))
    types = {index: kind for step in steps for index, kind in step["ops"]}
    for row in run_views["profile"]["ops"]:
        assert _graph.kernel_matches(row["name"], types[row["graph_op"]])
    assert [s["device"] for s in run_views["graph"]["steps"]] == [d for _, d, _ in nnscope_run.plan]


def test_kernel_spans_name_the_model_operation_and_the_step(nnscope_run):
    """Each kernel span says which model operation it ran and, in a plan step, the step and
    the operation's index in it; both agree with the plan's .dot."""
    steps = {s["step"]: s["ops"] for s in _graph.plan_steps(nnscope_run.dot.read_text())}
    assert len(steps) > 1  # the fixture's plan is partitioned
    details = {e["args"]["detail"] for e in events(nnscope_run.trace)
               if e["ph"] == "B" and e.get("args", {}).get("phase") == "PTR"}
    seen = set()
    for detail in details:
        named = re.fullmatch(r"(\w+) #(\d+) \(step (\d+) #(\d+)\)", detail)
        assert named, detail
        index, kind = steps[int(named[3])][int(named[4])]
        assert index == int(named[2]) and _graph.kernel_matches(named[1], kind), detail
        seen.add(index)
    assert seen == {index for ops in steps.values() for index, _ in ops}


def test_graph_svg_from_graphviz(run_views):
    require_program("dot")
    svg = run_views["graph"]["svg"]
    assert svg.startswith("<svg") and run_views["graph"]["note"] is None
    assert svg.count('class="node"') >= 31 and "<title>o30</title>" in svg


def test_graph_note_without_graphviz(nnscope_run, monkeypatch):
    monkeypatch.setattr(_graph, "dot_program", lambda: None)
    graph = build_report(nnscope_run.trace, nnscope_run.dot)["views"]["graph"]
    assert graph["svg"] is None and "Graphviz is not installed" in graph["note"]
    assert len(graph["steps"]) == len(nnscope_run.plan)


def test_latency_matches_what_nnscope_run_measured(nnscope_run, run_views):
    series = {d["label"]: d for d in run_views["latency"]}
    end_to_end = series["execution (end to end)"]
    assert end_to_end["n"] == EXECUTIONS  # the benchmark's, as the CLI's latency line
    assert run_views["latency_counts"] == {"executions": EXECUTIONS, "warmup": WARMUP}
    assert len(run_views["timeline"]["executions"]) == EXECUTIONS + WARMUP  # the timeline shows all
    # the trace's execution spans sit inside the CLI's timing of each execution
    assert end_to_end["median"] <= nnscope_run.latencies["max_ms"]
    assert end_to_end["min"] <= nnscope_run.latencies["p50_ms"] * 1.05 + 0.5
    devices = {label for label in series if label != "execution (end to end)"}
    assert devices == {f"{device}-driver" for _, device, _ in nnscope_run.plan}
    for label in devices:
        assert series[label]["n"] == EXECUTIONS
        assert series[label]["max"] <= end_to_end["max"]


def test_the_timeline_opens_on_the_executions_with_the_start_up_folded(run_views):
    """Driver start-up and compilation take most of a short run: the opening view is the
    executions (with a small margin), the start-up before them folded."""
    timeline = run_views["timeline"]
    executions, fold = timeline["executions"], timeline["fold"]
    assert fold is not None and fold["executions"] == len(executions) == EXECUTIONS + WARMUP
    assert fold["startup"] == executions[0][0] > 0.2 * timeline["t1"]
    last = max(end for _, end in executions)
    assert fold["start"] < executions[0][0] and last < fold["end"] <= timeline["t1"] * 1.01
    margin = (last - executions[0][0]) * 0.05
    assert executions[0][0] - fold["start"] < margin and fold["end"] - last < margin


def test_a_trace_whose_executions_fill_it_is_shown_whole():
    assert _timeline.fold_view(1000.0, [(100.0, 900.0)]) is None
    assert _timeline.fold_view(1000.0, []) is None
    assert _timeline.fold_view(1000.0, [(300.0, 900.0)])["startup"] == 300.0


def test_latency_histograms_share_their_bins(run_views):
    """The histograms of one figure have the same bins, from the smallest sample of all to
    the largest, so that they compare side by side."""
    dists = run_views["latency"]
    edges = dists[0]["hist"]["edges"]
    assert len(dists) >= 2 and all(d["hist"]["edges"] == edges for d in dists)
    assert edges[0] == min(d["min"] for d in dists)
    assert edges[-1] == pytest.approx(max(d["max"] for d in dists))
    assert all(sum(d["hist"]["counts"]) == d["n"] for d in dists)


def test_timeline_columns_decode_to_the_spans(nnscope_run, run_views):
    import base64
    timeline = run_views["timeline"]
    start = np.frombuffer(base64.b64decode(timeline["columns"]["start"]), "<f8")
    dur = np.frombuffer(base64.b64decode(timeline["columns"]["dur"]), "<f8")
    lane = np.frombuffer(base64.b64decode(timeline["columns"]["lane"]), "<u2")
    begins = [e for e in events(nnscope_run.trace) if e["ph"] == "B"]
    assert timeline["count"] == len(start) == len(begins)
    assert start.min() == 0.0 and (dur >= 0).all()
    assert (start + dur).max() == pytest.approx(timeline["t1"])
    assert set(lane.tolist()) == set(range(len(timeline["lanes"])))
    names = collections.Counter(timeline["names"][i] for i in np.frombuffer(
        base64.b64decode(timeline["columns"]["name"]), "<i4"))
    assert names == collections.Counter(e["name"] for e in begins)


def test_every_export_of_one_run_gives_the_same_lanes(nnscope_run, run_views):
    """Perfetto names lanes as Chrome JSON does; systrace text has the same threads."""
    json_lanes = [(lane["pid"], lane["tid"], lane["role"]) for lane in run_views["timeline"]["lanes"]]
    perfetto = build_report(nnscope_run.perfetto)["views"]
    assert perfetto["timeline"]["lanes"] == run_views["timeline"]["lanes"]
    assert perfetto["timeline"]["count"] == run_views["timeline"]["count"]
    systrace = build_report(nnscope_run.systrace)["views"]["timeline"]["lanes"]
    assert [(lane["pid"], lane["tid"], lane["role"]) for lane in systrace] == json_lanes
    assert [lane["thread"] for lane in systrace] == \
        [lane["thread"] for lane in run_views["timeline"]["lanes"]]


@pytest.mark.parametrize("export", ["trace", "perfetto", "systrace"])
def test_operations_link_without_a_graph_from_the_plan_in_the_trace(nnscope_run, run_views, export):
    """No ``--graph``: the plan steps the runtime recorded name every operation, as the .dot does."""
    views = build_report(getattr(nnscope_run, export))["views"]
    profile = views["profile"]
    assert views["graph"]["steps"] == run_views["graph"]["steps"]  # the plan line, from the trace
    with_graph = {(r["step"], r["position"], r["name"]): r["graph_op"] for r in run_views["profile"]["ops"]}
    assert {(r["step"], r["position"], r["name"]): r["graph_op"] for r in profile["ops"]} == with_graph
    assert None not in with_graph.values()
    assert profile["graph_links"].keys() == run_views["profile"]["graph_links"].keys()


def test_one_execution_thread_for_all_executions(nnscope_run, run_views):
    """``start_compute().wait()`` in a loop runs on one long-lived ``nn-execution`` worker."""
    lanes = [lane for lane in run_views["timeline"]["lanes"] if lane["thread"] == "nn-execution"]
    assert len(lanes) == 1 and EXECUTIONS + WARMUP > 1


def test_the_systrace_page_names_processes_as_the_recorder_did(nnscope_run, run_views):
    """The ``--systrace`` page's own timeline names each process as the Chrome JSON export does
    (systrace rows alone would name a process after its main thread)."""
    lanes = json_block(nnscope_run.systrace.read_text(), "nnscope-timeline")["lanes"]
    expected = {(lane["pid"], lane["tid"]): lane["process"] for lane in run_views["timeline"]["lanes"]}
    assert {(lane["pid"], lane["tid"]): lane["process"] for lane in lanes} == expected
    assert any(name.endswith("-driver") for name in expected.values())
