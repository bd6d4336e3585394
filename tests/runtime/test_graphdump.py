import html
import os
import subprocess
import sys

import pytest

from runtime import Compilation, graph_dump, graphdump, manager
from tests.runtime.helpers import AddOnlyDevice, add_model, chain_model
from tests.support.programs import require_program

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _svg(dot_text: str) -> str:
    dot = require_program("dot")
    done = subprocess.run([dot, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=True)
    assert done.stderr == ""
    assert done.stdout.lstrip().startswith("<?xml") and "</svg>" in done.stdout
    return html.unescape(done.stdout)  # dot writes '-' as &#45;


def test_model_dot_renders_with_kinds_told_apart(tmp_path):
    path = tmp_path / "add.dot"
    text = graph_dump(chain_model(), str(path))
    assert path.read_text() == text
    svg = _svg(text)
    assert "#0 TENSOR_FLOAT32" in svg and "[2,3]" in svg and "#1 MUL" in svg
    assert "#3 INT32 = 0" in svg  # scalar constant shows its value
    assert "invhouse" in text and "shape=house" in text and "shape=note" in text


def test_compilation_dot_clusters_steps_and_marks_crossing_tensors():
    manager.forTest_set_devices([manager.cpu_device(), AddOnlyDevice()])
    try:
        compilation = Compilation(chain_model())
        compilation.finish()
    finally:
        manager.forTest_reset()
    text = graphdump.to_dot(compilation)
    svg = _svg(text)
    for title in ("step 0: fake-add-only", "step 1: nnapi-reference", "step 2: fake-add-only"):
        assert title in svg
    assert svg.count("crosses devices") == 2
    assert text.count("subgraph cluster_step") == 3


def test_graph_dump_writes_to_a_file_object_and_vlog(capsys, cpu_only):
    import io
    buffer = io.StringIO()
    compilation = Compilation(add_model())
    compilation.finish()
    graph_dump(compilation, buffer)
    assert "step 0: nnapi-reference" in buffer.getvalue()
    _svg(buffer.getvalue())


def test_nn_graphdump_env_writes_every_finished_compilation(tmp_path):
    code = ("from tests.runtime.helpers import add_model\n"
            "from runtime import Compilation\n"
            "Compilation(add_model()).finish()\n")
    env = {**os.environ, "NN_GRAPHDUMP": str(tmp_path), "PYTHONPATH": REPO}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=REPO)
    dumps = list(tmp_path.glob("add-*.dot"))
    assert len(dumps) == 1
    assert "step 0: sample-minimal" in _svg(dumps[0].read_text())  # the default devices' best for ADD


def test_graph_dump_without_file_goes_to_vlog_when_no_env_dir():
    import vlog
    graphdump.forTest_set_dump_dir(None)
    model = add_model()
    with vlog.override("model"):
        with pytest.MonkeyPatch.context() as patch:
            lines = []
            patch.setattr(vlog, "log", lambda tag, log_tag, fmt, *args: lines.append((tag, log_tag, args)))
            graph_dump(model)
    assert len(lines) == 1 and lines[0][:2] == ("model", "GraphDump") and "digraph" in lines[0][2][0]
