"""Delegate mode against LiteRT standalone: every shipped model and every model built here
agrees with LiteRT's own outputs, on the default devices and on ``nnapi-reference``; a
custom operator LiteRT runs and a builtin with no NNAPI form run on LiteRT's CPU kernels
between NNAPI partitions; bad input is one line; traces show TFLite's names.

Tolerance: the CTS's (``runtime.cts.accuracy.tolerance``) per element on the default devices,
where the partitions run on ``sample-litert``. ``nnapi-reference`` computes in numpy, whose
summation order alone moves a deep network's outputs beyond the CTS's float32 per-element
tolerance (4e-6 relative on the face detector, the same with the whole model on NNAPI), so the
shipped networks are held there to 1e-5 of each output's range, as the loader's own test does;
the one-operator models keep the CTS tolerance everywhere.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import manager
from nnscope.runtime.cts import accuracy
from nnscope.runtime.delegate import Category, CpuOperator, Partition
from nnscope.runtime.delegate.delegated import DELEGATE_KERNEL_SPAN, DelegatedModel
from nnscope.runtime.hal.types import OperandType, OperationType
from nnscope.runtime.tflite import TfliteFormatError, UnsupportedOperator
from tests.support.paths import MODEL_FIXTURES
from tests.support import tflite_models
from tests.support.tflite_models import category_models, litert_outputs

pytest.importorskip("ai_edge_litert")

SHIPPED = sorted(p.stem for p in MODEL_FIXTURES.glob("*.tflite"))
DEVICES = {"default": None, "nnapi-reference": ["nnapi-reference"]}
_CTS_TYPES = {np.dtype(np.float32): OperandType.TENSOR_FLOAT32, np.dtype(np.int32): OperandType.TENSOR_INT32,
              np.dtype(np.int64): OperandType.TENSOR_INT32, np.dtype(np.int8): OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
              np.dtype(np.uint8): OperandType.TENSOR_QUANT8_ASYMM}


@pytest.fixture(scope="module", autouse=True)
def _drivers():
    yield
    manager.shutdown()


def _model(data: bytes, devices, **options) -> DelegatedModel:
    chosen = [manager.get_device(n) for n in devices] if devices else None
    model = DelegatedModel(data, chosen, **options)
    model.compile()
    return model


def _assert_cts(expected, actual, name="model"):
    atol, rtol = accuracy.tolerance(_CTS_TYPES[np.asarray(expected).dtype], False, name)
    assert not accuracy.compare(expected, actual, atol, rtol)


@pytest.mark.parametrize("devices", sorted(DEVICES))
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_models_agree_with_litert(name, devices):
    reference = np.load(MODEL_FIXTURES / f"{name}.litert-reference.npz")
    model = _model((MODEL_FIXTURES / f"{name}.tflite").read_bytes(), DEVICES[devices])
    try:
        for k in range(3):
            for j, actual in enumerate(model.run([reference[f"input{k}"]])):
                expected = reference[f"output{k}_{j}"]
                if devices == "default":
                    _assert_cts(expected, actual, name)
                else:
                    scale = float(np.abs(expected).max())
                    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5 * scale)
    finally:
        model.free()


@pytest.mark.parametrize("devices", sorted(DEVICES))
@pytest.mark.parametrize("level", [30, 28, 27])
def test_shipped_models_split_at_lower_levels_still_agree(level, devices):
    """At API 27 and 28 PAD and PRELU stay on the CPU and the limit gives whole partitions
    back: NNAPI and LiteRT alternate, and the outputs do not change."""
    reference = np.load(MODEL_FIXTURES / "face_landmark.litert-reference.npz")
    model = _model((MODEL_FIXTURES / "face_landmark.tflite").read_bytes(), DEVICES[devices],
                   feature_level=level)
    try:
        kinds = {type(s) for s in model.delegation.steps}
        assert kinds == ({Partition} if level == 30 else {Partition, CpuOperator})
        expected = reference["output0_0"]
        actual = model.run([reference["input0"]])[0]
        np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5 * float(np.abs(expected).max()))
    finally:
        model.free()


BUILT = {"conv_gelu_conv": tflite_models.conv_gelu_conv, "with_custom": tflite_models.with_custom,
         "relu_chains": tflite_models.relu_chains}


@pytest.mark.parametrize("devices", sorted(DEVICES))
@pytest.mark.parametrize("name", sorted(BUILT))
def test_built_models_with_cpu_operators_agree_with_litert(name, devices):
    data = BUILT[name]()
    x = np.random.default_rng(1).standard_normal(
        DelegatedModel(data).input_specs()[0][0]).astype(np.float32)
    model = _model(data, DEVICES[devices])
    try:
        assert any(isinstance(s, CpuOperator) for s in model.delegation.steps)
        assert len(model.delegation.partitions) >= 1
        for expected, actual in zip(litert_outputs(data, [x]), model.run([x])):
            _assert_cts(expected, actual)
    finally:
        model.free()


def test_the_custom_operator_runs_on_litert_between_two_partitions():
    model = _model(tflite_models.with_custom(), None)
    try:
        kinds = [type(s).__name__ for s in model.delegation.steps]
        assert kinds == ["Partition", "CpuOperator", "Partition"]
        verdict = model.delegation.verdicts[1]
        assert (verdict.operator, verdict.reason) == (
            "CUSTOM 'Convolution2DTransposeBias'",
            "unsupported operator: CUSTOM 'Convolution2DTransposeBias' has no NNAPI form")
    finally:
        model.free()


RUNNABLE = {k: v for k, v in category_models().items() if k != "missing_operand"}


@pytest.mark.parametrize("devices", sorted(DEVICES))
@pytest.mark.parametrize("name", sorted(RUNNABLE))
def test_category_models_agree_with_litert_on_the_cpu_and_when_delegated(name, devices):
    case = RUNNABLE[name]
    on_litert = litert_outputs(case.data, case.feed)
    for level in filter(None, (case.level, case.accepted_at)):
        model = _model(case.data, DEVICES[devices], feature_level=level)
        delegated = level == case.accepted_at
        expected = case.delegated_reference if delegated and case.delegated_reference else on_litert
        try:
            assert bool(model.delegation.partitions) == delegated
            for want, got in zip(expected, model.run(list(case.feed))):
                _assert_cts(want, got)
        finally:
            model.free()


def test_a_model_litert_cannot_run_is_refused_in_one_line():
    """CONV_2D without a bias: the delegate leaves it to the CPU, whose LiteRT refuses it."""
    with pytest.raises(UnsupportedOperator) as raised:
        DelegatedModel(category_models()["missing_operand"].data, label="m.tflite")
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith("m.tflite: operator 0 (CONV_2D) does not run on LiteRT")


def test_an_unknown_custom_operator_is_refused_naming_it():
    with pytest.raises(UnsupportedOperator) as raised:
        DelegatedModel(tflite_models.with_unknown_custom("FooBar"), label="m.tflite")
    message = str(raised.value)
    assert "\n" not in message and "CUSTOM 'FooBar'" in message and "FooBar" in message.split(":")[-1]
    assert raised.value.result_code.name == "BAD_DATA"


@pytest.mark.parametrize("cut", [8, 100, 1000, -40])
def test_a_truncated_or_corrupt_flatbuffer_is_one_line(cut):
    data = bytearray(tflite_models.conv_gelu_conv())
    if cut > 0:
        data = data[:cut]
    else:
        data[cut:] = b"\xff" * -cut
        data[4:12] = b"TFL3\xff\xff\xff\x7f"
    with pytest.raises(TfliteFormatError) as raised:
        DelegatedModel(bytes(data), label="m.tflite")
    assert "\n" not in str(raised.value) and str(raised.value).startswith("m.tflite: ")


def test_traces_name_cpu_operators_and_hold_nnapi_inside_the_delegate_kernel():
    model = _model(tflite_models.conv_gelu_conv(), ["nnapi-reference"])
    x = np.zeros((1, 16, 16, 3), np.float32)
    try:
        with tracing.TraceSession() as session:
            model.run([x])
        spans = list(session.collect().spans())
    finally:
        model.free()
    kernel = next(s for s in spans if s.name == DELEGATE_KERNEL_SPAN)
    mine = [s for s in spans if (s.pid, s.tid) == (kernel.pid, kernel.tid) and s.depth == kernel.depth]
    names = [s.name for s in sorted(mine, key=lambda s: s.start_ns)]
    assert names == [DELEGATE_KERNEL_SPAN, "GELU", DELEGATE_KERNEL_SPAN]
    kernels = [s for s in spans if s.name == DELEGATE_KERNEL_SPAN]
    for kernel in kernels:
        inside = [s.name for s in spans if kernel.start_ns <= s.start_ns and s.end_ns <= kernel.end_ns
                  and s is not kernel]
        assert "[NN_LR_PE]ANeuralNetworksExecution_startCompute" in inside
        assert any("[NN_LC_PCO]conv2dFloat32" in n for n in inside)  # the kernel, on its thread


def test_interpreters_and_compilations_are_built_once():
    model = _model(tflite_models.conv_gelu_conv(), ["nnapi-reference"])
    x = np.ones((1, 16, 16, 3), np.float32)
    try:
        before = [id(k) for k in model.kernels]
        first = model.run([x])
        second = model.run([x])
        assert [id(k) for k in model.kernels] == before
        np.testing.assert_array_equal(first[0], second[0])
    finally:
        model.free()


@pytest.mark.parametrize("devices", sorted(DEVICES))
def test_shape_stays_on_the_cpu_as_the_delegate_does_not_map_it(devices):
    data = tflite_models.relu_and_its_shape()
    model = _model(data, DEVICES[devices])
    x = np.array([[-1, 2, -3, 4, 5, -6, 7, 8]], np.float32)
    try:
        assert model.delegation.verdicts[1].category == Category.UNSUPPORTED_OPERATOR
        for want, got in zip(litert_outputs(data, [x]), model.run([x])):
            np.testing.assert_array_equal(got, want)
    finally:
        model.free()


@pytest.mark.parametrize("devices", sorted(DEVICES))
def test_a_graph_with_dynamic_sized_tensors_runs_all_on_the_cpu(devices):
    """TFLite does not apply the NNAPI delegate (static-sized tensors only) to a graph whose
    tensors are sized when it runs; each CPU slice gets the run-time shapes, not the
    converter's placeholders."""
    data = tflite_models.reshape_to_a_computed_shape()
    model = _model(data, DEVICES[devices])
    feed = [np.arange(8, dtype=np.float32).reshape(1, 8) - 3, np.array([2, 4], np.int32)]
    try:
        assert not model.delegation.partitions
        assert {v.category for v in model.delegation.verdicts} == {Category.DYNAMIC_TENSORS}
        (want,), (got,) = litert_outputs(data, feed), model.run(feed)
        assert got.shape == (2, 3)
        _assert_cts(want, got)
    finally:
        model.free()


def test_a_keras_lstm_as_while_loops_runs_on_litert_as_the_delegate_is_not_applied():
    data = (MODEL_FIXTURES / "generated" / "keras_lstm_gru.tflite").read_bytes()
    x = np.random.default_rng(2).standard_normal((1, 10, 8)).astype(np.float32)
    model = _model(data, None)
    try:
        assert model.delegation.summary() == "0 of 6 operators delegated, in 0 partitions"
        assert model.delegation.verdicts[1].category == Category.DYNAMIC_TENSORS
        _assert_cts(litert_outputs(data, [x])[0], model.run([x])[0])
    finally:
        model.free()


@pytest.mark.parametrize("devices", sorted(DEVICES))
@pytest.mark.parametrize("level", [29, 28])
def test_an_int8_network_below_api_30_runs_as_uint8_and_agrees_with_litert(level, devices):
    """Below API 30 each partition's int8 tensors are uint8 in NNAPI (zero point and values +
    128), as the delegate passes them: the values cross into and out of each partition
    converted, the QUANTIZE between the partitions runs on LiteRT in int8, and the outputs
    are LiteRT's within the CTS's quant8 tolerance. At API 29 the convolutions are delegated
    (per-channel filters as NNAPI 1.2's TENSOR_QUANT8_SYMM_PER_CHANNEL); at 28 they stay on
    the CPU (NNAPI 1.1 convolves no int8)."""
    data = tflite_models.int8_cnn()
    model = _model(data, DEVICES[devices], feature_level=level)
    rng = np.random.default_rng(level)
    try:
        kinds = [type(s).__name__ for s in model.delegation.steps]
        assert kinds == (["Partition", "CpuOperator", "Partition"] if level == 29 else
                         ["CpuOperator"] * 3 + ["Partition", "CpuOperator"])
        for kernel in model.kernels:
            if isinstance(kernel.step, Partition):
                types = {o.type for o in kernel.model.operands}
                assert OperandType.TENSOR_QUANT8_ASYMM in types
                assert OperandType.TENSOR_QUANT8_ASYMM_SIGNED not in types
        for _ in range(3):
            x = rng.integers(-128, 128, (1, 8, 8, 3)).astype(np.int8)
            (want,), (got,) = litert_outputs(data, [x]), model.run([x])
            assert got.dtype == np.int8
            _assert_cts(want, got)
    finally:
        model.free()


# --------------------------------------------------------------------------- HARD_SWISH
def _partition_operations(model: DelegatedModel) -> set:
    """Every NNAPI operation in the partitions' models."""
    return {operation.type for kernel in model.kernels if isinstance(kernel.step, Partition)
            for operation in kernel.model.operations}


@pytest.mark.parametrize("devices", sorted(DEVICES))
@pytest.mark.parametrize("level", [30, 29, 27])
def test_hard_swish_between_convolutions_is_delegated_at_every_level(level, devices):
    """Below API 30 the partition holds no NNAPI HARD_SWISH (NNAPI 1.3) but the delegate's
    MUL, MUL, MUL and ADD; from 30 NNAPI's own. Either way one partition, LiteRT's outputs
    within the CTS tolerance."""
    data = tflite_models.conv_hard_swish_conv()
    model = _model(data, DEVICES[devices], feature_level=level)
    rng = np.random.default_rng(level)
    try:
        assert [type(s) for s in model.delegation.steps] == [Partition]
        operations = _partition_operations(model)
        assert (OperationType.HARD_SWISH in operations) == (level >= 30)
        assert (OperationType.MUL in operations) == (level < 30)
        for _ in range(3):
            x = (rng.standard_normal((1, 16, 16, 3)) * 2).astype(np.float32)
            _assert_cts(litert_outputs(data, [x])[0], model.run([x])[0])
    finally:
        model.free()


@pytest.mark.parametrize("devices", sorted(DEVICES))
@pytest.mark.parametrize("level", [29, 27])
@pytest.mark.parametrize("type_name", ["UINT8", "INT8"])
def test_a_quantized_hard_swish_below_api_30_runs_in_uint8_and_agrees_with_litert(type_name, level,
                                                                                 devices):
    """The delegate builds it from uint8 MUL and ADD (an int8 one passed as uint8): every input
    step gives LiteRT's output within the CTS's quant8 tolerance (one step)."""
    data = tflite_models.hard_swish_operator(type_name, shape=(1, 8, 16, 2))
    model = _model(data, DEVICES[devices], feature_level=level)
    dtype = np.uint8 if type_name == "UINT8" else np.int8
    try:
        assert [type(s) for s in model.delegation.steps] == [Partition]
        assert OperationType.HARD_SWISH not in _partition_operations(model)
        types = {o.type for k in model.kernels for o in k.model.operands}
        assert OperandType.TENSOR_QUANT8_ASYMM_SIGNED not in types
        x = (np.arange(256) + int(np.iinfo(dtype).min)).astype(dtype).reshape(1, 8, 16, 2)
        (want,), (got,) = litert_outputs(data, [x]), model.run([x])
        assert got.dtype == dtype
        _assert_cts(want, got)
    finally:
        model.free()
