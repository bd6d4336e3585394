"""CTS loader, accuracy criteria and harness against the shared vectors."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.cts import accuracy, harness, loader
from nnscope.runtime.hal.types import DataLocation, OperandLifetime as L, OperandType as T, OperationType as O

ROOT = loader.CTS_ROOT


# ----------------------------------------------------------------------------- loader
def test_loader_builds_hal_model_with_packed_constants():
    test = loader.load_file(ROOT / "V1_0/add_quant8.json.gz")[1]  # *_all_inputs_as_internal
    main = test.model.main
    assert test.name == "add_quant8_all_inputs_as_internal"
    assert [op.type for op in main.operations] == [O.ADD] * 3
    const = main.operands[5]
    assert const.lifetime == L.CONSTANT_COPY and const.location.pool_index == -1
    assert test.model.operand_values[const.location.offset] == 0
    assert main.operands[0].lifetime == L.TEMPORARY_VARIABLE and main.operands[0].location is None
    assert [i.tolist() for i in test.inputs] == [[1, 2], [3, 4]]
    assert test.expected[0].dtype == np.uint8 and test.expected[0].tolist() == [5, 8]
    assert test.output_types == (T.TENSOR_QUANT8_ASYMM,) and not test.expect_failure


def test_loader_flags_and_float16():
    relaxed = loader.load_file(ROOT / "V1_1/add_relaxed.json.gz")[0]
    assert relaxed.is_relaxed and relaxed.model.relax_float32_to_float16
    f16 = loader.load_file(ROOT / "V1_2/reshape_float16.json.gz")[0]
    assert f16.has_float16() and f16.inputs[0].dtype == np.float16
    bad = loader.load_file(ROOT / "V1_3_cts_only/concat_invalid_rank.json.gz")[0]
    assert bad.expect_failure


def test_loader_subgraph_operands_point_into_referenced():
    test = loader.load_file(ROOT / "V1_3/if_simple.json.gz")[0]
    subgraph_ops = [o for o in test.model.main.operands if o.lifetime == L.SUBGRAPH]
    assert subgraph_ops and all(isinstance(o.location, DataLocation) for o in subgraph_ops)
    assert {o.location.offset for o in subgraph_ops} <= set(range(len(test.model.referenced)))
    assert O.IF in test.operations


def test_select_files_by_operation():
    files = loader.select_files(["PAD"])
    assert ROOT / "V1_1/pad.json.gz" in files and ROOT / "V1_0/add.json.gz" not in files


# ----------------------------------------------------------------------------- accuracy
def test_float32_tolerance_boundary():
    atol, rtol = accuracy.tolerance(T.TENSOR_FLOAT32, relaxed=False, name="x")
    assert (atol, rtol) == (1e-5, 5 * 1.1920928955078125e-7)
    assert accuracy.compare(np.float32([100]), np.float32([100.00005]), atol, rtol) == []
    assert accuracy.compare(np.float32([100]), np.float32([100.0001]), atol, rtol)


def test_relaxed_and_float16_tolerance():
    assert accuracy.tolerance(T.TENSOR_FLOAT32, relaxed=True, name="x") == (0.0048828125,) * 2
    assert accuracy.tolerance(T.TENSOR_FLOAT16, relaxed=False, name="x") == (0.0048828125,) * 2


def test_quant_int_bool_tolerances():
    assert accuracy.tolerance(T.TENSOR_QUANT8_ASYMM, False, "conv")[0] == 1
    assert accuracy.tolerance(T.TENSOR_QUANT8_ASYMM, False, "mobilenet_quantized")[0] == 3
    assert accuracy.tolerance(T.TENSOR_INT32, False, "mobilenet")[0] == 1
    assert accuracy.tolerance(T.TENSOR_BOOL8, False, "x") == (0.0, 0.0)
    assert accuracy.compare(np.uint8([10]), np.uint8([11]), 1, 0) == []
    assert accuracy.compare(np.uint8([10]), np.uint8([12]), 1, 0)


def test_shape_mismatch_and_nan_fail():
    assert "shape [2], expected [1, 2]" in accuracy.compare(np.zeros((1, 2)), np.zeros(2), 1, 0)[0]
    assert accuracy.compare(np.float32([1]), np.float32([np.nan]), 1, 0)


def test_multinomial_frequencies():
    logits = np.log(np.float32([[0.25, 0.75]]))
    good = np.int32([[0] * 25 + [1] * 75])
    assert accuracy.check_multinomial([logits], good, 0.05) == []
    assert accuracy.check_multinomial([logits], np.int32([[0] * 50 + [1] * 50]), 0.05)


# ----------------------------------------------------------------------------- harness
def test_run_vectors_reference_backend():
    report = harness.run_vectors([ROOT / "V1_0/add.json.gz", ROOT / "V1_1/pad.json.gz"])
    assert report.summary() == "6 passed, 0 failed, 0 skipped"
    assert report.per_operation()["PAD"] == {"passed": 4}  # 2 of them with *_as_internal dummy ADDs
    assert report.per_operation()["ADD"] == {"passed": 2}  # add's own tests only


def test_the_rows_count_each_test_once_and_add_up_to_the_totals():
    """Issue 37: ``cts --dynamic-output-shapes`` on resize_bilinear_v1_2 printed rows adding up
    to 156 (ADD 36, BOX_WITH_NMS_LIMIT 16, RESIZE_BILINEAR 88, ROI_ALIGN 16) over a footer of 88
    passed: a test counted under every operation its model uses."""
    report = harness.run_vectors([ROOT / "V1_2/resize_bilinear_v1_2.json.gz"], unknown_output_shapes=True)
    assert report.summary() == "88 passed, 0 failed, 0 skipped"
    assert report.per_operation() == {"RESIZE_BILINEAR": {"passed": 88}}
    assert any("ADD" in r.operations for r in report.results)  # each result still lists what it uses
    note, header, *rows, total, footer = harness.format_table(report).splitlines()
    assert note == harness.TABLE_NOTE and header.split()[:2] == ["operation", "tested"]
    assert rows == [f"{'RESIZE_BILINEAR':<32}{88:>8}{0:>8}{0:>9}"]
    assert total.split() == ["total", "88", "0", "0"] and footer == report.summary()


def test_a_spec_without_one_common_operation_counts_each_test_under_its_last():
    tests = loader.load_file(ROOT / "V1_3/rank.json.gz")
    tested = harness.tested_operations(tests)
    assert set(tested) == {"RANK"}  # rank_internal_output (RANK then FILL) too: every test has RANK
    tests = loader.load_file(ROOT / "V1_3/pad_quant8_signed.json.gz")  # PAD and PAD_V2 tests
    assert harness.tested_operations(tests) == [t.model.main.operations[-1].type.name for t in tests]
    assert {"PAD", "PAD_V2"} <= set(harness.tested_operations(tests))


def test_unregistered_operations_are_skipped(monkeypatch):
    from nnscope.runtime.ops import registry  # noqa: PLC0415
    registry.load_all()
    monkeypatch.delitem(registry._RECORDS, O.ABS)  # as if ABS had no kernel
    spec = next(s for s in loader.load_index(ROOT)["specs"] if s["operations"] == ["ABS"])
    report = harness.run_vectors([ROOT / spec["file"]])
    counts = report.counts()
    assert counts["skipped"] == spec["tests"] > 0 and counts["failed"] == 0
    assert all(r.message == "unsupported: ABS" for r in report.results)


def test_supported_set_overrides_registry():
    report = harness.run_vectors([ROOT / "V1_0/add.json.gz"], supported=[O.MUL])
    assert report.summary() == "0 passed, 0 failed, 2 skipped"


def test_negative_test_passes_when_backend_raises():
    report = harness.run_vectors([ROOT / "V1_3_cts_only/concat_invalid_rank.json.gz"])
    assert report.summary() == "1 passed, 0 failed, 0 skipped"
    ok = harness.run_vectors([ROOT / "V1_3_cts_only/concat_invalid_rank.json.gz"],
                             backend=lambda model, inputs: [np.float32([[[[[1, 2, 3, 4]]]]])])
    assert ok.failures()[0].message == "expected a failure, run succeeded"


def test_wrong_values_and_errors_fail():
    def off_by_one(model, inputs):
        return [out + 1 for out in harness.cpu_backend(model, inputs)]

    def boom(model, inputs):
        raise RuntimeError("device lost")

    wrong = harness.run_vectors([ROOT / "V1_0/add.json.gz"], backend=off_by_one)
    assert wrong.summary() == "0 passed, 2 failed, 0 skipped"
    assert "output 0:" in wrong.failures()[0].message
    crashed = harness.run_vectors([ROOT / "V1_0/add.json.gz"], backend=boom)
    assert crashed.failures()[0].message == "RuntimeError: device lost"


def test_ops_filter_keeps_tests_using_the_operation():
    files = [ROOT / "V1_0/add.json.gz", ROOT / "V1_1/pad.json.gz"]
    report = harness.run_vectors(files, ops_filter=["pad"])
    assert {r.spec for r in report.results} == {"V1_1/pad"}
    assert harness.run_vectors(files, ops_filter=[O.ADD]).summary() == "4 passed, 0 failed, 0 skipped"


def test_unknown_output_shapes_variant():
    report = harness.run_vectors([ROOT / "V1_2/pad_all_dims.json.gz"], unknown_output_shapes=True)
    assert report.summary() == "16 passed, 0 failed, 0 skipped"
    test = loader.load_file(ROOT / "V1_2/pad_all_dims.json.gz")[0]
    dynamic = harness.with_unknown_output_shapes(test.model)
    out = dynamic.main.operands[dynamic.main.output_indexes[0]]
    assert set(out.dimensions) == {0}


def test_directory_expansion_and_table():
    files = harness.vector_files([ROOT / "V1_3_cts_only"])
    assert files and all(f.name.endswith(".json.gz") for f in files)
    report = harness.run_vectors([ROOT / "V1_0/add.json.gz"])
    table = harness.format_table(report)
    assert table.splitlines()[-1] == "2 passed, 0 failed, 0 skipped"
    assert report.to_dict()["perOperation"] == {"ADD": {"passed": 2}}


@pytest.mark.parametrize("path", ["V1_0/add_broadcast_quant8.json.gz", "V1_2/sub_v1_2_broadcast.json.gz"])
def test_all_registered_specs_pass(path):
    assert harness.run_vectors([ROOT / path]).ok
