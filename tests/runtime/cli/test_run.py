"""``nnscope run MODEL --inputs x.npz --outputs y.npz``: the face detector's outputs match
LiteRT's reference, and a small int8 image model LiteRT's outputs, on nnapi-reference, through
a driver process and across all devices; bad input files and operators with no NNAPI form are
one-line errors with exit 1."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from nnscope.runtime.__main__ import main
from nnscope.runtime.cli._backend import read_inputs
from nnscope.runtime.hal.types import Operand, OperandType
from tests.runtime.tflite.int8_image_model import INPUT_SHAPE, int8_image_model
from tests.runtime.tflite.litert_helpers import F32, Tensor, build, litert_run
from tests.runtime.tflite.test_tflite_loader import BUILTIN
from tests.support.paths import MODEL_FIXTURES

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FACE = MODEL_FIXTURES / "face_detection_short_range.tflite"
REFERENCE = np.load(MODEL_FIXTURES / "face_detection_short_range.litert-reference.npz")
QUIET = ["--executions", "0", "--warmup", "0", "--no-summary"]


def _nnscope(*args):
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=600)


def _assert_matches_reference(path, sample):
    with np.load(path) as saved:
        assert sorted(saved.files) == ["output0", "output1"]
        for position in range(2):
            expected = REFERENCE[f"output{sample}_{position}"]
            actual = saved[f"output{position}"]
            assert actual.shape == expected.shape and actual.dtype == np.float32
            scale = float(np.abs(expected).max())
            # Seen: max abs error 5.3e-5 on outputs up to 138 (as in the loader's own test).
            np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5 * scale)


@pytest.mark.parametrize("devices", [["--device", "nnapi-reference"], []],
                         ids=["nnapi-reference", "all-devices"])
def test_outputs_match_the_litert_reference(tmp_path, devices):
    inputs, outputs = tmp_path / "x.npz", tmp_path / "y.npz"
    np.savez(inputs, input=REFERENCE["input2"])  # keyed by the .tflite input tensor's name
    done = _nnscope("run", FACE, "--inputs", inputs, "--outputs", outputs, *devices, *QUIET)
    assert done.returncode == 0, done.stderr
    assert f"wrote {outputs} (output0=regressors, output1=classificators)" in done.stdout
    _assert_matches_reference(outputs, 2)


@pytest.mark.parametrize("form", ["npz_position", "npy"])
def test_inputs_by_position_or_as_npy(tmp_path, capsys, form):
    if form == "npy":
        inputs = tmp_path / "x.npy"
        np.save(inputs, REFERENCE["input0"].astype(np.float64))  # float64 is taken as float32
    else:
        inputs = tmp_path / "x.npz"
        np.savez(inputs, input0=REFERENCE["input0"])
    outputs = tmp_path / "y.npz"
    argv = ["run", str(FACE), "--inputs", str(inputs), "--outputs", str(outputs),
            "--device", "nnapi-reference", "--executions", "1", "--warmup", "0", "--no-summary"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "latency over 1 execution" in capsys.readouterr().out
    _assert_matches_reference(outputs, 0)


def _bad_inputs(tmp_path, kind):
    image = REFERENCE["input0"]
    arrays = {"missing": {"image": image}, "both": {"input": image, "input0": image},
              "unknown": {"input": image, "extra": image}, "shape": {"input": image[:, :64]},
              "dtype": {"input": image.astype(np.int32)}}[kind]
    path = tmp_path / f"{kind}.npz"
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("kind, message", [
    ("missing", "has no 'input0' or 'input' for model input 0"),
    ("both", "has both 'input0' or 'input' for model input 0"),
    ("unknown", "unknown keys ['extra']; the model has 1 inputs"),
    ("shape", "'input': shape [1, 64, 128, 3], the model input is [1, 128, 128, 3]"),
    ("dtype", "'input': int32 values, the model input is float32"),
])
def test_bad_input_files_are_one_line_errors(tmp_path, capsys, kind, message):
    path = _bad_inputs(tmp_path, kind)
    assert main(["run", str(FACE), "--inputs", str(path), *QUIET]) == 1
    err = capsys.readouterr().err
    assert err == f"nnscope: error: {path}: {message}\n"


@pytest.mark.parametrize("what", ["model", "inputs"])
def test_a_missing_file_is_named_in_one_line_before_any_driver_starts(tmp_path, capsys, what):
    missing = tmp_path / "gone"
    argv = [str(missing)] if what == "model" else [str(FACE), "--inputs", str(missing)]
    assert main(["run", *argv, *QUIET]) == 1
    assert capsys.readouterr().err == f"nnscope: error: {missing}: no such {what} file\n"


def test_not_an_array_file_is_one_line_error(tmp_path, capsys):
    path = tmp_path / "x.npz"
    path.write_text("not arrays")
    assert main(["run", str(FACE), "--inputs", str(path), *QUIET]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"nnscope: error: {path}: not an .npz or .npy file")
    assert err.count("\n") == 1


def test_operator_without_nnapi_form_exits_1_naming_it(tmp_path):
    tensors = [Tensor((4,), F32) for _ in range(5)]
    ops = [(BUILTIN.RELU, [0], [1], 0, None), (BUILTIN.RELU6, [1], [2], 0, None),
           (BUILTIN.LOGISTIC, [2], [3], 0, None), ("foo", [3], [4], 0, None)]
    path = tmp_path / "m.tflite"
    path.write_bytes(build(tensors, ops, [0], [4]))
    done = _nnscope("run", path, "--whole-model")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"nnscope: error: {path}: operator 3 (CUSTOM 'foo') has no NNAPI form\n"
    done = _nnscope("run", path)  # delegate mode: LiteRT would run it, but knows no 'foo'
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"nnscope: error: {path}: operator 3 (CUSTOM 'foo') does not run on "
                           f"LiteRT either: Encountered unresolved custom op: foo.\n")


def test_integer_inputs_convert_only_when_they_fit(tmp_path):
    ids = Operand(OperandType.TENSOR_INT32, (3,))
    path = tmp_path / "ids.npz"
    np.savez(path, ids=np.int64([0, 7, 2**31 - 1]))
    (values,) = read_inputs(str(path), [ids], ["ids"])
    assert values.dtype == np.int32 and values.tolist() == [0, 7, 2**31 - 1]
    np.savez(path, ids=np.int64([0, 7, 2**31]))
    with pytest.raises(ValueError, match="'ids': int64 values, the model input is int32"):
        read_inputs(str(path), [ids], ["ids"])


@pytest.mark.parametrize("devices", [["--device", "nnapi-reference"], ["--device", "sample-all"],
                                     []], ids=["nnapi-reference", "sample-all", "all-devices"])
def test_int8_image_model_matches_litert(tmp_path, devices):
    data = int8_image_model()
    model, inputs, outputs = tmp_path / "int8.tflite", tmp_path / "x.npz", tmp_path / "y.npz"
    model.write_bytes(data)
    x = np.random.default_rng(1).uniform(-1, 1, INPUT_SHAPE).astype(np.float32)
    np.savez(inputs, input0=x)
    done = _nnscope("run", model, "--inputs", inputs, "--outputs", outputs, *devices, *QUIET)
    assert done.returncode == 0, done.stderr
    (expected,) = litert_run(data, [x])
    with np.load(outputs) as saved:
        # Softmax probabilities in steps of 1/256: at most one step apart.
        assert np.abs(saved["output0"] - expected).max() <= 1 / 256 + 1e-7


def test_the_dot_of_a_tflite_run_names_its_tensors(tmp_path):
    """``run --dot`` labels the model's inputs and outputs with the .tflite's tensor names."""
    dot = tmp_path / "plan.dot"
    assert main(["run", str(FACE), "--whole-model", "--device", "sample-all", "--executions", "1",
                 "--warmup", "0", "--dot", str(dot), "--no-summary"]) == 0
    text = dot.read_text()
    assert all(f"{name} #" in text for name in ("input", "regressors", "classificators")), text[:2000]
