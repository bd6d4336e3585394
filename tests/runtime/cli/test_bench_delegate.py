"""``nnscope bench model.tflite`` (issue 36): the delegate mode by default, each device as the
delegate's one accelerator (operators it cannot run stay on LiteRT's CPU), ``all`` over every
device; checked against the schema, LiteRT's outputs computed here and the delegation decided
here. ``--whole-model`` gives the rows of one NNAPI model (a device that cannot run all of it is
``unsupported``); ``--burst`` and ``--stress`` need it for a .tflite."""
from __future__ import annotations

import re

import numpy as np
import pytest

from nnscope.runtime import manager
from nnscope.runtime.__main__ import main
from nnscope.runtime.cli._bench_report import problems, read_bench, render_html, summary, write_json
from nnscope.runtime.cli._bench_run import load_model
from nnscope.runtime.delegate.delegated import DelegatedModel
from tests.dashboards.test_browser import chromium
from tests.support.paths import MODEL_FIXTURES
from tests.support.programs import needs_chromium

LANDMARK = MODEL_FIXTURES / "face_landmark.tflite"
DEVICES = ["sample-minimal", "sample-quant", "all"]  # some, none, all of the model delegated
OPERATORS = 97


def _bench(path, *flags, devices=DEVICES) -> dict:
    args = [arg for name in devices for arg in ("--device", name)]
    assert main(["bench", str(LANDMARK), *args, "--executions", "2", "--warmup", "0",
                 "--json", str(path), *flags]) == 0
    return read_bench(str(path))


@pytest.fixture(scope="module")
def delegated(tmp_path_factory):
    return _bench(tmp_path_factory.mktemp("bench") / "delegate.json")


def _result(document, device):
    [found] = [r for r in document["results"] if r["device"] == device]
    return found


def test_every_row_is_a_delegate_mode_run(delegated):
    assert problems(delegated) == []
    assert [(r["model"], r["device"], r["mode"], r["status"]) for r in delegated["results"]] == \
        [("face_landmark", device, "delegate", "ok") for device in DEVICES]
    for result in delegated["results"]:
        assert len(result["latency_ms"]["samples"]) == 2 and result["compile_ms"] > 0
        assert result["accuracy"]["within_tolerance"]


def test_the_share_is_the_delegated_operators(delegated):
    minimal, quant, every = (_result(delegated, d) for d in DEVICES)
    assert 0 < minimal["operations"]["on_device"] < OPERATORS
    assert quant["operations"] == {"total": OPERATORS, "on_device": 0, "share": 0.0}
    assert every["operations"] == {"total": OPERATORS, "on_device": OPERATORS, "share": 1.0}
    expected = DelegatedModel(LANDMARK.read_bytes(), [manager.get_device("sample-minimal")])
    try:
        delegation = minimal["delegation"]
        assert minimal["operations"]["on_device"] == delegation["delegated"] == \
            len(expected.delegation.delegated())
        assert (delegation["feature_level"], delegation["max_partitions"], delegation["total"]) == \
            (30, 3, OPERATORS)
        assert len(delegation["partitions"]) == len(expected.delegation.partitions) <= 3
        assert all(p["devices"] == ["sample-minimal"] for p in delegation["partitions"])
        assert delegation["summary"].startswith(expected.delegation.summary() + ", ")
    finally:
        expected.free()
        manager.shutdown()
    assert quant["delegation"]["partitions"] == [] and quant["delegation"]["delegated"] == 0


def test_accuracy_is_against_litert(delegated):
    from tests.runtime.tflite.litert_helpers import litert_run  # noqa: PLC0415 - skips without LiteRT
    data, inputs = LANDMARK.read_bytes(), load_model(str(LANDMARK), delegate=True).inputs
    expected = litert_run(data, inputs)
    ours = DelegatedModel(data, [manager.get_device("sample-minimal")])
    try:
        ours.compile()
        actual = ours.run(inputs)
    finally:
        ours.free()
        manager.shutdown()
    diff = max(float(np.abs(np.float64(e) - np.float64(a)).max()) for e, a in zip(expected, actual))
    accuracy = _result(delegated, "sample-minimal")["accuracy"]
    assert accuracy["reference"] == "litert" and accuracy["threshold"] == 1e-4
    assert accuracy["max_abs_error"] == pytest.approx(diff, rel=1e-9, abs=1e-12)


def test_the_summary_says_the_mode_and_the_delegated_share(delegated):
    text = summary(delegated)
    assert max(map(len, text.splitlines())) <= 100
    assert text.count("\nface_landmark (97 operators; delegate mode, feature level 30, at most 3 "
                      "partitions)\n") == 1
    assert text.count("\nface_landmark (97 operators; delegate mode; reference: litert)\n") == 1
    rows = {line.split()[0]: line for line in text.split("Accuracy against", 1)[1].splitlines()
            if line.startswith("  ") and not line.startswith("  -")}
    minimal = _result(delegated, "sample-minimal")["operations"]["on_device"]
    assert rows["sample-minimal"].endswith(f" {minimal}/97 delegated")
    assert rows["sample-quant"].endswith(" 0/97 delegated") and rows["all"].endswith(" 97/97 delegated")
    assert "face_landmark on sample-quant: ok: nothing delegated, every operator ran on LiteRT's CPU" in text
    assert "unsupported" not in text


def test_the_html_page_renders_a_delegate_mode_report(delegated, tmp_path):
    data, page = tmp_path / "bench.json", tmp_path / "bench.html"
    write_json(delegated, str(data))
    assert render_html(str(data), str(page)) is None
    html = page.read_text(encoding="utf-8")
    assert all(device in html for device in DEVICES) and "face_landmark" in html


@needs_chromium
def test_the_bench_page_says_delegate_mode_and_the_delegated_share(delegated, tmp_path):
    """What a person sees in Chromium: the mode over the model's rows, 'N / M delegated' per row."""
    data, page = tmp_path / "bench.json", tmp_path / "bench.html"
    write_json(delegated, str(data))
    render_html(str(data), str(page))
    dom = chromium(tmp_path, page, "--dump-dom").stdout
    assert "face_landmark (delegate mode: each device as the NNAPI delegate" in dom
    minimal = _result(delegated, "sample-minimal")["operations"]["on_device"]
    for device, share in (("sample-minimal", minimal), ("sample-quant", 0), ("all", OPERATORS)):
        row = re.search(rf"<tr data-status=\"ok\"><td>{device}</td>.*?</tr>", dom).group(0)
        assert f"{share} / {OPERATORS} delegated" in row, row


def test_delegate_options_reach_the_delegate(tmp_path):
    document = _bench(tmp_path / "one.json", "--max-partitions", "1", "--feature-level", "29",
                      devices=["sample-minimal"])
    [result] = document["results"]
    assert result["delegation"]["max_partitions"] == 1 and result["delegation"]["feature_level"] == 29
    assert len(result["delegation"]["partitions"]) == 1
    assert "(97 operators; delegate mode, feature level 29, at most 1 partition)\n" in summary(document)


def test_whole_model_restores_the_one_nnapi_model(tmp_path):
    document = _bench(tmp_path / "whole.json", "--whole-model", devices=["sample-minimal", "all"])
    minimal, every = document["results"]
    assert (minimal["mode"], minimal["status"]) == ("whole-model", "unsupported")
    assert "no device can do" in minimal["error"] and minimal["latency_ms"] is None
    assert 0 < minimal["operations"]["on_device"] < minimal["operations"]["total"]
    assert (every["mode"], every["status"]) == ("whole-model", "ok") and "delegation" not in every
    text = summary(document)
    assert "\nface_landmark (97 operations)\n" in text and "delegate" not in text


@pytest.mark.parametrize("flags", [["--burst"], ["--stress"], ["--burst", "--stress"]])
def test_whole_model_flags_need_whole_model_for_a_tflite(capsys, flags):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", str(LANDMARK), *flags])
    assert exit_.value.code == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith(f"nnscope bench: error: {', '.join(flags)} needs --whole-model for a .tflite")


def test_a_built_in_model_is_benchmarked_as_before(tmp_path):
    """No .tflite: no delegate mode, so ``--burst`` is not refused; the rows are whole-model."""
    from nnscope.runtime.cli import bench  # noqa: PLC0415
    args = bench.add_parser(__import__("argparse").ArgumentParser().add_subparsers()).parse_args(
        ["tiny_add", "--burst"])
    assert not bench.delegate_mode(args)
    path = tmp_path / "tiny.json"
    assert main(["bench", "tiny_add", "--device", "nnapi-reference", "--executions", "1",
                 "--json", str(path)]) == 0
    [result] = read_bench(str(path))["results"]
    assert result["mode"] == "whole-model" and "delegation" not in result
