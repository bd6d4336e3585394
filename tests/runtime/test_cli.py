import html
import json
import re
import os
import subprocess
import sys

import pytest

from nnscope import parse_systrace
from nnscope.runtime.__main__ import main
from nnscope.runtime.drivers.registry import LITERT, litert_available
from tests.support.paths import CTS_FIXTURES
from tests.support.programs import cpu_kernel_drivers_env, require_program

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The CPU-kernel sample drivers: with them the built-in model splits into steps across devices
#: (sample-litert, when installed, takes it whole; its own tests are tests/runtime/drivers/).
CPU_DRIVERS = cpu_kernel_drivers_env()
LITERT_LISTED = ", sample-litert" if litert_available() else ""


def _nnscope(*args, env=None):
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})}, timeout=600)


@pytest.fixture(scope="module")
def run_output(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    paths = {"systrace": out / "run.html", "trace": out / "run.json",
             "perfetto": out / "run.perfetto-trace", "dot": out / "plan.dot"}
    done = _nnscope("run", "--executions", "2", "--warmup", "1", "--systrace", str(paths["systrace"]),
                    "--trace", str(paths["trace"]), "--perfetto", str(paths["perfetto"]),
                    "--dot", str(paths["dot"]), env={"NN_VLOG": "driver", **CPU_DRIVERS})
    return done, paths


def test_run_prints_timing_summary_and_latencies(run_output):
    done, paths = run_output
    assert done.returncode == 0, done.stderr
    assert "NNAPI timing summary" in done.stdout
    assert "[NN_LA_PO]mobilenet_v1_0.5_224" in done.stdout
    assert "latency over 2 executions (after 1 warm-up, not counted): p50" in done.stdout and "p99" in done.stdout
    for path in paths.values():
        assert path.stat().st_size > 0


def test_run_trace_has_application_runtime_ipc_and_driver_rows(run_output):
    """All devices by default: the built-in float model runs in sample driver processes."""
    done, paths = run_output
    [summary] = parse_systrace.summarize(str(paths["systrace"]))
    assert summary.complete
    overall = summary.times["PO"]
    assert overall["LA"] > 0 and overall["LR"] > 0 and overall["LI"] > 0 and overall["LD"] > 0
    assert summary.times["PE"]["LI"] > 0 and summary.times["PE"]["LD"] > 0
    assert summary.times["PC"]["LD"] > 0  # getSupportedOperations / prepareModel in the drivers
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.split()[:1] and
            line.split()[0] in ("Application", "Runtime", "IPC", "Driver")}
    assert set(rows) == {"Application", "Runtime", "IPC", "Driver"}
    assert "plan: step 0: sample-minimal" in done.stdout
    assert summary.times["PP"]["LR"] > 0 and summary.times["PC"]["LR"] > 0
    assert summary.execution_counts["PBM"] == 2 and summary.execution_counts["PWU"] == 1
    names = {event["name"] for event in json.loads(paths["trace"].read_text())["traceEvents"]
             if "name" in event}
    for expected in ("[NN_LR_PP]ANeuralNetworksModel_addOperand", "[NN_LR_PC]ANeuralNetworksCompilation_finish",
                     "[NN_LR_PE]ANeuralNetworksExecution_startCompute", "[NN_LR_PE]ANeuralNetworksEvent_wait",
                     "[NN_LR_PIO]ANeuralNetworksExecution_setInput", "[NN_LR_PE]StepExecutor::compute",
                     "[NN_LR_PC]ModelBuilder::partitionTheWork", "[NN_LA_PBM]benchmark"):
        assert expected in names


def test_run_systrace_reads_in_the_parse_systrace_cli_with_all_layers(run_output):
    _, paths = run_output
    done = subprocess.run([sys.executable, "-m", "nnscope.parse_systrace", str(paths["systrace"])],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()
            if line.split()[:1] and line.split()[0] in ("Application", "Runtime", "IPC", "Driver")}
    assert set(rows) == {"Application", "Runtime", "IPC", "Driver"}
    for layer in ("Runtime", "IPC", "Driver"):
        assert float(rows[layer][-1]) > 0, (layer, rows[layer])  # the Total column


def test_nn_vlog_driver_shows_driver_process_messages(run_output):
    done, _ = run_output
    lines = [line for line in done.stderr.splitlines() if " I SampleDriver" in line]
    assert any("prepareModel(sample-minimal)" in line for line in lines)
    assert any("executeSynchronously(sample-float-fast)" in line for line in lines)
    pids = {int(line.split()[2]) for line in lines}
    assert len(pids) >= 2  # logged by the driver processes themselves


def test_run_dot_renders(run_output):
    _, paths = run_output
    dot = require_program("dot")
    svg = subprocess.run([dot, "-Tsvg", str(paths["dot"])], capture_output=True, text=True, check=True)
    svg.stdout = html.unescape(svg.stdout)  # dot writes '-' as &#45;
    assert "step 0: sample-minimal" in svg.stdout and "DEPTHWISE_CONV_2D" in svg.stdout
    assert "crosses devices" in svg.stdout


def test_run_svg_renders_the_plan(tmp_path):
    require_program("dot")
    path = tmp_path / "plan.svg"
    done = _nnscope("run", "--executions", "1", "--warmup", "0", "--no-summary", "--svg", str(path),
                    env=CPU_DRIVERS)
    assert done.returncode == 0, done.stderr
    assert f"wrote {path}" in done.stdout
    svg = html.unescape(path.read_text())
    assert svg.rstrip().endswith("</svg>")
    for text in ("step 0: sample-minimal", "step 1: sample-float-fast", "#0 CONV_2D", "#30 SOFTMAX"):
        assert text in svg


def test_run_svg_without_dot_is_one_line_and_exit_1(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    path = tmp_path / "plan.svg"
    done = _nnscope("run", "--svg", str(path), env={"PATH": str(empty)})
    assert done.returncode == 1 and done.stdout == ""  # refused before running anything
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("nnscope: error: ")
    assert "`dot` is not on PATH" in done.stderr and "Traceback" not in done.stderr
    assert not path.exists()


def test_devices_json():
    done = _nnscope("devices", "--json")
    assert done.returncode == 0
    device, *drivers = json.loads(done.stdout)
    assert device["name"] == "nnapi-reference" and device["type"] == "CPU"
    assert device["operandPerformance"]["TENSOR_FLOAT32"]["execTime"] == 1.0
    by_name = {d["name"]: d for d in drivers}
    assert list(by_name) == ["sample-all", "sample-float-fast", "sample-float-slow", "sample-quant",
                             "sample-minimal", "sample-fibonacci", "sample-oem"] + \
        ([LITERT] if litert_available() else [])
    assert by_name["sample-float-fast"]["operandPerformance"]["TENSOR_FLOAT32"]["execTime"] == 0.8
    assert "TENSOR_QUANT8_ASYMM" not in by_name["sample-float-fast"]["operandPerformance"]
    assert by_name["sample-quant"]["operandPerformance"]["TENSOR_QUANT8_ASYMM"]["execTime"] == 50.0
    assert all(d["version"] == "nnscope-sample-1.3" for d in drivers if not d["extensions"]
               and d["name"] not in ("sample-oem", LITERT))
    assert main(["devices"]) == 0


def test_cts_sample_through_the_public_api(capsys):
    files = [str(CTS_FIXTURES / "V1_0" / name) for name in ("add.json.gz", "conv_float.json.gz",
                                                              "depthwise_conv2d_float.json.gz")]
    assert main(["cts", *files]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].endswith("0 failed, 0 skipped") and int(lines[-1].split()[0]) > 5
    assert any(line.startswith("CONV_2D") for line in lines)


def test_bad_usage_exits_2_without_traceback():
    done = _nnscope("run", "--executions", "-3")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    done = _nnscope("run", "--trace", "out.unknown")
    assert done.returncode == 2 and "cannot tell the trace format" in done.stderr


def test_runtime_errors_exit_1_with_one_line(tmp_path):
    done = _nnscope("run", "--device", "no-such-device", "--executions", "1")
    assert done.returncode == 1
    assert done.stderr.strip() == ("nnscope: error: BAD_DATA: unknown device 'no-such-device'; "
                                   "valid: nnapi-reference, sample-all, sample-float-fast, "
                                   "sample-float-slow, sample-quant, sample-minimal, sample-fibonacci, "
                                   "sample-oem" + LITERT_LISTED)
    done = _nnscope("run", str(tmp_path / "missing.tflite"))
    assert done.returncode == 1 and done.stderr.startswith("nnscope: error:")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_vlog_all_shows_every_runtime_tag():
    code = ("import numpy as np\n"
            "from tests.runtime.helpers import add_model, run\n"
            "x = np.ones((1, 4), np.float32)\n"
            "run(add_model(), x, x)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "NN_VLOG": "all", **CPU_DRIVERS}, timeout=120)
    assert done.returncode == 0, done.stderr
    for pattern in (r" I ModelBuilder\s*: model add finished: 4 operands, 1 operations",
                    r" I Manager\s*: device nnapi-reference: type CPU",
                    r" I ExecutionPlan\s*: simple plan, 1 step\(s\) on sample-minimal",
                    r" I ExecutionBuilder\s*: request: 2 inputs, 1 outputs",
                    r" I SampleDriver\s*: prepareModel\(sample-minimal\): model 1, 1 operations",
                    r" I SampleDriver\s*: executeSynchronously\(sample-minimal\)"):
        assert re.search(pattern, done.stderr), pattern
    driver_pids = {int(line.split()[2]) for line in done.stderr.splitlines() if " I SampleDriver" in line}
    assert driver_pids and done.stderr.count(" I ModelBuilder") >= 1  # logged in the driver processes


def test_run_a_tflite_model(capsys):
    from tests.support.paths import MODEL_FIXTURES
    path = MODEL_FIXTURES / "face_detection_short_range.tflite"
    assert main(["run", str(path), "--executions", "1", "--warmup", "0", "--no-summary"]) == 0
    out = capsys.readouterr().out  # by default as the NNAPI delegate runs it
    assert out.startswith("delegate mode (feature level") and "latency over 1 execution" in out
    assert main(["run", str(path), "--whole-model", "--executions", "1", "--warmup", "0", "--no-summary"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("model face_detection_short_range:") and "latency over 1 execution" in out
