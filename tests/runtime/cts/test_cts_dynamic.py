"""``nnscope cts --dynamic-output-shapes`` on a representative subset: AOSP's DynamicOutputShapeTest
variant (outputs declared with dimensions 0, rank kept) in-process, through a real ``sample-all``
driver process, and partitioned across driver processes. The full set is the CLI's job."""
from __future__ import annotations

import pytest

from nnscope.runtime import Compilation, Model, manager
from nnscope.runtime.__main__ import main as cli_main
from nnscope.runtime.cli.cts import make_backend
from nnscope.runtime.cts import harness, loader
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.hal.types import HalModel

#: Outputs sized only at execution: larger than the 1024-element first guess (resize, conv,
#: transpose conv), zero-sized (BOX_WITH_NMS_LIMIT), data-dependent (detection), several outputs
#: (SPLIT, TOPK_V2), BOOL8, float16, quant8, relaxed; a RANK vector and expected failures (run in
#: their static form, as AOSP has no dynamic variant for them).
SUBSET = ("V1_0/add.json.gz", "V1_0/conv_float_large.json.gz", "V1_1/add_relaxed.json.gz",
          "V1_2/resize_bilinear_v1_2.json.gz", "V1_2/transpose_conv2d_large.json.gz",
          "V1_2/box_with_nms_limit_linear.json.gz", "V1_2/generate_proposals.json.gz",
          "V1_2/split_quant8_2.json.gz", "V1_2/topk_v2.json.gz", "V1_2/less.json.gz",
          "V1_2/mean_float16.json.gz", "V1_2/quantize.json.gz", "V1_3/rank.json.gz",
          "V1_2/strided_slice_invalid.json.gz", "V1_3_cts_only/concat_invalid_rank.json.gz")
PATHS = [loader.CTS_ROOT / name for name in SUBSET]


def _output_dims(model: HalModel) -> tuple[tuple[int, ...], ...]:
    return tuple(model.main.operands[i].dimensions for i in model.main.output_indexes)


def test_outputs_are_unknown_with_rank_kept_and_aosp_exclusions_run_static():
    seen: list[HalModel] = []

    def spy(model, inputs):
        seen.append(model)
        return harness.cpu_backend(model, inputs)

    paths = [loader.CTS_ROOT / "V1_2/split_quant8_2.json.gz", loader.CTS_ROOT / "V1_3/rank.json.gz",
             loader.CTS_ROOT / "V1_2/strided_slice_invalid.json.gz"]
    report = harness.run_vectors(paths, spy, unknown_output_shapes=True)
    tests = [t for p in paths for t in loader.load_file(p)]
    assert report.ok and len(seen) == len(tests) == len(report.results)
    for test, model, result in zip(tests, seen, report.results):
        static, dims = _output_dims(test.model), _output_dims(model)
        if harness.has_dynamic_variant(test):
            assert dims == tuple((0,) * len(d) for d in static) and all(static)
            assert not result.message.startswith(harness.STATIC_FORM)
        else:
            assert dims == static and result.message.startswith(harness.STATIC_FORM)
    dynamic = [t for t in tests if harness.has_dynamic_variant(t)]
    assert dynamic and all(t.spec == "V1_2/split_quant8_2" for t in dynamic)


def _check(report: harness.Report, static: harness.Report) -> None:
    counts = report.counts()
    assert counts[harness.FAILED] == 0 and counts[harness.SKIPPED] == 0, harness.format_table(report)
    assert report.verdicts() == static.verdicts()
    dynamic = [r for r in report.results if not r.message.startswith(harness.STATIC_FORM)]
    assert len(dynamic) >= 150 and len(report.results) - len(dynamic) >= 8


def test_subset_in_process_and_through_ipc(sample_all):
    static = harness.run_vectors(PATHS, make_backend("nnapi-reference"))
    for device in ("nnapi-reference", "sample-all"):
        _check(harness.run_vectors(PATHS, make_backend(device), unknown_output_shapes=True), static)
    assert sample_all.process.alive()


@pytest.fixture(scope="module")
def float_and_quant():
    """Two driver processes as ``manager.devices()`` (the CPU is the fallback): BOX_WITH_NMS_LIMIT
    and ROI_ALIGN run on sample-float-fast, QUANTIZE on the CPU, so a zero-sized tensor of
    unknown shape crosses from a driver process to the runtime."""
    devices = [RemoteDevice(name, timeout_s=60.0) for name in ("sample-float-fast", "sample-quant")]
    manager.forTest_set_devices(devices)
    yield devices
    manager.forTest_reset()
    for device in devices:
        device.shutdown()


def test_partitioned_across_devices(float_and_quant):
    paths = [loader.CTS_ROOT / name for name in ("V1_2/quantize.json.gz", "V1_0/add.json.gz",
                                                 "V1_2/box_with_nms_limit_linear.json.gz")]
    static = harness.run_vectors(paths)  # the CpuExecutor, static shapes
    report = harness.run_vectors(paths, make_backend(None), unknown_output_shapes=True)
    assert report.counts()[harness.FAILED] == 0 and report.verdicts() == static.verdicts()
    assert any(r.name == "quantize_zero_sized" and r.status == harness.PASSED for r in report.results)
    [test] = [t for t in loader.load_file(paths[0]) if t.name == "quantize_zero_sized"]
    compilation = Compilation(Model.from_hal(harness.with_unknown_output_shapes(test.model)))
    compilation.finish()
    plan = compilation.plan
    assert [s.device.name for s in plan.steps] == ["sample-float-fast", "nnapi-reference"]
    [crossing] = plan.crossing
    assert 0 in test.model.main.operands[crossing].dimensions  # its shape is known at execution
    compilation.free()


def test_cli_flag_prints_the_dynamic_note(capsys):
    code = cli_main(["cts", "--dynamic-output-shapes", str(loader.CTS_ROOT / "V1_3/rank.json.gz"),
                     str(loader.CTS_ROOT / "V1_0/add.json.gz")])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].startswith("dynamic output shapes: 2 tests with unknown output shapes, 19 in")
    assert lines[-1] == "21 passed, 0 failed, 0 skipped"
