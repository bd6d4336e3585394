"""``nnscope bench --stress``: each case runs in a real child process and is classified by what
happened: a normal run is SUCCESS, a driver killed mid-run is SUCCESS (the runtime recovers: CPU
fallback or a restarted driver, and the outputs still match nnapi-reference), a driver that stops answering is a HANG
(a small ``--hang-scale`` keeps it short), a child that aborts is a CRASH and a case that fails
is a FAILURE. The parent never waits past the budget."""
from __future__ import annotations

import time

import pytest

from nnscope.runtime import manager
from nnscope.runtime.__main__ import main
from nnscope.runtime.cli._bench_report import read_bench
from nnscope.runtime.cli._bench_run import Settings, load_model
from nnscope.runtime.cli._bench_stress import (NNSCOPE_forTest_BENCH_ABORT, SETUP_LIMIT_S, StressCase,
                                               budget_s, run_case, target_driver)
from nnscope.runtime.compilation import Compilation

HANG_SCALE = 0.15  # budget (run + 30 s) x 0.15: about 4.5 s from the start of the run


@pytest.fixture(scope="module")
def stress(tmp_path_factory):
    path = tmp_path_factory.mktemp("stress") / "bench.json"
    start = time.monotonic()
    assert main(["bench", "tiny_add", "--device", "all", "--executions", "4", "--warmup", "0",
                 "--stress", "--hang-scale", str(HANG_SCALE), "--json", str(path)]) == 0
    document = read_bench(str(path))
    return document, time.monotonic() - start


def _case(document, name):
    [found] = [case for case in document["stress"] if case["case"] == name]
    return found


def _plan_driver():
    compilation = Compilation(load_model("tiny_add").model)
    compilation.finish()
    try:
        return target_driver(compilation.plan.steps, None)
    finally:
        manager.shutdown()


def test_every_case_is_reported(stress):
    document, _ = stress
    assert [c["case"] for c in document["stress"]] == ["normal", "driver-killed", "driver-stopped"]
    assert all(c["model"] == "tiny_add" for c in document["stress"])


def test_normal_case_succeeds(stress):
    normal = _case(stress[0], "normal")
    assert (normal["device"], normal["outcome"]) == ("all", "SUCCESS"), normal["detail"]
    assert "4 executions; max abs error 0 (0 of the output range) vs nnapi-reference" in normal["detail"]


def test_killed_driver_is_survived(stress):
    killed = _case(stress[0], "driver-killed")
    assert killed["device"] == _plan_driver()  # the driver running the model in the plan
    assert killed["outcome"] == "SUCCESS", killed["detail"]
    # the kill came after 2 of the 4 executions, and the last 2 still ran and matched
    assert f"driver-killed of {killed['device']} (pid" in killed["detail"]
    assert "after 2 executions; 4 executions; max abs error 0" in killed["detail"]


def test_stopped_driver_is_a_hang_within_the_budget(stress):
    document, elapsed = stress
    stopped = _case(document, "driver-stopped")
    [run] = document["results"]
    run_s = (run["compile_ms"] + run["latency_ms"]["mean"] * 4) / 1e3
    budget = budget_s(run_s, HANG_SCALE)
    assert stopped["outcome"] == "HANG", stopped["detail"]
    assert stopped["detail"].startswith(f"no result within {budget:.1f} s of its run")
    assert budget <= stopped["seconds"] < budget + SETUP_LIMIT_S
    assert elapsed < 3 * SETUP_LIMIT_S  # the parent went on


def test_aborting_child_is_a_crash(monkeypatch):
    monkeypatch.setenv(NNSCOPE_forTest_BENCH_ABORT, "normal")
    outcome = run_case(StressCase("normal", "tiny_add", "all", "tiny_add"), Settings(4, 0),
                       hang_scale=1.0, run_s=0.0)
    assert outcome["outcome"] == "CRASH" and "SIGABRT" in outcome["detail"], outcome


def test_failing_case_is_a_failure(tmp_path):
    missing = tmp_path / "gone.tflite"
    outcome = run_case(StressCase("normal", str(missing), "all", "gone"), Settings(2, 0),
                       hang_scale=1.0, run_s=0.0)
    assert outcome["outcome"] == "FAILURE"
    assert outcome["detail"].startswith("FileNotFoundError: no such model file")
