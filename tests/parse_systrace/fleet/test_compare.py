"""compare finds the injected regressions with their sign and size, and nothing else."""
from __future__ import annotations

import json

import pytest

from nnscope.parse_systrace.fleet.__main__ import main
from nnscope.parse_systrace.fleet.compare import FASTER, NOISE, SLOWER, compare, notable
from tests.support.fleet_gen import REGRESSIONS


@pytest.fixture(scope="module")
def builds(embedded):
    dataset = embedded[0]
    return compare(f"{dataset}:build=b100", f"{dataset}:build=b101")


def test_the_method_is_named_and_seeded(builds):
    records, method = builds
    assert "bootstrap" in method and "seed 0" in method and "Bonferroni" in method
    assert len(records) > 100


def test_each_injected_regression_is_found_with_its_sign_and_size(builds):
    records, _ = builds
    for regression in REGRESSIONS:
        for model in ("mobilenet", "ssd_lite", "asr"):
            (cell,) = [r for r in records if (r["device"], r["model"], r["phase"], r["layer"]) ==
                       (regression.device, model, regression.phase, regression.layer)]
            assert cell["verdict"] == (SLOWER if regression.factor > 1 else FASTER), cell
            expected = (regression.factor - 1) * 100
            assert cell["ci_low_pct"] <= expected <= cell["ci_high_pct"], cell
            assert abs(cell["change_pct"] - expected) < 8, cell


def test_no_other_difference_is_significant(builds):
    records, _ = builds
    changed = {regression.device: regression for regression in REGRESSIONS}
    for cell in notable(records):
        regression = changed.get(cell["device"])
        assert regression is not None, cell  # pixel7 changed nothing
        assert cell["layer"] in (regression.layer, "LT"), cell  # the layer, or the layer total
        assert cell["verdict"] == (SLOWER if regression.factor > 1 else FASTER), cell
    unchanged = [r for r in records if r["device"] == "pixel7"]
    assert unchanged and all(r["verdict"] in (NOISE, "n/a") for r in unchanged)


def test_the_same_build_against_itself_is_within_noise(embedded):
    dataset = embedded[0]
    records, _ = compare(f"{dataset}:build=b100", f"{dataset}:build=b100")
    assert records and not notable(records)


def test_fail_on_regression_exits_1_only_above_the_threshold(embedded, capsys):
    a, b = f"{embedded[0]}:build=b100", f"{embedded[0]}:build=b101"
    assert main(["compare", a, b, "--fail-on-regression", "5"]) == 1
    err = capsys.readouterr().err
    assert "regression: device=pixel6" in err and "PE LD" in err
    assert main(["compare", a, b, "--fail-on-regression", "60"]) == 0
    assert main(["compare", b, a, "--fail-on-regression", "5"]) == 1  # galaxy's CPU: slower from b101 to b100


def test_json_output_names_the_method_and_every_cell(embedded, capsys):
    a, b = f"{embedded[0]}:build=b100", f"{embedded[0]}:build=b101"
    assert main(["compare", a, b, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["by"] == ["device", "model"] and "bootstrap" in document["method"]
    assert {cell["verdict"] for cell in document["cells"]} >= {SLOWER, FASTER, NOISE}


def test_two_datasets_compare_like_groups(embedded, tmp_path):
    records, _ = compare(str(embedded[0]), str(embedded[0]), ["device", "build"])
    assert {(r["device"], r["build"]) for r in records} == {
        (d, b) for d in ("pixel6", "pixel7", "galaxy") for b in ("b100", "b101")}
    assert not notable(records)


def test_two_traces_compare_their_runs(lab):
    root, truth = lab
    first, second = sorted(p for p in truth.traces if p.startswith("pixel6/b100/asr/"))[:2]
    records, _ = compare(str(root / first), str(root / second))
    assert records and all(r["n_a"] == 1 and r["verdict"] == "n/a" for r in records)
    assert all(set(r) >= {"phase", "layer", "median_a", "median_b", "change_pct"} for r in records)
