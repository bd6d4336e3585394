"""load_tflite: MediaPipe's face detector against LiteRT's reference outputs, plus tiny
flatbuffers built here for the option mapping and the unsupported-operator errors."""
from __future__ import annotations

import collections
import importlib

import flatbuffers
import numpy as np
import pytest

from nnscope.runtime.hal.types import OperandType, OperationType, ResultCode
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.tflite import convert_tflite, load_tflite
from nnscope.runtime.tflite._builder import UnsupportedOperator
from nnscope.runtime.tflite._reader import read_graph
from tests.support.paths import MODEL_FIXTURES

FACE = MODEL_FIXTURES / "face_detection_short_range.tflite"
FACE_REFERENCE = MODEL_FIXTURES / "face_detection_short_range.litert-reference.npz"


def _schema(name):
    """A generated schema module (``tflite/__init__`` re-exports names that shadow them)."""
    return importlib.import_module(f"tflite.{name}")


# --------------------------------------------------------------------------- face detector
@pytest.fixture(scope="module")
def face():
    model, inputs, outputs = load_tflite(FACE)
    return model, inputs, outputs, CpuExecutor(model), np.load(FACE_REFERENCE)


@pytest.mark.parametrize("sample", [0, 1, 2])
def test_face_detector_matches_litert(face, sample):
    *_, executor, reference = face
    outputs = executor.run([reference[f"input{sample}"]])
    for position, actual in enumerate(outputs):
        expected = reference[f"output{sample}_{position}"]
        assert actual.shape == expected.shape and actual.dtype == np.float32
        scale = float(np.abs(expected).max())
        error = float(np.abs(actual.astype(np.float64) - expected).max())
        # Seen: max abs error 5.3e-5 on outputs up to 144 (3.7e-7 of the output range).
        assert error <= 1e-5 * scale, (position, error, scale)
        np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5 * scale)


def test_face_detector_graph_maps_every_operator(face):
    model, inputs, outputs, *_ = face
    assert (inputs, outputs) == (["input"], ["regressors", "classificators"])
    tflite_ops = collections.Counter(op.name for op in read_graph(FACE.read_bytes()).operators)
    nnapi_ops = collections.Counter(op.type.name for op in model.main.operations)
    assert tflite_ops.pop("DEQUANTIZE") == 74  # float16 weights, folded to float32 constants
    assert nnapi_ops == tflite_ops
    assert not any(o.type == OperandType.TENSOR_FLOAT16 for o in model.main.operands)
    first = model.main.operations[0]
    assert first.type == OperationType.CONV_2D and len(first.inputs) == 10
    assert [model.main.operands[i].dimensions for i in model.main.input_indexes] == [(1, 128, 128, 3)]


# --------------------------------------------------------------------------- tiny models
def _vector(builder, values, dtype=np.int32):
    return builder.CreateNumpyVector(np.asarray(values, dtype))


def _table_vector(builder, module, name, offsets):
    getattr(module, f"Start{name}Vector")(builder, len(offsets))
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    return builder.EndVector()


def _tensor(builder, index, shape, type_code, buffer_index):
    T = _schema("Tensor")
    name, dims = builder.CreateString(f"t{index}"), _vector(builder, shape)
    T.Start(builder)
    T.AddShape(builder, dims)
    T.AddType(builder, type_code)
    T.AddBuffer(builder, buffer_index)
    T.AddName(builder, name)
    return T.End(builder)


def _buffers_and_tensors(builder, tensors) -> tuple[list, list]:
    """Buffer 0 is the empty one; each constant tensor gets its own float32 buffer."""
    B = _schema("Buffer")
    B.Start(builder)
    buffers, tensor_offsets = [B.End(builder)], []
    for index, (shape, data) in enumerate(tensors):
        buffer_index = 0
        if data is not None:
            payload = builder.CreateByteVector(np.asarray(data, np.float32).tobytes())
            B.Start(builder)
            B.AddData(builder, payload)
            buffers.append(B.End(builder))
            buffer_index = len(buffers) - 1
        tensor_offsets.append(_tensor(builder, index, shape, 0, buffer_index))
    return buffers, tensor_offsets


def _operator_codes(builder, codes) -> list:
    """A builtin code number, or a string: a CUSTOM operator of that name."""
    OC = _schema("OperatorCode")
    offsets = []
    for code in codes:
        custom = builder.CreateString(code) if isinstance(code, str) else None
        number = BUILTIN.CUSTOM if custom is not None else code
        OC.Start(builder)
        OC.AddDeprecatedBuiltinCode(builder, min(number, 127))
        OC.AddBuiltinCode(builder, number)
        if custom is not None:
            OC.AddCustomCode(builder, custom)
        OC.AddVersion(builder, 1)
        offsets.append(OC.End(builder))
    return offsets


def _operator(builder, opcode_index, op_inputs, op_outputs, options_type, make_options):
    O = _schema("Operator")
    options = make_options(builder) if make_options else None
    ins, outs = _vector(builder, op_inputs), _vector(builder, op_outputs)
    O.Start(builder)
    O.AddOpcodeIndex(builder, opcode_index)
    O.AddInputs(builder, ins)
    O.AddOutputs(builder, outs)
    if options is not None:
        O.AddBuiltinOptionsType(builder, options_type)
        O.AddBuiltinOptions(builder, options)
    return O.End(builder)


def _subgraph(builder, tensor_offsets, op_offsets, inputs, outputs):
    SG = _schema("SubGraph")
    tensor_vec = _table_vector(builder, SG, "Tensors", tensor_offsets)
    op_vec = _table_vector(builder, SG, "Operators", op_offsets)
    in_vec, out_vec = _vector(builder, inputs), _vector(builder, outputs)
    SG.Start(builder)
    SG.AddTensors(builder, tensor_vec)
    SG.AddOperators(builder, op_vec)
    SG.AddInputs(builder, in_vec)
    SG.AddOutputs(builder, out_vec)
    return SG.End(builder)


def finish_model(builder, buffers, tensor_offsets, operators, inputs, outputs) -> bytes:
    """The model's operators, one subgraph and buffers around built tensors, as .tflite bytes."""
    M = _schema("Model")
    codes = sorted({op[0] for op in operators}, key=lambda c: (isinstance(c, str), c))
    code_offsets = _operator_codes(builder, codes)
    op_offsets = [_operator(builder, codes.index(op[0]), *op[1:]) for op in operators]
    subgraph = _subgraph(builder, tensor_offsets, op_offsets, inputs, outputs)
    subgraphs = _table_vector(builder, M, "Subgraphs", [subgraph])
    code_vec = _table_vector(builder, M, "OperatorCodes", code_offsets)
    buffer_vec = _table_vector(builder, M, "Buffers", buffers)
    M.Start(builder)
    M.AddVersion(builder, 3)
    M.AddOperatorCodes(builder, code_vec)
    M.AddSubgraphs(builder, subgraphs)
    M.AddBuffers(builder, buffer_vec)
    builder.Finish(M.End(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def build_model(tensors, operators, inputs, outputs) -> bytes:
    """tensors: (shape, constant float32 array or None); operators: (builtin code, inputs,
    outputs, options type, options builder or None). Every tensor is float32."""
    builder = flatbuffers.Builder(1024)
    buffers, tensor_offsets = _buffers_and_tensors(builder, tensors)
    return finish_model(builder, buffers, tensor_offsets, operators, inputs, outputs)


def _options(name, **fields):
    def make(builder):
        module = _schema(name)
        module.Start(builder)
        for field, value in fields.items():
            getattr(module, f"Add{field}")(builder, value)
        return module.End(builder)
    return make


BUILTIN, OPTIONS = _schema("BuiltinOperator").BuiltinOperator, _schema("BuiltinOptions").BuiltinOptions


def test_conv_and_pool_options_become_nnapi_scalars():
    weights = np.array([2.0], np.float32).reshape(1, 1, 1, 1)
    conv = (BUILTIN.CONV_2D, [0, 1, 2], [3], OPTIONS.Conv2DOptions,
            _options("Conv2DOptions", Padding=1, StrideW=1, StrideH=1, FusedActivationFunction=1,
                     DilationWFactor=1, DilationHFactor=1))
    pool = (BUILTIN.MAX_POOL_2D, [3], [4], OPTIONS.Pool2DOptions,
            _options("Pool2DOptions", Padding=1, StrideW=2, StrideH=2, FilterWidth=2,
                     FilterHeight=2, FusedActivationFunction=0))
    data = build_model([((1, 4, 4, 1), None), ((1, 1, 1, 1), weights), ((1,), [-3.0]),
                        ((1, 4, 4, 1), None), ((1, 2, 2, 1), None)], [conv, pool], [0], [4])
    model, inputs, outputs = convert_tflite(data)
    assert (inputs, outputs) == (["t0"], ["t4"])
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1) - 4
    (result,) = CpuExecutor(model).run([x])
    relu = np.maximum(2 * x - 3, 0)  # fused RELU from the options
    expected = relu.reshape(2, 2, 2, 2).max(axis=(1, 3)).reshape(1, 2, 2, 1)
    np.testing.assert_array_equal(result, expected)


def test_fully_connected_without_bias_keeps_its_dimensions():
    weights = np.arange(12, dtype=np.float32).reshape(4, 3)
    fc = (BUILTIN.FULLY_CONNECTED, [0, 1, -1], [2], OPTIONS.FullyConnectedOptions,
          _options("FullyConnectedOptions", KeepNumDims=True, FusedActivationFunction=0))
    data = build_model([((1, 2, 3), None), ((4, 3), weights), ((1, 2, 4), None)], [fc], [0], [2])
    model, *_ = convert_tflite(data)
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    (result,) = CpuExecutor(model).run([x])
    np.testing.assert_allclose(result, x @ weights.T)


def test_unsupported_operators_are_all_named():
    ops = [(BUILTIN.CUMSUM, [0, 1], [2], 0, None), (BUILTIN.GELU, [2], [3], 0, None)]
    data = build_model([((4,), None), ((1,), [0.0]), ((4,), None), ((4,), None)], ops, [0], [3])
    message = ("m.tflite: operator 0 (CUMSUM) has no NNAPI form; "
               "operator 1 (GELU) has no NNAPI form")
    with pytest.raises(UnsupportedOperator) as caught:
        convert_tflite(data, "m.tflite")
    assert str(caught.value) == message and caught.value.result_code == ResultCode.BAD_DATA


def test_unsupported_fused_activation_is_named():
    add = (BUILTIN.ADD, [0, 1], [2], OPTIONS.AddOptions,
           _options("AddOptions", FusedActivationFunction=4))
    data = build_model([((4,), None), ((4,), None), ((4,), None)], [add], [0, 1], [2])
    with pytest.raises(ValueError, match=r"operator 0 \(ADD\): ADD with fused activation TANH "
                                         "has no NNAPI form"):
        convert_tflite(data)


def test_non_tflite_bytes_are_rejected(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\0" * 64)
    with pytest.raises(ValueError, match="not a TFLite flatbuffer"):
        load_tflite(path)
