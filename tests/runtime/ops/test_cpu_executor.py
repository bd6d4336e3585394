"""CpuExecutor: constants, omitted inputs, dynamic output shapes, validation, freeing, tracing."""
from __future__ import annotations

import io

import numpy as np
import pytest

from nnscope import tracing
from nnscope.tracing import tracer
from nnscope import vlog
from nnscope.runtime.cts import loader
from nnscope.runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L, OperandType as T,
                               Operation, OperationType as O, Subgraph)
from nnscope.runtime.ops.executor import CpuExecutor, kernel_name
from nnscope.runtime.ops.registry import OpValidationError

F32 = T.TENSOR_FLOAT32


def _input(dims=(1, 4), op_type=F32):
    return Operand(op_type, dims, lifetime=L.SUBGRAPH_INPUT)


def _output(dims=(1, 4), op_type=F32):
    return Operand(op_type, dims, lifetime=L.SUBGRAPH_OUTPUT)


def _none_const(offset=0):
    return Operand(T.INT32, lifetime=L.CONSTANT_COPY, location=DataLocation(-1, offset, 4))


def _tiny_add(out_dims=(1, 4)) -> HalModel:
    graph = Subgraph((_input(), _input(), _none_const(), _output(out_dims)),
                     (Operation(O.ADD, (0, 1, 2), (3,)),), (0, 1), (3,))
    return HalModel(graph, operand_values=np.int32(0).tobytes())


def _chain_model() -> HalModel:
    """out = ((a + b) + b) + b through temporaries 3 and 4."""
    temp = Operand(F32, (1, 4))
    operands = (_input(), _input(), _none_const(), temp, temp, _output())
    ops = (Operation(O.ADD, (0, 1, 2), (3,)), Operation(O.ADD, (3, 1, 2), (4,)),
           Operation(O.ADD, (4, 1, 2), (5,)))
    return HalModel(Subgraph(operands, ops, (0, 1), (5,)), operand_values=np.int32(0).tobytes())


A = np.float32([[1, 2, 3, 4]])
B = np.float32([[10, 20, 30, 40]])


def test_tiny_add():
    assert CpuExecutor(_tiny_add()).run([A, B])[0].tolist() == [[11, 22, 33, 44]]


def test_constants_copy_and_reference_from_pool():
    weights = np.float32([[2, 2, 2, 2]])
    copy = Operand(F32, (1, 4), lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 4, 16))
    ref = Operand(F32, (1, 4), lifetime=L.CONSTANT_REFERENCE, location=DataLocation(0, 8, 16))
    temp = Operand(F32, (1, 4))
    operands = (_input(), copy, ref, _none_const(), temp, _output())
    ops = (Operation(O.MUL, (0, 1, 3), (4,)), Operation(O.ADD, (4, 2, 3), (5,)))
    pool = b"\0" * 8 + np.float32([[1, 1, 1, 1]]).tobytes()
    model = HalModel(Subgraph(operands, ops, (0,), (5,)),
                     operand_values=np.int32(0).tobytes() + weights.tobytes(), pools=(pool,))
    assert CpuExecutor(model).run([A])[0].tolist() == [[3, 5, 7, 9]]


def test_scalar_constant_is_python_number_and_fuse_applies():
    model = _tiny_add()
    relu = HalModel(model.main, operand_values=np.int32(1).tobytes())  # FUSED_RELU
    out = CpuExecutor(relu).run([A, -2 * B])[0]
    assert out.tolist() == [[0, 0, 0, 0]]


def test_omitted_optional_input_uses_default():
    beta = Operand(T.FLOAT32, lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 0, 4))
    axis = Operand(T.INT32, lifetime=L.SUBGRAPH_INPUT)
    operands = (_input((2, 2)), beta, axis, _output((2, 2)))
    model = HalModel(Subgraph(operands, (Operation(O.SOFTMAX, (0, 1, 2), (3,)),), (0, 2), (3,)),
                     operand_values=np.float32(1.0).tobytes())
    x = np.float32([[0, np.log(3)], [0, 0]])
    executor = CpuExecutor(model)
    np.testing.assert_allclose(executor.run([x, None])[0], [[0.25, 0.75], [0.5, 0.5]], rtol=1e-6)
    np.testing.assert_allclose(executor.run([x, np.int32(0)])[0], [[0.5, 0.75], [0.5, 0.25]],
                               rtol=1e-6)


def test_no_value_operand_is_none():
    beta = Operand(T.FLOAT32, lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 0, 4))
    axis = Operand(T.INT32, lifetime=L.NO_VALUE)
    operands = (_input((1, 2)), beta, axis, _output((1, 2)))
    model = HalModel(Subgraph(operands, (Operation(O.SOFTMAX, (0, 1, 2), (3,)),), (0,), (3,)),
                     operand_values=np.float32(1.0).tobytes())
    np.testing.assert_allclose(CpuExecutor(model).run([np.float32([[1, 1]])])[0], [[0.5, 0.5]])


def test_dynamic_output_shape_is_filled():
    out = CpuExecutor(_tiny_add(out_dims=(0, 0))).run([A, B])[0]
    assert out.shape == (1, 4)


@pytest.mark.parametrize("dims", [(2, 0), (1, 4, 1), (1, 5)])
def test_contradicting_output_shape_raises(dims):
    with pytest.raises(RuntimeError, match="contradicts"):
        CpuExecutor(_tiny_add(out_dims=dims)).run([A, B])


def test_validation_error_names_operation_and_operand():
    operands = (_input(), _input(op_type=T.TENSOR_INT32), _none_const(), _output())
    model = HalModel(Subgraph(operands, (Operation(O.ADD, (0, 1, 2), (3,)),), (0, 1), (3,)),
                     operand_values=np.int32(0).tobytes())
    with pytest.raises(OpValidationError, match=r"operation 0 \(ADD\): input 1: expected "
                                                r"TENSOR_FLOAT32 like input 0, got TENSOR_INT32"):
        CpuExecutor(model)


def test_wrong_input_count_is_rejected_at_validation():
    operands = (_input(), _input(), _output())
    model = HalModel(Subgraph(operands, (Operation(O.ADD, (0, 1), (2,)),), (0, 1), (2,)))
    with pytest.raises(OpValidationError, match=r"operation 0 \(ADD\): expected 3 inputs, got 2"):
        CpuExecutor(model)


def test_unsupported_operation_is_rejected(monkeypatch):
    from nnscope.runtime.ops import registry  # noqa: PLC0415
    registry.load_all()
    monkeypatch.delitem(registry._RECORDS, O.ABS)  # as if ABS had no kernel
    operands = (_input(), _output())
    model = HalModel(Subgraph(operands, (Operation(O.ABS, (0,), (1,)),), (0,), (1,)))
    with pytest.raises(OpValidationError, match=r"operation 0 \(ABS\): not supported"):
        CpuExecutor(model)


def test_temporaries_freed_after_last_consumer():
    executor = CpuExecutor(_chain_model())
    live = []
    executor.forTest_step_hook = lambda step, values: live.append(
        {i for i in (3, 4) if values[i] is not None})
    out = executor.run([A, B])[0]
    assert out.tolist() == [[31, 62, 93, 124]]
    assert live == [{3}, {4}, set()]
    assert [call.frees for call in executor.calls] == [(), (3,), (4,)]


def test_observed_and_plain_runs_are_one_loop():
    """Tracing and vlog change only what is recorded: the same calls run, in the same order,
    with the same frees (the step hook sees each), and the traced run has one kernel span pair
    per operation inside CpuExecutor::run."""
    executor = CpuExecutor(_chain_model())
    seen = {"plain": [], "observed": []}
    for mode in seen:
        executor.forTest_step_hook = lambda index, values, mode=mode: seen[mode].append(
            (index, tuple(values[i] is not None for i in (3, 4))))
        if mode == "plain":
            plain = executor.run([A, B])[0]
        else:
            with tracing.TraceSession() as session:
                observed = executor.run([A, B], recorder=tracer.hot_recorder(), logging=False)[0]
    assert seen["plain"] == seen["observed"] == [(0, (True, False)), (1, (False, True)), (2, (False, False))]
    assert np.array_equal(plain, observed)
    names = [span.name for span in session.collect().spans()]
    assert names.count("[NN_LC_PE]CpuExecutor::run") == 1
    for index in range(3):  # each kernel span names its operation
        assert names.count(f"[NN_LC_PTR]addFloat32 #{index}") == names.count(f"[SW][NN_LC_PCO]addFloat32 #{index}") == 1


def test_unconsumed_temporary_freed_by_its_producer():
    temp = Operand(F32, (1, 4))
    operands = (_input(), _input(), _none_const(), temp, _output())
    ops = (Operation(O.ADD, (0, 1, 2), (3,)), Operation(O.MUL, (0, 1, 2), (4,)))
    model = HalModel(Subgraph(operands, ops, (0, 1), (4,)), operand_values=np.int32(0).tobytes())
    assert CpuExecutor(model).calls[0].frees == (3,)


def test_input_count_mismatch():
    with pytest.raises(ValueError, match="expected 2 inputs, got 1"):
        CpuExecutor(_tiny_add()).run([A])


def test_inputs_are_converted_to_operand_dtype():
    out = CpuExecutor(_tiny_add()).run([[[1, 2, 3, 4]], B.astype(np.float64)])[0]
    assert out.dtype == np.float32 and out.tolist() == [[11, 22, 33, 44]]


def test_kernel_names_follow_aosp_style():
    model = _tiny_add()
    assert kernel_name(model.main.operations[0], model.main.operands) == "addFloat32"
    q = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (2,), 1.0, 0)
    assert kernel_name(Operation(O.SOFTMAX, (0,), (1,)), (q,)) == "softmaxQuant8Signed"


def test_observed_run_spans_and_vlog():
    executor = CpuExecutor(_tiny_add())
    stream = io.StringIO()
    vlog.configure_logging(stream=stream, log_tags="*:V")
    try:
        with tracing.TraceSession() as session, vlog.override("cpuexe"):
            out = executor.run([A, B], recorder=tracer.hot_recorder(), logging=vlog.is_on("cpuexe"))[0]
    finally:
        vlog.reset_logging()
    assert out.tolist() == [[11, 22, 33, 44]]
    spans = {span.name: span for span in session.collect().spans()}
    root = spans["[NN_LC_PE]CpuExecutor::run"]
    assert {"[NN_LC_PTR]addFloat32 #0", "[SW][NN_LC_PCO]addFloat32 #0"} <= set(spans)
    assert spans["[SW][NN_LC_PCO]addFloat32 #0"].parent == root.index
    assert "operation 0 (ADD) addFloat32 inputs [[1, 4], [1, 4], 'scalar']" in stream.getvalue()
    assert "output shapes [[1, 4]]" in stream.getvalue()


def test_traced_run_equals_plain_run_on_cts_vector():
    test = loader.load_file(loader.CTS_ROOT / "V1_2/sub_v1_2_broadcast.json.gz")[0]
    executor = CpuExecutor(test.model)
    plain = executor.run(list(test.inputs))
    with tracing.TraceSession():
        traced = executor.run(list(test.inputs), recorder=tracer.hot_recorder(), logging=True)
    assert all(np.array_equal(p, t) for p, t in zip(plain, traced))


def test_kernel_error_names_operation():
    bad_fuse = HalModel(_tiny_add().main, operand_values=np.int32(9).tobytes())
    executor = CpuExecutor(bad_fuse)
    with pytest.raises(OpValidationError, match=r"operation 0 \(ADD\): unknown fused activation code 9"):
        executor.run([A, B])
    with pytest.raises(OpValidationError, match=r"operation 0 \(ADD\): unknown fused activation"):
        executor.run([A, B], logging=True)
