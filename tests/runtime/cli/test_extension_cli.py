"""Vendor extensions at the command line, in real processes: ``nnscope devices`` lists each
device's extensions, ``nnscope run --example fibonacci`` runs the extension model with its trace
summary and a GraphDump naming the extension (read back by Graphviz), ``NN_VLOG=all`` names the
extension in its lines, and a program the allowlist refuses gets one clear line."""
from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest

from tests.support.programs import require_program

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIB_OP = "com.example.fibonacci:FIBONACCI"


def _nnscope(*args, env=None):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("NNSCOPE_") and k not in ("NN_VLOG", "NN_PARTITION")}
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=600, env={**base, **(env or {})})


@pytest.fixture
def allowlisted(tmp_path):
    """Environment of a program whose declared package is in the allowlist."""
    path = tmp_path / "nnapi_extensions_app_allowlist"
    path.write_text("# test\ncom.example.nnscope\n")
    return {"NNSCOPE_EXTENSIONS_ALLOWLIST": str(path), "NNSCOPE_APP_PACKAGE": "com.example.nnscope"}


def test_devices_lists_extensions():
    done = _nnscope("devices", env={"NNSCOPE_DRIVERS": "sample-all,sample-fibonacci"})
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert lines["sample-fibonacci"].endswith(" com.example.fibonacci (types EXAMPLE_INT64 scalar 8 B, "
                                              "EXAMPLE_TENSOR_QUANT64_ASYMM tensor 8 B)")  # the extensions column
    assert "com.example" not in lines["sample-all"] and "com.example" not in lines["nnapi-reference"]
    described = json.loads(_nnscope("devices", "--json",
                                    env={"NNSCOPE_DRIVERS": "sample-fibonacci"}).stdout)
    assert [d["extensions"] for d in described] == [[], [{"name": "com.example.fibonacci", "operandTypes": [
        {"type": 0, "isTensor": False, "byteSize": 8}, {"type": 1, "isTensor": True, "byteSize": 8}]}]]


def test_run_example_fibonacci_with_summary_graphdump_and_vlog(tmp_path, allowlisted):
    dot_path = tmp_path / "fib.dot"
    done = _nnscope("run", "--example", "fibonacci", "--executions", "2", "--warmup", "1",
                    "--dot", dot_path, env={**allowlisted, "NN_VLOG": "all"})
    assert done.returncode == 0, done.stderr
    assert "model fibonacci_mixed: 3 operations" in done.stdout
    assert "sample-fibonacci (1 ops)" in done.stdout
    assert "NNAPI timing summary" in done.stdout and "latency over 2 executions" in done.stdout
    log = done.stderr
    assert f"ModelBuilder: model fibonacci_mixed operations: ADD x1, MUL x1, {FIB_OP} x1" in log
    assert re.search(r"findBestDeviceForEachOperation: .*sample-fibonacci takes 1 #\d", log)
    assert re.search(rf"findBestDeviceForEachOperation: sample-all can't do 1 of 3 operations: {FIB_OP} #\d", log)
    assert f"can't do operation {FIB_OP}" not in log  # per operation: NN_VLOG=partition
    assert f"FibonacciDriver: operation 0 ({FIB_OP}) n=10" in log
    dot_text = dot_path.read_text()
    assert FIB_OP in dot_text and "sample-fibonacci" in dot_text
    laid_out = subprocess.run([require_program("dot"), "-Tjson"], input=dot_text,
                              capture_output=True, text=True, check=True)
    texts = [op["text"] for obj in json.loads(laid_out.stdout)["objects"]
             for op in obj.get("_ldraw_", []) if op["op"] == "T"]
    assert any(FIB_OP in text for text in texts)


def test_run_quant64_example_graphdump_names_extension_types(tmp_path, allowlisted):
    dot_path = tmp_path / "q.dot"
    done = _nnscope("run", "--example", "fibonacci-quant64", "--executions", "1", "--warmup", "0",
                    "--no-summary", "--dot", dot_path, env=allowlisted)
    assert done.returncode == 0, done.stderr
    text = dot_path.read_text()
    assert "com.example.fibonacci:EXAMPLE_INT64" in text
    assert "com.example.fibonacci:EXAMPLE_TENSOR_QUANT64_ASYMM" in text
    assert "extension data 16 B" in text


def test_refused_program_gets_one_line(tmp_path):
    done = _nnscope("run", "--example", "fibonacci",
                    env={"NNSCOPE_EXTENSIONS_ALLOWLIST": str(tmp_path / "missing")})
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "nnapi_extensions_app_allowlist" in lines[0] and "BAD_DATA" in lines[0]
    assert "Traceback" not in done.stderr


def test_example_and_model_file_together_is_a_usage_error():
    done = _nnscope("run", "model.tflite", "--example", "fibonacci")
    assert done.returncode == 2 and "not both" in done.stderr
