"""``nnscope delegation`` and ``nnscope run`` in delegate mode (the default for a .tflite):
the report's rows, summary and JSON; the partition limit; outputs that agree with LiteRT;
whole-model flags refused without ``--whole-model``; bad files in one line."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from nnscope.runtime.__main__ import main
from nnscope.runtime.delegate.graph import CPU_FILL
from tests.support.paths import MODEL_FIXTURES, REPO
from tests.support.programs import needs_dot, require_program
from tests.support.tflite_models import conv_gelu_conv, litert_outputs, relu_chains

pytest.importorskip("ai_edge_litert")
LANDMARK = MODEL_FIXTURES / "face_landmark.tflite"


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(conv_gelu_conv())
    return path


def test_the_report_gives_each_operator_its_place_and_the_cpu_time(model, capsys):
    assert main(["delegation", str(model), "--device", "nnapi-reference", "--executions", "3",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["operators"]
    assert [(r["operator"], r["partition"], r["category"]) for r in rows] == [
        ("CONV_2D", 0, None), ("GELU", None, "UNSUPPORTED_OPERATOR"), ("CONV_2D", 1, None)]
    assert rows[0]["devices"] == ["nnapi-reference"] and rows[1]["time_ms"] > 0
    assert [p["median_ms"] > 0 for p in data["partitions"]] == [True, True]
    assert re.fullmatch(r"2 of 3 operators delegated, in 2 partitions, \d+\.\d % of the time in NNAPI",
                        data["summary"])
    assert (data["feature_level"], data["max_partitions"], data["executions"]) == (30, 3, 3)


def test_the_table_ends_with_the_summary(model, capsys):
    assert main(["delegation", str(model), "--device", "nnapi-reference", "--executions", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["index", "operator", "where", "time", "ms"]
    assert lines[2].split()[:3] == ["1", "GELU", "CPU:"] and "unsupported operator" in lines[2]
    assert lines[-1] == "2 of 3 operators delegated, in 2 partitions"


@pytest.mark.parametrize("limit, partitions", [("1", 1), ("3", 3), ("0", 4)])
def test_the_limit_option_sets_the_partitions(tmp_path, capsys, limit, partitions):
    path = tmp_path / "chains.tflite"
    path.write_bytes(relu_chains())
    assert main(["delegation", str(path), "--device", "nnapi-reference", "--executions", "0",
                 "--max-partitions", limit, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["partitions"]) == partitions


def test_a_feature_level_outside_27_to_30_is_a_usage_error(model, capsys):
    with pytest.raises(SystemExit) as raised:
        main(["delegation", str(model), "--feature-level", "31"])
    assert raised.value.code == 2


def test_run_defaults_to_delegate_mode_and_agrees_with_litert(model, tmp_path, capsys):
    x = np.random.default_rng(3).standard_normal((1, 16, 16, 3)).astype(np.float32)
    np.savez(tmp_path / "x.npz", input=x)
    assert main(["run", str(model), "--device", "nnapi-reference", "--inputs", str(tmp_path / "x.npz"),
                 "--outputs", str(tmp_path / "y.npz"), "--executions", "2", "--warmup", "0",
                 "--per-op"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    wrapped = [lines[0]] + [line for line in lines[1:3] if line.startswith("    ")][:1]
    head = " ".join(" ".join(wrapped).split())  # the summary line, unwrapped
    assert head.startswith("delegate mode (feature level 30, at most 3 partitions): 2 of 3 "
                           "operators delegated, in 2 partitions, ")
    assert head.endswith("; partition 0 on nnapi-reference; partition 1 on nnapi-reference")
    assert "GELU" in out and "NNAPI timing summary" in out
    with np.load(tmp_path / "y.npz") as saved:
        expected = litert_outputs(conv_gelu_conv(), [x])[0]
        np.testing.assert_allclose(saved["output0"], expected, rtol=0,
                                   atol=1e-5 * float(np.abs(expected).max()))


def test_burst_needs_whole_model(model):
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "run", str(model), "--burst"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith("nnscope run: error: --burst needs --whole-model")


def _dot_layout(path) -> dict:
    """``dot -Tjson`` of a written .dot: its objects by name (the file must parse)."""
    done = subprocess.run([require_program("dot"), "-Tjson", str(path)], capture_output=True,
                          text=True, check=True)
    return {o["name"]: o for o in json.loads(done.stdout).get("objects", [])}


@needs_dot
def test_run_dot_and_svg_draw_the_tflite_graph_coloured_by_where_it_ran(tmp_path, capsys):
    dot, svg = tmp_path / "m.dot", tmp_path / "m.svg"
    assert main(["run", str(LANDMARK), "--feature-level", "28", "--executions", "1", "--warmup", "0",
                 "--no-summary", "--json", "--dot", str(dot), "--svg", str(svg)]) == 0
    rows = json.loads(capsys.readouterr().out)["delegation"]
    objects = _dot_layout(dot)
    assert len([n for n in objects if re.fullmatch(r"o\d+", n)]) == rows["total"] == 97
    for p in rows["partitions"]:
        assert objects[f"cluster_partition{p['partition']}"]["label"] == \
            f"partition {p['partition']} ({', '.join(p['devices'])})"
    on_cpu = [r["index"] for r in rows["operators"] if r["partition"] is None]
    assert {objects[f"o{i}"]["fillcolor"] for i in on_cpu} == {CPU_FILL}
    assert ET.parse(svg).getroot().tag.endswith("svg")


@needs_dot
def test_delegation_dot_and_svg_keep_stdout_json(model, tmp_path, capsys):
    dot, svg = tmp_path / "m.dot", tmp_path / "m.svg"
    assert main(["delegation", str(model), "--device", "nnapi-reference", "--executions", "0",
                 "--json", "--dot", str(dot), "--svg", str(svg)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["delegated"] == 2 and err.splitlines() == [f"wrote {dot}", f"wrote {svg}"]
    objects = _dot_layout(dot)
    assert objects["o1"]["label"] == "#1 GELU\\nCPU: unsupported operator"
    assert objects["cluster_partition1"]["label"] == "partition 1 (nnapi-reference)"
    assert ET.parse(svg).getroot().tag.endswith("svg")


def test_delegation_checks_its_drawing_paths_before_running(model, tmp_path):
    for extra, code, message in ((["--svg", str(tmp_path / "m.png")], 2, "nnscope delegation: error: --svg: "),
                                 (["--dot", str(tmp_path / "no" / "m.dot")], 1, "nnscope: error: --dot ")):
        done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "delegation", str(model), *extra],
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert (done.returncode, done.stdout) == (code, "")
        assert done.stderr.splitlines()[-1].startswith(message), done.stderr


def test_a_truncated_model_is_one_line(tmp_path):
    path = tmp_path / "cut.tflite"
    path.write_bytes(conv_gelu_conv()[:300])
    for command in ("delegation", "run"):
        done = subprocess.run([sys.executable, "-m", "nnscope.runtime", command, str(path)],
                              capture_output=True, text=True, cwd=REPO, timeout=300)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"nnscope: error: {path}: ")
