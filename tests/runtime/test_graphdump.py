"""GraphDump against real Graphviz: ``dot -Tjson`` gives the laid-out graph (bounding box,
clusters and their nodes, the text drawn in every node), which the tests read back."""
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from nnscope.runtime import Compilation, builtin_models, graph_dump, graphdump, manager
from nnscope.runtime._graphdot import INLINE_ELEMENTS
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.registry import LITERT, available, create_driver, litert_available
from nnscope.runtime.hal.types import OperandLifetime as L, OperandType as T, OperationType as Op, is_scalar
from nnscope.runtime.model import Model
from nnscope.runtime.tflite import load_tflite
from tests.runtime.helpers import AddOnlyDevice, add_model, chain_model, conv_model
from tests.support.graphviz import Layout
from tests.support.paths import MODEL_FIXTURES
from tests.support.programs import require_program

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FACE = MODEL_FIXTURES / "face_detection_short_range.tflite"
MAX_WIDTH_PT = 1500
#: The face detector's plan was one column 7,800 pt (10,400 px) tall; wrapped, at most this.
MAX_HEIGHT_PT = 3600


def _plan(model: Model) -> Compilation:
    """The plan ``nnscope run`` makes on the CPU plus every CPU-kernel sample driver
    (``sample-litert`` would take these models whole: no steps or crossings to draw)."""
    manager.forTest_set_devices([CpuDevice(), *(create_driver(name) for name in available()
                                                if name != LITERT)])
    try:
        compilation = Compilation(model)
        compilation.finish()
    finally:
        manager.forTest_reset()
    return compilation


def _face_model() -> Model:
    hal, _, _ = load_tflite(str(FACE))
    return Model.from_hal(hal, name="face_detection_short_range")


@pytest.fixture(scope="module", params=["mobilenet", "face"])
def plan(request):
    model = builtin_models.mobilenet() if request.param == "mobilenet" else _face_model()
    compilation = _plan(model)
    yield compilation, Layout(graphdump.to_dot(compilation))
    compilation.free()


def _constant_kind(graph, index) -> str | None:
    """``scalar``/``small``/``weight`` for constants, None for anything else."""
    operand = graph.operands[index]
    if operand.lifetime not in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
        return None
    if is_scalar(operand.type):
        return "scalar"
    return "small" if operand.element_count() <= INLINE_ELEMENTS else "weight"


def test_plan_names_every_operation_and_device(plan):
    compilation, layout = plan
    graph = compilation.plan.model.main
    texts = set(layout.all_texts())
    for index, op in enumerate(graph.operations):
        assert f"#{index} {op.type.name}" in layout.texts(f"o{index}")
    assert len([n for n in layout.nodes if n.startswith("o")]) == len(graph.operations)
    for step in compilation.plan.steps:
        assert layout.cluster_label(f"cluster_step{step.index}") == f"step {step.index}: {step.device.name}"
        assert any(step.device.name in line for line in layout.title)  # the legend
        cluster = layout.clusters[f"cluster_step{step.index}"]
        assert {layout.fill(f"o{i}") for i in step.operations} == {cluster["color"]}
    colours = {s.device.name: layout.clusters[f"cluster_step{s.index}"]["color"]
               for s in compilation.plan.steps}
    assert len(set(colours.values())) == len(colours)  # one colour per device
    steps = [name for name in layout.clusters if name.startswith("cluster_step")]
    assert len(steps) == len(compilation.plan.steps) and texts


def _columns(layout) -> dict:
    """``{column cluster: its node names}``."""
    return {name: layout.cluster_nodes(name) for name in layout.clusters
            if name.startswith("cluster_column")}


def _assert_wrapped(layout, columns: int) -> None:
    """Issue 37: the face detector was one column 10,000 px tall. It wraps into columns
    (labelled ``column k of n``), each starting at the top, none joined to another by an
    edge (a tensor read in a later column is a connector there), and is at most
    :data:`MAX_HEIGHT_PT` tall."""
    found = _columns(layout)
    assert len(found) == columns, sorted(found)
    assert layout.height <= MAX_HEIGHT_PT and layout.height < 1.5 * layout.width
    assert {layout.cluster_label(name) for name in found} == \
        {f"column {k} of {columns}" for k in range(1, columns + 1)}
    column_of = {node: name for name, nodes in found.items() for node in nodes}
    firsts = [min((n for n in nodes if n.startswith("o")), key=lambda n: int(n[1:]))
              for nodes in found.values()]
    assert len({layout.y(n) for n in firsts}) == 1  # every column starts at the top
    for tail, head in layout.edges:
        if tail in column_of and head in column_of:
            assert column_of[tail] == column_of[head], (tail, head)
    connectors = [n for n in layout.nodes if n.startswith("c")]
    assert connectors and all("(from column " in " ".join(layout.texts(n)) for n in connectors)
    boxes = {layout.cluster_label(name): [float(v) for v in layout.clusters[name]["bb"].split(",")]
             for name in found}
    left_to_right = sorted(boxes, key=lambda label: boxes[label][0])
    assert left_to_right == [f"column {k} of {columns}" for k in range(1, columns + 1)]  # issue 37
    assert all(boxes[a][2] <= boxes[b][0] for a, b in zip(left_to_right, left_to_right[1:]))


def test_a_long_plan_wraps_into_columns_between_steps(plan):
    compilation, layout = plan
    if len(compilation.plan.model.main.operations) < 60:
        pytest.skip("mobilenet's plan is one 28-operation step and three PADs: steps are not split")
    _assert_wrapped(layout, 5)


def test_a_one_step_plan_wraps_into_columns_and_names_the_model_s_tensors():
    """The face detector on sample-all (one step of 90 operations): six columns inside the
    step's cluster; the input and outputs carry their .tflite names."""
    hal, inputs, outputs = load_tflite(str(FACE))
    assert (inputs, outputs) == (["input"], ["regressors", "classificators"])
    model = Model.from_hal(hal, name="face_detection_short_range")
    compilation = Compilation.for_devices(model, [create_driver("sample-all")])
    compilation.finish()
    try:
        text = graphdump.to_dot(compilation, inputs, outputs)
        layout = Layout(text)
        assert graph_dump(compilation, io.StringIO(), inputs, outputs) == text
    finally:
        compilation.free()
    _assert_wrapped(layout, 6)
    assert set(_columns(layout)) <= {c for c in layout.clusters if c != "cluster_step0"}
    labels = {" ".join(layout.texts(f"d{index}")) for index in (*hal.main.input_indexes, *hal.main.output_indexes)}
    assert labels == {"input #0 FLOAT32 [1,128,128,3]", "classificators #182 FLOAT32 [1,896,1]",
                      "regressors #183 FLOAT32 [1,896,16]"}
    column = {node: layout.cluster_label(name) for name, nodes in _columns(layout).items() for node in nodes}
    assert column[f"d{hal.main.input_indexes[0]}"] == "column 1 of 6"  # the input tops the first column
    assert {column[f"d{index}"] for index in hal.main.output_indexes} == {"column 6 of 6"}
    assert graphdump.tensor_names(hal, ["", None], ["a"]) == {hal.main.output_indexes[0]: "a"}


def test_plan_data_flows_down(plan):
    _, layout = plan
    assert layout.edges
    for tail, head in layout.edges:
        assert layout.y(tail) > layout.y(head), (tail, head)  # dot's y grows upwards


#: The parameter names NNAPI uses, as the labels print them.
NAMED = r"(padding (SAME|VALID)|stride \d+x\d+|fuse (NONE|RELU|RELU1|RELU6)|layout N(HWC|CHW)|dilation \d+x\d+|" \
        r"multiplier \d+|filter \d+x\d+|pad \d+,\d+,\d+,\d+|beta \S+|axis \S+|shape \S+)"


def test_constants_are_never_nodes_and_scalars_sit_in_the_label(plan):
    compilation, layout = plan
    graph = compilation.plan.model.main
    tensor_nodes = {int(n[1:]) for n in layout.nodes if n.startswith("d")}
    used = {i for op in graph.operations for i in (*op.inputs, *op.outputs)}
    assert tensor_nodes == {i for i in used if _constant_kind(graph, i) is None
                            and graph.operands[i].lifetime != L.NO_VALUE}
    for index, op in enumerate(graph.operations):
        label = " ".join(layout.texts(f"o{index}"))
        for position, operand in enumerate(op.inputs):
            if _constant_kind(graph, operand) == "scalar":
                assert re.search(rf"\binput{position} \S", label) or re.search(NAMED, label), \
                    (index, position, label)
                if op.type in (Op.CONV_2D, Op.DEPTHWISE_CONV_2D, Op.AVERAGE_POOL_2D, Op.ADD, Op.SOFTMAX):
                    assert f"input{position} " not in label, label  # named, not numbered


def test_scalar_parameters_are_named_as_nnapi_names_them(plan):
    compilation, layout = plan
    graph = compilation.plan.model.main
    first = next(i for i, op in enumerate(graph.operations) if op.type == Op.CONV_2D)
    texts = layout.texts(f"o{first}")
    assert re.fullmatch(r"padding SAME  stride 2x2  fuse (RELU6|NONE)", texts[1]), texts
    assert all(re.fullmatch(rf"{NAMED}(  {NAMED})*", text) for text in texts[1:]
               if not re.match(r"(filter|bias) #", text)), texts


def test_weights_and_constant_tensors_are_named_as_nnapi_names_them(plan):
    """Weight rows and small constant tensors read ``filter #1 [24,5,5,3]``, ``bias #2 [24]``,
    ``paddings [[0,0],...]`` (NeuralNetworks.h's names), never a bare position like ``in1``."""
    compilation, layout = plan
    graph = compilation.plan.model.main
    texts = layout.all_texts()
    assert not [text for text in texts if re.search(r"\bin\d", text)]
    named = {"filter": 0, "bias": 0, "weights": 0, "paddings": 0}
    for index, op in enumerate(graph.operations):
        label = layout.texts(f"o{index}")
        if op.type in (Op.CONV_2D, Op.DEPTHWISE_CONV_2D):
            assert any(t.startswith(f"filter #{op.inputs[1]} ") for t in label), label
            assert re.search(r"(^|  )bias [#\[]", "\n".join(label), re.M), label  # a row, or inline
            named["filter"] += 1
            named["bias"] += 1
        if op.type == Op.FULLY_CONNECTED and _constant_kind(graph, op.inputs[1]) == "weight":
            assert any(t.startswith(f"weights #{op.inputs[1]} ") for t in label), label
            named["weights"] += 1
        if op.type == Op.PAD:
            assert any(t.startswith("paddings [[") for t in label), label
            named["paddings"] += 1
    assert named["filter"] > 5 and named["bias"] > 5, named
    assert named["paddings"] in (0, 11)  # the face detector pads channels 11 times


def test_each_weight_appears_once_in_its_operation(plan):
    compilation, layout = plan
    graph = compilation.plan.model.main
    weights = [i for i in range(len(graph.operands)) if _constant_kind(graph, i) == "weight"]
    assert weights
    for index in weights:
        holders = [name for name in layout.nodes
                   if any(re.match(rf"[a-z][a-z -]*\d* #{index}\b", text) for text in layout.texts(name))]
        first_reader = next(n for n, op in enumerate(graph.operations) if index in op.inputs)
        assert holders == [f"o{first_reader}"], (index, holders)


def test_step_clusters_hold_their_operations_and_internal_tensors(plan):
    compilation, layout = plan
    graph = compilation.plan.model.main
    step_of = {op: step.index for step in compilation.plan.steps for op in step.operations}
    readers = {}
    for op_index, op in enumerate(graph.operations):
        for operand in op.inputs:
            readers.setdefault(operand, set()).add(step_of[op_index])
    internal = 0
    for step in compilation.plan.steps:
        inside = layout.cluster_nodes(f"cluster_step{step.index}")
        assert {f"o{i}" for i in step.operations} <= inside
        for op_index in step.operations:
            for out in graph.operations[op_index].outputs:
                if graph.operands[out].lifetime == L.TEMPORARY_VARIABLE and readers.get(out) == {step.index}:
                    assert f"d{out}" in inside
                    internal += 1
                else:
                    assert f"d{out}" not in inside
    assert internal > 0


def test_tensors_crossing_devices_are_marked(plan):
    compilation, layout = plan
    assert compilation.plan.crossing
    for index in compilation.plan.crossing:
        assert "crosses devices" in layout.texts(f"d{index}")
        assert layout.nodes[f"d{index}"]["color"] == "#d00000"
    marked = [n for n in layout.nodes if "crosses devices" in layout.texts(n)]
    assert len(marked) == len(compilation.plan.crossing)
    assert "tensor crossing devices" in layout.title


def test_model_dump_without_a_plan(tmp_path):
    path = tmp_path / "chain.dot"
    text = graph_dump(chain_model(), str(path))
    assert path.read_text() == text and "cluster" not in text
    layout = Layout(text)
    assert layout.texts("o1")[0] == "#1 MUL" and layout.texts("d0") == ["#0 FLOAT32 [2,3]"]
    assert "input1 [[0.5,0.5,0.5],[0.5,0.5,0.5]]  fuse NONE" in layout.texts("o0")  # small constant, scalar
    assert layout.nodes["d0"]["shape"] == "invhouse" and layout.nodes["d6"]["shape"] == "house"
    assert sorted(layout.nodes) == ["d0", "d1", "d4", "d5", "d6", "o0", "o1", "o2"]


def test_model_dump_lists_conv_weights_and_a_shared_weight_once():
    weights = np.ones((2, 3, 3, 1), np.float32)
    layout = Layout(graphdump.to_dot(conv_model(weights, np.zeros(2, np.float32))))
    assert layout.texts("o0")[-1] == "filter #1 [2,3,3,1]"  # bias [2] is small: in the label
    assert layout.texts("o0")[1:3] == ["bias [0,0]  padding SAME  stride 1x1", "fuse NONE"]
    shared = _shared_weight_model()
    layout = Layout(graphdump.to_dot(shared))
    assert "input1 #1 [4,4]" in layout.texts("o0") and layout.texts("o1") == ["#1 ADD", "input1 #1  fuse NONE"]
    assert ("o0", "o1") in layout.edges  # the dashed edge from the weight's row to its other reader


def _shared_weight_model() -> Model:
    model = Model("shared")
    x = model.add_operand(T.TENSOR_FLOAT32, (4, 4))
    w = model.add_operand(T.TENSOR_FLOAT32, (4, 4))
    act = model.add_operand(T.INT32)
    t, out = (model.add_operand(T.TENSOR_FLOAT32, (4, 4)) for _ in range(2))
    model.set_operand_value(w, np.arange(16, dtype=np.float32).reshape(4, 4))
    model.set_operand_value(act, 0)
    model.add_operation(Op.MUL, [x, w, act], [t])
    model.add_operation(Op.ADD, [t, w, act], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


def test_compilation_dot_clusters_steps_and_marks_crossing_tensors():
    manager.forTest_set_devices([manager.cpu_device(), AddOnlyDevice()])
    try:
        compilation = Compilation(chain_model())
        compilation.finish()
    finally:
        manager.forTest_reset()
    layout = Layout(graphdump.to_dot(compilation))
    labels = [layout.cluster_label(f"cluster_step{i}") for i in range(3)]
    assert labels == ["step 0: fake-add-only", "step 1: nnapi-reference", "step 2: fake-add-only"]
    assert [n for n in layout.nodes if "crosses devices" in layout.texts(n)] == ["d4", "d5"]
    assert layout.title[1:3] == ["fake-add-only (2 steps)", "nnapi-reference (1 step)"]
    assert graphdump.to_dot(Compilation(chain_model())).count("cluster") == 0  # not finished yet


def test_graph_dump_writes_to_a_file_object(cpu_only):
    buffer = io.StringIO()
    compilation = Compilation(add_model())
    compilation.finish()
    graph_dump(compilation, buffer)
    layout = Layout(buffer.getvalue())
    assert layout.cluster_label("cluster_step0") == "step 0: nnapi-reference"


def test_render_svg_writes_svg_and_reports_a_missing_dot(tmp_path, cpu_only, monkeypatch):
    require_program("dot")
    compilation = Compilation(add_model())
    compilation.finish()
    graphdump.render_svg(compilation, tmp_path / "plan.svg")
    assert "</svg>" in (tmp_path / "plan.svg").read_text()
    with pytest.raises(OSError, match="cannot|No such"):
        graphdump.render_svg(compilation, tmp_path / "missing-dir" / "plan.svg")
    monkeypatch.setattr(graphdump, "dot_program", lambda: None)
    with pytest.raises(FileNotFoundError, match="`dot` is not on PATH"):
        graphdump.render_svg(compilation, tmp_path / "other.svg")


def test_nn_graphdump_env_writes_every_finished_compilation(tmp_path):
    code = ("from tests.runtime.helpers import add_model\n"
            "from nnscope.runtime import Compilation\n"
            "Compilation(add_model()).finish()\n")
    env = {**os.environ, "NN_GRAPHDUMP": str(tmp_path), "PYTHONPATH": REPO}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=REPO)
    dumps = list(tmp_path.glob("add-*.dot"))
    assert len(dumps) == 1
    layout = Layout(dumps[0].read_text())
    best = "sample-litert" if litert_available() else "sample-minimal"  # default devices' best for ADD
    assert layout.cluster_label("cluster_step0") == f"step 0: {best}"


def test_graph_dump_without_file_goes_to_vlog_when_no_env_dir():
    from nnscope import vlog
    graphdump.forTest_set_dump_dir(None)
    model = add_model()
    with vlog.override("model"):
        with pytest.MonkeyPatch.context() as patch:
            lines = []
            patch.setattr(vlog, "log", lambda tag, log_tag, fmt, *args: lines.append((tag, log_tag, args)))
            graph_dump(model)
    assert len(lines) == 1 and lines[0][:2] == ("model", "GraphDump") and "digraph" in lines[0][2][0]
