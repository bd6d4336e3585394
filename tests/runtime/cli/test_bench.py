"""``nnscope bench``: real runs of the built-in ``tiny_add`` and the face detector .tflite
(``--whole-model``: one NNAPI model; the delegate mode is test_bench_delegate.py's) on
nnapi-reference, a driver process, a driver that cannot run them and the default plan; the JSON
is checked against the schema and against independent computation (sample statistics, the
nnapi-reference and LiteRT outputs, the compiled plan); bad input is one line and a non-zero
exit."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
from threadpoolctl import threadpool_limits
import pytest

from nnscope.runtime import builtin_models, manager
from nnscope.runtime.__main__ import main
from nnscope.runtime.cli._bench_report import SCHEMA, VERSION, problems, read_bench
from nnscope.runtime.cli._bench_run import litert_available, load_model
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.cts.accuracy import FLOAT32_ATOL
from tests.support.paths import MODEL_FIXTURES, REPO

FACE = MODEL_FIXTURES / "face_detection_short_range.tflite"
DEVICES = ["nnapi-reference", "sample-all", "sample-quant", "all"]
MODELS = ["tiny_add", "face_detection_short_range"]


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    devices = [arg for name in DEVICES for arg in ("--device", name)]
    with one_blas_thread():  # as in every driver process: in-process figures then match theirs
        assert main(["bench", "tiny_add", str(FACE), *devices, "--executions", "3", "--warmup", "1",
                     "--whole-model", "--json", str(path)]) == 0
    return read_bench(str(path))


def one_blas_thread():
    """BLAS computes with one thread in this process, as a driver process does (README,
    "Partitioned runs"): a float32 GEMM split over threads sums in another order."""
    return threadpool_limits(1, user_api="blas")


def _result(document, model, device):
    [found] = [r for r in document["results"] if r["model"] == model and r["device"] == device]
    return found


def test_json_follows_the_schema(document):
    assert problems(document) == []
    assert (document["schema"], document["version"]) == (SCHEMA, VERSION)
    assert document["settings"] == {"executions": 3, "warmup": 1, "duration_s": None,
                                    "burst": False}
    assert [(r["model"], r["device"]) for r in document["results"]] == \
        [(m, d) for m in MODELS for d in DEVICES]
    assert document["stress"] == []


def test_latency_statistics_are_those_of_the_samples(document):
    for result in document["results"]:
        if result["status"] != "ok":
            continue
        latency = result["latency_ms"]
        samples = np.asarray(latency["samples"])
        assert len(samples) == 3 and (samples > 0).all()
        assert latency["median"] == pytest.approx(np.median(samples))
        assert latency["p90"] == pytest.approx(np.percentile(samples, 90))
        assert latency["p99"] == pytest.approx(np.percentile(samples, 99))
        assert latency["mean"] == pytest.approx(samples.mean())
        assert latency["std"] == pytest.approx(samples.std())
        assert result["compile_ms"] > 0


def test_reference_device_against_itself_is_exact(document):
    accuracy = _result(document, "tiny_add", "nnapi-reference")["accuracy"]
    assert accuracy == {"reference": "nnapi-reference", "max_abs_error": 0.0, "mse": 0.0,
                        "relative_error": 0.0, "threshold": 1e-4, "within_tolerance": True}
    driver = _result(document, "tiny_add", "sample-all")["accuracy"]
    assert driver["within_tolerance"] and driver["max_abs_error"] <= FLOAT32_ATOL


def _our_outputs(model):
    compilation = Compilation.for_devices(model.model, [manager.cpu_device()])
    compilation.finish()
    from nnscope.runtime.cli._backend import compute_arrays  # noqa: PLC0415
    with one_blas_thread():
        return compute_arrays(compilation, model.inputs)


def test_tflite_accuracy_is_measured_against_litert(document):
    face = load_model(str(FACE))
    ours = _our_outputs(face)
    if litert_available():
        from tests.runtime.tflite.litert_helpers import litert_run  # noqa: PLC0415
        expected, kind = litert_run(FACE.read_bytes(), face.inputs), "litert"
    else:
        expected, kind = ours, "nnapi-reference"
    diff = np.concatenate([np.abs(np.float64(e) - np.float64(o)).ravel()
                           for e, o in zip(expected, ours)])
    relative = max(np.abs(np.float64(e) - o).max() / np.ptp(np.float64(e)) for e, o in zip(expected, ours))
    for device in ("nnapi-reference", "sample-all"):  # the same kernels: the same figures
        accuracy = _result(document, "face_detection_short_range", device)["accuracy"]
        assert accuracy["reference"] == kind
        assert accuracy["max_abs_error"] == pytest.approx(diff.max(), rel=1e-9, abs=1e-12)
        assert accuracy["mse"] == pytest.approx(np.mean(diff ** 2), rel=1e-9, abs=1e-18)
        assert accuracy["relative_error"] == pytest.approx(relative, rel=1e-9, abs=1e-15)
        # Seen: 4.6e-5 off LiteRT on outputs spanning ~50 (float32 summation order): over CTS's
        # per-element float32 tolerance, 1e-6 of the output range, well within the model's 1e-4
        assert accuracy["threshold"] == 1e-4 and accuracy["within_tolerance"] == (relative <= 1e-4)
        assert accuracy["within_tolerance"]
    whole = _result(document, "face_detection_short_range", "all")["accuracy"]  # sample-litert's kernels
    assert whole["reference"] == kind and whole["within_tolerance"]


def test_operations_share_follows_the_compiled_plan(document):
    for spec, name in (("tiny_add", "tiny_add"), (str(FACE), "face_detection_short_range")):
        model = load_model(spec).model
        compilation = Compilation(model)
        compilation.finish()
        on_drivers = sum(len(s.operations) for s in compilation.plan.steps
                         if s.device.name != "nnapi-reference")
        total = len(model.operations)
        assert _result(document, name, "all")["operations"] == \
            {"total": total, "on_device": on_drivers, "share": on_drivers / total}
        for device in ("nnapi-reference", "sample-all"):
            assert _result(document, name, device)["operations"] == \
                {"total": total, "on_device": total, "share": 1.0}
        supported = sum(manager.get_device("sample-quant").supported_operations(model.to_hal()))
        unsupported = _result(document, name, "sample-quant")
        assert unsupported["status"] == "unsupported" and "no device can do" in unsupported["error"]
        assert unsupported["operations"]["on_device"] == supported
        assert unsupported["latency_ms"] is None and unsupported["accuracy"] is None
    manager.shutdown()


@pytest.mark.parametrize("given, benchmarked", [
    ([str(FACE)], ["face_detection_short_range"]),  # issue 37: the built-ins came too
    (["tiny_add", str(FACE), "tiny_add"], ["tiny_add", "face_detection_short_range"]),
    ([], ["mobilenet_v1_0.5_224", "tiny_add"]),
], ids=["a-file", "named-in-order", "none-named"])
def test_only_the_named_models_are_benchmarked(tmp_path, given, benchmarked):
    path = tmp_path / "bench.json"
    assert main(["bench", *given, "--device", "nnapi-reference", "--executions", "1",
                 "--warmup", "0", "--json", str(path)]) == 0
    assert [r["model"] for r in read_bench(str(path))["results"]] == benchmarked


def test_duration_times_executions_for_that_long(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert main(["bench", "tiny_add", "--device", "nnapi-reference", "--duration", "0.3",
                 "--warmup", "0", "--json", str(path)]) == 0
    document = read_bench(str(path))
    samples = document["results"][0]["latency_ms"]["samples"]
    assert document["settings"]["duration_s"] == 0.3
    assert len(samples) > 3 and 250 < sum(samples) < 600
    out, err = capsys.readouterr()
    assert "\ntiny_add (1 operation)\n  nnapi-reference  ok" in out and "median ms" in out
    assert err == ""  # no progress bar when stdout is not a terminal


@pytest.mark.parametrize("args, message", [
    (["no-such-model.tflite"], "nnscope: error: no such model file 'no-such-model.tflite'"),
    (["tiny_add", "--device", "sample-gpu"],
     "nnscope: error: BAD_DATA: unknown device 'sample-gpu'"),
    (["tiny_add", "--device", "nnapi-reference", "--executions", "1", "--html",
      "/nonexistent-dir/report.html"],
     "nnscope: error: --html /nonexistent-dir/report.html: cannot write there"),
], ids=["missing-model", "unknown-device", "html-fails"])
def test_bad_input_is_one_line_and_exit_1(capsys, args, message):
    assert main(["bench", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


@pytest.mark.parametrize("args", [["--executions", "0"], ["--executions", "many"],
                                  ["--warmup", "-1"], ["--duration", "0"], ["--duration", "nan"],
                                  ["--hang-scale", "-2"]])
def test_bad_numbers_are_usage_errors(capsys, args):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "tiny_add", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("nnscope bench: error: argument")


def test_no_traceback_from_the_command_line():
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "bench", "missing.tflite"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["nnscope: error: no such model file 'missing.tflite' "
                                        f"(built-in models: {', '.join(builtin_models.BUILTIN)})"]


def test_each_run_is_traced_as_an_application():
    from nnscope.runtime.cli._bench_run import Settings, measure, reference_outputs  # noqa: PLC0415
    from nnscope import tracing  # noqa: PLC0415
    model = load_model("tiny_add")
    reference = reference_outputs(model)
    with tracing.TraceSession() as session:
        result = measure(model, "nnapi-reference", Settings(2, 1), reference)
        names = [span.name for span in session.collect().spans()]
    assert result["status"] == "ok"
    assert sorted(name for name in names if name.startswith("[NN_LA_")) == sorted([
        "[NN_LA_PO]tiny_add on nnapi-reference", "[NN_LA_PC]compile", "[NN_LA_PWU]warmup",
        "[NN_LA_PBM]benchmark"])
    # 1 warm-up + 2 timed executions + 1 for the outputs checked against the reference
    assert names.count("[NN_LR_PE]ANeuralNetworksExecution_compute") == 4


def test_html_report_is_the_dashboard_of_the_json(tmp_path):
    """``--html`` renders the run with the dashboards package (a separate process); the page
    carries every model x device of the JSON it was made from."""
    page, data = tmp_path / "bench.html", tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "bench", "tiny_add", "--device",
                           "nnapi-reference", "--device", "sample-all", "--executions", "3",
                           "--json", str(data), "--html", str(page)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    html = page.read_text(encoding="utf-8")
    document = read_bench(str(data))
    assert len(document["results"]) == 2
    for result in document["results"]:
        assert result["device"] in html and repr(result["latency_ms"]["median"]) in html  # its data
    assert "<script" in html and "http://" not in html.split("<script", 1)[1][:200]


def test_the_summary_shows_the_error_and_the_threshold_it_was_held_to(document):
    from nnscope.runtime.cli._bench_report import summary  # noqa: PLC0415
    lines = summary(document).splitlines()
    accuracy = lines.index(next(line for line in lines if line.startswith("Accuracy against")))
    headers = re.split(r"\s{2,}", lines[accuracy + 1].strip())
    assert headers == ["device", "max abs err", "rel err", "accurate", "ops on device"]
    face = lines.index(next(line for line in lines[accuracy:] if line.startswith("face_detection_short_range")))
    assert lines[face].endswith("(90 operations; reference: litert)" if litert_available()
                                else "(90 operations; reference: nnapi-reference)")
    [row] = [line for line in lines[face:] if line.startswith("  sample-all ")]
    assert "yes (<= 0.0001)" in row and row.endswith("90/90")


def _row(table: str, model: str, device: str) -> list[str]:
    """The cells of ``device``'s row under ``model``'s heading line in ``table``."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{model} ("))
    section = lines[start + 1:]
    section = section[:next((i for i, line in enumerate(section) if not line.startswith("  ")), None)]
    [row] = [line.split() for line in section if line.split()[:1] == [device]]
    return row


def test_the_summary_fits_in_100_columns_with_every_figure(document):
    """Issue 37: the table was about 170 columns wide. Every result's figures are still there,
    under its model's heading, in the latency table and in the accuracy table."""
    from nnscope.runtime.cli._bench_report import summary  # noqa: PLC0415
    text = summary(document)
    assert max(map(len, text.splitlines())) <= 100
    latency, accuracy = text.split("\n\nAccuracy against", 1)
    for result in document["results"]:
        model, device = result["model"], result["device"]
        cells = _row(latency, model, device)
        assert cells[1] == result["status"]
        if result["status"] == "ok":
            assert cells[2:] == [f"{result['compile_ms']:.3g}"] + [
                f"{result['latency_ms'][k]:.3g}" for k in ("median", "p90", "p99", "mean", "std")] + [
                str(len(result["latency_ms"]["samples"]))]
        operations = result["operations"]
        assert _row(accuracy, model, device)[-1] == f"{operations['on_device']}/{operations['total']}"


def test_a_wrong_output_fails_the_model_level_criterion():
    """The criterion is relative to the output's range, per output type: a float32 output off
    by 1e-3 of its range fails, 1e-5 passes; a relaxed run allows 1e-2."""
    from nnscope.runtime.cli._bench_run import accuracy  # noqa: PLC0415
    bench_model = load_model("tiny_add")
    want = [np.linspace(-2.0, 2.0, 4, dtype=np.float32).reshape(bench_model.inputs[0].shape)]
    close, off = [want[0] + np.float32(4e-5)], [want[0] + np.float32(4e-3)]
    assert accuracy(bench_model, want, close)["within_tolerance"]
    judged = accuracy(bench_model, want, off)
    assert not judged["within_tolerance"] and judged["relative_error"] == pytest.approx(1e-3, rel=1e-3)
    assert accuracy(bench_model, want, off, relaxed=True)["within_tolerance"]
    nan = [want[0].copy()]
    nan[0].flat[3] = np.nan
    assert not accuracy(bench_model, want, nan)["within_tolerance"]


def test_the_progress_bar_reads_count_and_unit(monkeypatch, capsys):
    from nnscope.runtime.cli import bench  # noqa: PLC0415
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(bench, "SHOW_AFTER_S", 0)
    with bench.progress_bar(None, "bench") as bar:
        bench.progress_label(bar, "tiny_add on sample-all")
        bar.update(5775)
        bar.refresh()
    drawn = capsys.readouterr().err
    assert "tiny_add on sample-all: 5775 executions [" in drawn and ": :" not in drawn
