"""The delegated TFLite graph against real Graphviz (``dot -Tjson``): each operator filled with
its partition's colour or the CPU's, partition clusters naming their devices, CPU operators
saying why, constant-only operators marked, tensors as named edges, long models in columns."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from nnscope.runtime.delegate.delegation import decide
from nnscope.runtime.delegate.graph import CPU_FILL, CROSSING, PALETTE, to_dot, write_dot, write_svg
from nnscope.runtime.delegate.report import report
from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph
from nnscope.runtime.tflite._reader import read_graph
from tests.support.graphviz import Layout
from tests.support.paths import MODEL_FIXTURES
from tests.support.programs import needs_dot

pytestmark = needs_dot
DEVICES = [["sample-all", "nnapi-reference"], [], ["nnapi-reference"]]


def relu_gelu_relu() -> bytes:
    g = FlatbufferGraph()
    x, y, z, w = (g.tensor(n, (1, 4), "FLOAT32") for n in ("input", "relu_out", "gelu_out", "output"))
    g.operator("RELU", [x], [y]); g.operator("GELU", [y], [z]); g.operator("RELU", [z], [w])
    g.inputs, g.outputs = [x], [w]
    return g.serialize()


def _layout(data: bytes, devices, name: str = "model", **options) -> tuple[dict, Layout]:
    delegation = decide(data, **options)
    rows = report(delegation, devices)
    return rows, Layout(to_dot(read_graph(data), delegation, rows, name))


def test_each_operator_is_filled_with_its_partition_or_the_cpu_colour():
    _, layout = _layout(relu_gelu_relu(), DEVICES)
    fills = {name: layout.nodes[name]["fillcolor"] for name in ("o0", "o1", "o2")}
    assert fills == {"o0": PALETTE[0][0], "o1": CPU_FILL, "o2": PALETTE[1][0]}
    assert layout.cluster_nodes("cluster_partition0") == {"o0"}
    assert layout.cluster_nodes("cluster_partition1") == {"o2"}
    assert layout.clusters["cluster_partition0"]["label"] == "partition 0 (sample-all, nnapi-reference)"
    assert layout.clusters["cluster_partition1"]["label"] == "partition 1 (nnapi-reference)"


def test_a_cpu_operator_says_why_in_its_label_and_tooltip():
    _, layout = _layout(relu_gelu_relu(), DEVICES)
    gelu = layout.nodes["o1"]
    assert gelu["label"] == "#1 GELU\\nCPU: unsupported operator"
    assert gelu["tooltip"] == "CPU: unsupported operator: GELU has no NNAPI form"
    assert layout.nodes["o0"]["label"] == "#0 RELU"


def test_tensors_are_edges_named_by_the_model_and_crossings_are_red():
    _, layout = _layout(relu_gelu_relu(), DEVICES)
    labels = {pair: edge["label"] for pair, edge in layout.edges.items()}
    assert labels == {("d0", "o0"): "input", ("o0", "o1"): "relu_out", ("o1", "o2"): "gelu_out",
                      ("o2", "d3"): "output"}
    red = {pair for pair, edge in layout.edges.items() if edge.get("color") == CROSSING}
    assert red == {("o0", "o1"), ("o1", "o2")}
    assert layout.nodes["d0"]["shape"] == "invhouse" and layout.nodes["d3"]["shape"] == "house"
    assert layout.nodes["d0"]["label"] == "input #0 FLOAT32 [1,4]"


def with_constant_only_operators() -> bytes:
    """DEQUANTIZE of float16 weights feeding a MUL (delegated) and a custom operator (CPU)."""
    g = FlatbufferGraph()
    half = np.arange(4, dtype=np.float16).reshape(1, 4).tobytes()
    x = g.tensor("x", (1, 4), "FLOAT32")
    w16, v16 = g.tensor("w16", (1, 4), "FLOAT16", half), g.tensor("v16", (1, 4), "FLOAT16", half)
    w, v, y, z = (g.tensor(n, (1, 4), "FLOAT32") for n in ("w", "v", "y", "z"))
    g.operator("DEQUANTIZE", [w16], [w]); g.operator("MUL", [x, w], [y], "MulOptions")
    g.operator("DEQUANTIZE", [v16], [v]); g.custom("MyOp", [y, v], [z])
    g.inputs, g.outputs = [x], [z]
    return g.serialize()


def test_constant_only_operators_are_dashed_and_marked_as_the_report_marks_them():
    rows, layout = _layout(with_constant_only_operators(), [["nnapi-reference"], []])
    report_rows = {row["index"]: row for row in rows["operators"]}
    assert report_rows[2]["reason"] == "constant-only: folded into the CPU operator it feeds"
    into_partition, into_cpu = layout.nodes["o0"], layout.nodes["o2"]
    assert into_partition["fillcolor"] == PALETTE[0][0] and into_cpu["fillcolor"] == CPU_FILL
    assert "dashed" in into_partition["style"] and "dashed" in into_cpu["style"]
    assert "dashed" not in layout.nodes["o1"]["style"]
    assert into_cpu["label"].startswith("#2 DEQUANTIZE\\nCPU: constant-only")
    assert into_cpu["tooltip"].startswith("CPU: constant-only: folded into the CPU operator it feeds")
    if report_rows[0]["note"]:  # the loader folds it into a constant: the report's note
        assert f"[{report_rows[0]['note']}]" in into_partition["tooltip"]
    assert layout.nodes["o3"]["label"] == "#3 CUSTOM 'MyOp'\\nCPU: unsupported operator"
    assert layout.cluster_nodes("cluster_partition0") == {"o0", "o1"}


@pytest.mark.parametrize("model, level", [("face_detection_short_range", 27), ("face_landmark", 28)])
def test_a_long_model_wraps_into_columns_left_to_right_with_every_operator_coloured(model, level):
    data = (MODEL_FIXTURES / f"{model}.tflite").read_bytes()
    delegation = decide(data, feature_level=level)
    devices = [["sample-litert"] for _ in delegation.steps]
    rows = report(delegation, devices)
    layout = Layout(to_dot(read_graph(data), delegation, rows, "face"))
    assert layout.width < 4000 and layout.height < 3000, (layout.width, layout.height)
    columns = sorted((c for c in layout.clusters if c.startswith("cluster_column")),
                     key=lambda c: int(c.removeprefix("cluster_column")))
    assert len(columns) >= 4
    left = [min(layout.x(n) for n in layout.cluster_nodes(c)) for c in columns]
    assert left == sorted(left), "columns stand left to right in order"
    for row in rows["operators"]:
        place = row["partition"]
        expected = CPU_FILL if place is None else PALETTE[place % len(PALETTE)][0]
        assert layout.nodes[f"o{row['index']}"]["fillcolor"] == expected, row
    for p in rows["partitions"]:
        assert layout.clusters[f"cluster_partition{p['partition']}"]["label"] == \
            f"partition {p['partition']} (sample-litert)"


def test_written_dot_and_svg_read_back(tmp_path):
    data = relu_gelu_relu()
    delegation = decide(data)
    rows = report(delegation, DEVICES)
    text = write_dot(read_graph(data), delegation, rows, tmp_path / "m.dot", "m")
    assert (tmp_path / "m.dot").read_text() == text and Layout(text).nodes["o1"]["fillcolor"] == CPU_FILL
    write_svg(read_graph(data), delegation, rows, tmp_path / "m.svg", "m")
    svg = ET.parse(tmp_path / "m.svg").getroot()
    fills = {e.get("fill") for e in svg.iter() if e.get("fill")}
    assert {PALETTE[0][0], PALETTE[1][0], CPU_FILL} <= fills


def test_svg_without_graphviz_is_one_clear_error(tmp_path, monkeypatch):
    data = relu_gelu_relu()
    delegation = decide(data)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="Graphviz's `dot` is not on PATH"):
        write_svg(read_graph(data), delegation, report(delegation, DEVICES), tmp_path / "m.svg")
