"""The ``sample-litert`` driver process: real LiteRT behind the HAL.

Oracles: LiteRT's own outputs for the shipped face models (``tests/data/models/*.npz``, CTS
tolerance), the in-process reference CPU device for small models, and the driver's spans.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Burst, Compilation, Duration, Execution, Model, NnError, ResultCode
from nnscope.runtime.cts import accuracy
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from nnscope.runtime.tflite import load_tflite
from tests.runtime.helpers import add_model, conv_model, run
from tests.support.paths import REPO
from tests.support.programs import needs_litert

pytestmark = needs_litert
MODELS = REPO / "tests" / "data" / "models"
FACE_MODELS = ("face_detection_short_range", "face_landmark")


@pytest.fixture(scope="module")
def litert():
    device = RemoteDevice("sample-litert", timeout_s=60.0)
    yield device
    device.shutdown()


def _outputs(compilation: Compilation, inputs: list) -> list[np.ndarray]:
    graph = compilation.model.to_hal().main
    outputs = [np.zeros(graph.operands[i].dimensions, np.float32) for i in graph.output_indexes]
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    for index, buffer in enumerate(outputs):
        execution.set_output(index, buffer)
    execution.compute()
    return outputs


@pytest.mark.parametrize("name", FACE_MODELS)
def test_face_models_agree_with_litert_within_cts_tolerance(litert, name):
    hal, _, _ = load_tflite(MODELS / f"{name}.tflite")
    reference = np.load(MODELS / f"{name}.litert-reference.npz")
    model = Model.from_hal(hal, name=name)
    assert litert.supported_operations(hal) == [True] * len(hal.main.operations)
    compilation = Compilation.for_devices(model, [litert])
    compilation.finish()
    atol, rtol = accuracy.tolerance(T.TENSOR_FLOAT32, False, name)
    for k in range(3):
        outputs = _outputs(compilation, [reference[f"input{k}"]])
        for j, actual in enumerate(outputs):
            expected = reference[f"output{k}_{j}"]
            assert not accuracy.compare(expected, actual, atol, rtol), (k, j)
    compilation.free()


def _mixed_model() -> Model:
    """ADD (translatable) then LOCAL_RESPONSE_NORMALIZATION (no builtin here) then ADD."""
    model = Model("mixed")
    x = model.add_operand(T.TENSOR_FLOAT32, (1, 2, 2, 3))
    act = model.add_operand(T.INT32)
    model.set_operand_value(act, 0)
    t1, t2, out = (model.add_operand(T.TENSOR_FLOAT32, (1, 2, 2, 3)) for _ in range(3))
    radius, bias, alpha, beta = (model.add_operand(k) for k in (T.INT32, T.FLOAT32, T.FLOAT32, T.FLOAT32))
    for operand, value in ((radius, 1), (bias, 1.0), (alpha, 0.5), (beta, 0.75)):
        model.set_operand_value(operand, value)
    model.add_operation(Op.ADD, [x, x, act], [t1])
    model.add_operation(Op.LOCAL_RESPONSE_NORMALIZATION, [t1, radius, bias, alpha, beta], [t2])
    model.add_operation(Op.ADD, [t2, x, act], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


def test_unclaimed_operations_go_to_other_devices(litert):
    model = _mixed_model()
    assert litert.supported_operations(model.to_hal()) == [True, False, True]
    compilation = Compilation.for_devices(model, [litert, CpuDevice()])
    compilation.finish()
    assert [s.device.name for s in compilation.plan.steps] == ["sample-litert", "nnapi-reference",
                                                              "sample-litert"]
    x = np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3) / 7
    np.testing.assert_allclose(run(compilation, x), run(model, x, devices=[CpuDevice()]), rtol=1e-5)
    with pytest.raises(NnError) as error:
        Compilation.for_devices(model, [litert]).finish()
    assert error.value.code == ResultCode.BAD_DATA


def test_float16_activations_and_unknown_rank_are_not_claimed(litert):
    model = Model("half")
    a = model.add_operand(T.TENSOR_FLOAT16, (2,))
    act = model.add_operand(T.INT32)
    model.set_operand_value(act, 0)
    out = model.add_operand(T.TENSOR_FLOAT16, (2,))
    model.add_operation(Op.ADD, [a, a, act], [out])
    model.identify_inputs_and_outputs([a], [out])
    model.finish()
    assert litert.supported_operations(model.to_hal()) == [False]


def test_timing_is_invoke_time_inside_driver_time(litert):
    weights = np.random.default_rng(1).standard_normal((8, 3, 3, 4)).astype(np.float32)
    model = conv_model(weights, np.zeros(8, np.float32), hw=(16, 16))
    compilation = Compilation.for_devices(model, [litert])
    compilation.finish()
    x = np.random.default_rng(2).standard_normal((1, 16, 16, 4)).astype(np.float32)
    execution = Execution(compilation)
    execution.set_input(0, x)
    out = np.zeros((1, 16, 16, 8), np.float32)
    execution.set_output(0, out)
    execution.set_measure_timing(True)
    execution.compute()
    on_device, in_driver = (execution.get_duration(d) for d in (Duration.ON_HARDWARE, Duration.IN_DRIVER))
    assert 0 < on_device <= in_driver
    np.testing.assert_allclose(out, run(model, x, devices=[CpuDevice()]), rtol=1e-4, atol=1e-5)


def test_async_burst_and_fenced_paths_agree(litert):
    model = add_model((2, 3))
    compilation = Compilation.for_devices(model, [litert])
    compilation.finish()
    a, b = np.full((2, 3), 1.5, np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    results = []
    for mode in ("sync", "async", "burst", "fenced"):
        execution = Execution(compilation)
        execution.set_input(0, a)
        execution.set_input(1, b)
        out = np.zeros((2, 3), np.float32)
        execution.set_output(0, out)
        if mode == "sync":
            execution.compute()
        elif mode == "async":
            execution.start_compute().wait(timeout=30)
        elif mode == "burst":
            burst = Burst(compilation)
            execution.burst_compute(burst)
            burst.free()
        else:
            execution.start_compute_with_dependencies([]).wait(timeout=30)
        results.append(out)
    for out in results:
        np.testing.assert_array_equal(out, a + b)


def test_unknown_input_dimensions_resize_at_execution(litert):
    model = add_model((0, 3))
    compilation = Compilation.for_devices(model, [litert])
    compilation.finish()
    for rows in (1, 4, 2):
        a = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        np.testing.assert_array_equal(run(compilation, a, a, out_shape=(rows, 3)), 2 * a)


def test_deadline_already_passed_is_missed(litert):
    compilation = Compilation.for_devices(add_model(), [litert])
    compilation.finish()
    execution = Execution(compilation)
    ones = np.ones((1, 4), np.float32)
    execution.set_input(0, ones)
    execution.set_input(1, ones)
    execution.set_output(0, np.zeros((1, 4), np.float32))
    execution.set_timeout(1)  # 1 ns: passed before the driver looks at it
    with pytest.raises(NnError) as error:
        execution.compute()
    assert error.value.code in (ResultCode.MISSED_DEADLINE_TRANSIENT, ResultCode.MISSED_DEADLINE_PERSISTENT)


def test_spans_show_translation_and_invoke_in_the_driver(litert):
    with tracing.TraceSession() as session:
        compilation = Compilation.for_devices(add_model(), [litert])
        compilation.finish()
        ones = np.ones((1, 4), np.float32)
        np.testing.assert_array_equal(run(compilation, ones, ones), 2 * ones)
    names = [span.name for span in session.collect().spans()]
    for name in ("[NN_LD_PC]LiteRtDriver::translate", "[NN_LD_PC]LiteRtDriver::buildInterpreter",
                 "[NN_LD_PE]LiteRT::invoke"):
        assert name in names, name


def test_compilation_cache_holds_the_flatbuffer(litert, tmp_path):
    hal, _, _ = load_tflite(MODELS / "face_detection_short_range.tflite")
    reference = np.load(MODELS / "face_detection_short_range.litert-reference.npz")
    model = Model.from_hal(hal, name="face")
    token = bytes(range(32))
    outputs = []
    for attempt in range(2):
        compilation = Compilation.for_devices(model, [litert])
        compilation.set_caching(str(tmp_path), token)
        with tracing.TraceSession() as session:
            compilation.finish()
        names = {span.name for span in session.collect().spans()}
        assert ("[NN_LD_PC]LiteRtDriver::translate" in names) == (attempt == 0)
        outputs.append(_outputs(compilation, [reference["input0"]]))
        compilation.free()
    files = sorted(tmp_path.iterdir())
    assert len(files) == 2
    assert any(b"TFL3" in path.read_bytes()[:4096] for path in files)  # the flatbuffer, as written
    for first, second in zip(*outputs):
        np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(outputs[1][0], reference["output0_0"])


def test_threads_option_is_checked():
    from nnscope.runtime.drivers.litert import NNSCOPE_LITERT_THREADS, configured_threads
    assert configured_threads({}) == 1
    assert configured_threads({NNSCOPE_LITERT_THREADS: "2"}) == 2
    for bad in ("0", "x", "-1", "65"):
        with pytest.raises(ValueError, match=NNSCOPE_LITERT_THREADS):
            configured_threads({NNSCOPE_LITERT_THREADS: bad})


def test_capabilities_prefer_it_over_the_reference_cpu(litert):
    caps = litert.capabilities()
    assert caps.performance(T.TENSOR_FLOAT32).exec_time < CpuDevice().capabilities().performance(
        T.TENSOR_FLOAT32).exec_time
    assert litert.type.name == "ACCELERATOR"
