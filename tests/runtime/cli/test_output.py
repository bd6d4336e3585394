"""What the ``nnscope`` commands print (issue 27): ``run --json`` is pure JSON on stdout, a bad
``--trace`` extension shows ``run``'s usage, ``run --help`` documents its counts, the plan line
wraps, and ``devices`` has a header row."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import MODEL_FIXTURES
from tests.support.programs import cpu_kernel_drivers_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FACE = MODEL_FIXTURES / "face_detection_short_range.tflite"


def _nnscope(*args, cwd=REPO, env=None):
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600, env=None if env is None else {**os.environ, **env})


def test_run_json_puts_only_json_on_stdout_and_the_rest_on_stderr():
    done = _nnscope("run", "--json", "--executions", "2", "--warmup", "0", "--device", "nnapi-reference")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)  # the whole of stdout
    assert stats["executions"] == 2 and stats["p50_ms"] > 0
    assert "model mobilenet_v1_0.5_224: 31 operations; plan: step 0: nnapi-reference" in done.stderr
    assert "NNAPI timing summary" in done.stderr


def test_a_bad_trace_extension_shows_the_run_usage(tmp_path):
    done = _nnscope("run", "--trace", tmp_path / "t.xyz")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("usage: nnscope run ")
    assert lines[-1].startswith("nnscope run: error: --trace: cannot tell the trace format of")


def test_run_help_gives_the_counts_and_their_defaults():
    text = " ".join(_nnscope("run", "--help").stdout.split())
    assert "--executions N timed executions, traced as the Benchmark phase (default: 10)" in text
    assert "--warmup N executions before the timed ones, traced as Warmup (default: 1)" in text
    assert "(default: fast)" in text
    assert "Build, compile and execute a model under a trace; print its NNAPI timing." in text


@pytest.mark.parametrize("command", ["run", "bench", "cts"])
def test_help_describes_the_command_in_plain_text(command):
    """The description is the docstring's first sentence without its reStructuredText marks."""
    text = _nnscope(command, "--help").stdout
    assert "``" not in text and f"nnscope {command}``" not in text
    description = text.split("\n\n")[1]
    assert description[:1].isupper(), description


def test_a_long_plan_wraps_one_step_per_piece(tmp_path):
    done = _nnscope("run", FACE, "--whole-model", "--executions", "0", "--warmup", "0", "--no-summary",
                    env=cpu_kernel_drivers_env())  # sample-litert would take the model whole
    assert done.returncode == 0, done.stderr
    plan = done.stdout.split("\ncompilation: ", 1)[0].splitlines()  # the next line
    assert plan[0].startswith("model face_detection_short_range: 90 operations; plan: step 0: ")
    assert len(plan) > 2 and all(len(line) <= 100 for line in plan)
    steps = " ".join(line.strip() for line in plan).split("plan: ", 1)[1].split(", ")
    assert all(step.startswith("step ") and step.endswith(" ops)") for step in steps), steps
    assert [int(step.split()[1].rstrip(":")) for step in steps] == list(range(len(steps)))


def test_devices_prints_a_header_row():
    done = _nnscope("devices")
    header, legend, source, *rows = done.stdout.splitlines()
    assert header.split() == ["device", "type", "version", "level", "float32", "float16", "quant8", "extensions"]
    assert legend.startswith("(float32, float16, quant8: execTime relative to the CPU")
    assert source.startswith("(drivers not started: ")
    cells = {row.split()[0]: row.split() for row in rows}
    assert cells["nnapi-reference"][1:7] == ["CPU", "1.3", "30", "1.00", "1.00", "1.00"]
    assert cells["sample-quant"][4:6] == ["-", "-"]
    assert "com.example.fibonacci" in cells["sample-fibonacci"][7]
    for row in rows:  # every column starts under its header
        assert row[21:].startswith(row.split()[1])


VECTORS = os.path.join(REPO, "runtime", "cts", "vectors", "V1_0")


def test_cts_skips_what_the_chosen_device_cannot_do_and_says_why():
    done = _nnscope("cts", "--device", "sample-quant", f"{VECTORS}/add.json.gz", f"{VECTORS}/add_quant8.json.gz")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[2].split() == ["ADD", "2", "0", "2"]
    assert lines[3].split() == ["total", "2", "0", "2"]
    assert lines[4] == "2 passed, 0 failed, 2 skipped"
    assert lines[5] == "skipped 2: sample-quant does not support ADD"


def test_cts_json_gives_each_skipped_test_its_reason():
    done = _nnscope("cts", "--json", "--device", "sample-float-fast", f"{VECTORS}/add_quant8.json.gz")
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["summary"] == "0 passed, 0 failed, 2 skipped"
    assert {r["message"] for r in report["results"]} == {"sample-float-fast does not support ADD"}


def test_a_failure_that_ran_still_fails_the_cts_run(tmp_path):
    """Skips do not hide failures: a vector whose expected output is wrong fails, exit 1."""
    import gzip  # noqa: PLC0415
    with gzip.open(f"{VECTORS}/add.json.gz", "rt") as handle:
        document = json.load(handle)
    operands = document["tests"][0]["model"]["main"]["operands"]
    output = document["tests"][0]["model"]["main"]["outputIndexes"][0]
    operands[output]["data"] = [value + 1.0 for value in operands[output]["data"]]
    broken = tmp_path / "add_broken.json"
    broken.write_text(json.dumps(document))
    done = _nnscope("cts", "--device", "sample-float-fast", broken, f"{VECTORS}/add_quant8.json.gz")
    assert done.returncode == 1
    assert "1 passed, 1 failed, 2 skipped" in done.stdout


def test_cts_names_a_file_that_is_no_vector(tmp_path):
    path = tmp_path / "notatrace.txt"
    path.write_text("hello\n")
    done = _nnscope("cts", path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr == f"nnscope: error: {path}: not a CTS vector file (Expecting value: line 1 column 1 (char 0))\n"


def test_svg_refuses_another_extension_before_running(tmp_path):
    done = _nnscope("run", "--svg", tmp_path / "p.png")
    assert done.returncode == 2 and not (tmp_path / "p.png").exists()
    assert done.stderr.splitlines()[-1] == (
        f"nnscope run: error: --svg: {tmp_path / 'p.png'} does not end in .svg; for another format "
        "write --dot plan.dot, then e.g. dot -Tpng plan.dot -o plan.png")
