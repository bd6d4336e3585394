"""Building a dataset on the embedded cluster: one errors row per broken file, each trace once,
incremental by content, and every group's summary equal to parse_systrace --json merged."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from nnscope.parse_systrace.fleet import build, query
from nnscope.parse_systrace.fleet.groups import summarize_groups
from tests.parse_systrace.fleet.conftest import PATTERN
from tests.support.fleet_gen import BROKEN, generate_fleet
from tests.support.trace_convert import run_main


def test_every_trace_is_summarised_and_every_broken_file_is_one_error(lab, embedded):
    root, truth = lab
    dataset, report = embedded
    assert (report.parsed, report.failed, report.duplicates) == (len(truth.traces), len(truth.broken), 0)
    _, paths = query(dataset, "SELECT path FROM traces")
    assert sorted(path for (path,) in paths) == sorted(str(root / p) for p in truth.traces)
    _, errors = query(dataset, "SELECT path, reason, device, build, model FROM errors")
    assert sorted(row[0] for row in errors) == sorted(str(root / p) for p in truth.broken)
    assert all("\n" not in reason and reason for _, reason, *_ in errors)
    assert {row[2:] for row in errors} == {("pixel6", "b101", m) for m in ("mobilenet", "ssd_lite", "asr")}


@pytest.mark.parametrize("name, reason", [
    ("empty.txt", "empty trace file"), ("corrupt.pftrace", "truncated protobuf"),
    ("truncated.txt", "no complete NNAPI run"), ("notes.html", "unrecognised trace format"),
    ("truncated.json.gz", "truncated gzip")])
def test_each_kind_of_broken_file_says_why(embedded, name, reason):
    assert name in BROKEN
    _, rows = query(embedded[0], f"SELECT reason FROM errors WHERE path LIKE '%/{name}'")
    assert len(rows) == 3 and all(reason in row[0] for row in rows)


def test_runs_and_phases_are_those_of_parse_systrace(lab, embedded):
    root, truth = lab
    path = sorted(truth.traces)[0]
    status, out, _ = run_main(["--json", str(root / path)])
    (expected,) = json.loads(out)
    _, rows = query(embedded[0], "SELECT p.phase, p.layer, p.app_phase, p.time_ms, p.self_ms FROM phases p "
                    f"JOIN traces t USING (trace_id) WHERE t.path = '{root / path}'")
    got = {(app, phase, layer): (time, self_) for phase, layer, app, time, self_ in rows}
    for phase, layers in expected["times"].items():
        if phase in ("PWU", "PBM"):
            continue
        for layer, value in layers.items():
            assert got[("", phase, layer)] == (value, expected["self_times"][phase][layer])
    assert got[("PBM", "PE", "LD")] == (expected["times"]["PBM"]["PE"]["LD"],
                                        expected["self_times"]["PBM"]["PE"]["LD"])


def test_every_group_summary_equals_parse_systrace_json_merged(lab, embedded):
    root, truth = lab
    values: dict = {}
    for path, keys in truth.traces.items():
        status, out, _ = run_main(["--json", str(root / path)])
        assert status == 0
        for run in json.loads(out):
            for phase, layers in run["self_times"].items():
                for layer, value in ({} if phase in ("PWU", "PBM") else layers).items():
                    if value is not None:
                        group = (keys["device"], keys["build"], keys["model"], phase, layer)
                        values.setdefault(group, []).append(value)
    records = summarize_groups(embedded[0])
    assert len(records) == len(values)
    for record in records:
        sample = np.array(values[(record["device"], record["build"], record["model"],
                                  record["phase"], record["layer"])])
        assert record["count"] == len(sample)
        assert record["median"] == pytest.approx(np.median(sample), rel=1e-12, abs=1e-12)
        assert record["p90"] == pytest.approx(np.quantile(sample, 0.9), rel=1e-12, abs=1e-12)
        spread = np.quantile(sample, 0.75) - np.quantile(sample, 0.25)
        assert record["spread"] == pytest.approx(spread, rel=1e-9, abs=1e-9)


def test_a_rerun_parses_only_the_new_traces(tmp_path):
    lab = tmp_path / "lab"
    first = generate_fleet(lab, devices=("pixel6",), builds=("b100",), models=("mobilenet", "asr"),
                           traces_per_group=10, execs=2, broken=True, seed=1)
    dataset = tmp_path / "lab.fleet"
    report = build(dataset, [str(lab)], pattern=PATTERN, workers=1, progress=False)
    assert (report.parsed, report.failed) == (20, 10)  # 5 broken files in each group
    generate_fleet(lab / "late", devices=("pixel6",), builds=("b100",), models=("mobilenet",),
                   traces_per_group=10, execs=2, broken=False, seed=2)
    parsed = []
    again = build(dataset, [str(lab)], pattern="{device}/{build}/{model}/*", workers=1, progress=False,
                  on_result=parsed.append)
    assert (again.files, again.skipped, again.parsed, again.failed) == (40, 30, 10, 0)
    assert len(parsed) == 10
    assert query(dataset, "SELECT count(*), count(DISTINCT trace_id) FROM traces")[1] == [(30, 30)]
    assert len(first.traces) == 20


def test_a_copied_trace_is_counted_once(tmp_path):
    lab = tmp_path / "lab"
    truth = generate_fleet(lab, devices=("pixel7",), builds=("b100",), models=("asr",),
                           traces_per_group=3, execs=2, broken=False)
    original = lab / sorted(truth.traces)[0]
    shutil.copy(original, lab / "pixel7" / "b100" / "asr" / "copy.txt")
    report = build(tmp_path / "lab.fleet", [str(lab)], pattern=PATTERN, workers=1, progress=False)
    assert (report.files, report.parsed, report.duplicates) == (4, 3, 1)
