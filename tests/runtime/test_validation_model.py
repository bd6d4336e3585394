"""AOSP ``TestValidation``'s model cases (``ValidationTestModel``, ``ValidationTestIdentify``), ported.

One test per C case, named ``test_<Fixture>_<Case>``; each line checks the code NNAPI gives at
that call. NULL handles (``ANeuralNetworksModel_addOperand(nullptr, ...)``) have no Python form;
NULL arguments are ``None``. Not ported (no such API yet): ``SetOperandValueFromAHardwareBuffer*``,
``AddOEMOperand`` (no OEM types), the ``ValidationTestModelExtensions`` cases.
"""
import numpy as np
import pytest

from nnscope.runtime import Compilation, Model, devices
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from tests.runtime.validation_helpers import (BAD_DATA, BAD_STATE, INVALID_DIMENSIONS, NO_ERROR,
                                              UNEXPECTED_NULL, add_tensor, code, create_model,
                                              shared_memory)

pytestmark = pytest.mark.usefixtures("cpu_only")


@pytest.fixture
def model():
    return Model("validation")


def _tensors(model, count, dims=(1,)):
    return [model.add_operand(T.TENSOR_FLOAT32, dims) for _ in range(count)]


def test_ValidationTestModel_AddOperand(model):
    assert code(model.add_operand, None) == UNEXPECTED_NULL
    assert code(model.add_operand, T.TENSOR_QUANT8_ASYMM, None, -1.0, 0) == BAD_DATA  # scale < 0
    assert code(model.add_operand, T.TENSOR_QUANT8_ASYMM, None, 1.0, -1) == BAD_DATA  # zero point
    assert code(model.add_operand, T.INT32, [2]) == BAD_DATA  # a scalar has no dimensions
    for dims in INVALID_DIMENSIONS:  # kInvalidTensorType1/2: malformed dimension info
        assert code(model.add_operand, T.TENSOR_FLOAT32, dims) == BAD_DATA
    assert code(model.finish) == BAD_DATA  # empty: the model is now invalid
    assert code(model.add_operand, T.FLOAT32) == BAD_STATE


def test_ValidationTestModel_SetOperandSymmPerChannelQuantParams(model):
    index = add_tensor(model, T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
    assert code(model.set_operand_symm_per_channel_quant_params, index, None, 0) == UNEXPECTED_NULL
    assert code(model.set_operand_symm_per_channel_quant_params, index + 1, [1.0, 2.0], 0) == BAD_DATA
    assert code(model.set_operand_symm_per_channel_quant_params, index, [1.0, 2.0], 0) == NO_ERROR


def test_ValidationTestModel_SetOptionalOperand(model):
    model.add_operand(T.FLOAT32)
    assert code(model.set_operand_value, 0, None) == NO_ERROR


def test_ValidationTestModel_SetOperandValue(model):
    model.add_operand(T.FLOAT32)
    assert code(model.set_operand_value, 0, bytes(20)) == BAD_DATA  # not the size of a float32
    assert code(model.set_operand_value, 0, bytes(4)) == NO_ERROR
    assert code(model.set_operand_value, 1, bytes(4)) == BAD_DATA  # no such operand
    assert code(model.finish) == BAD_DATA  # no operations
    assert code(model.set_operand_value, 0, bytes(4)) == BAD_STATE


def test_ValidationTestModel_SetOperandValueFromMemory(model):
    model.add_operand(T.TENSOR_FLOAT32, [1])
    with shared_memory(20) as memory:
        assert code(model.set_operand_value_from_memory, 0, None, 0, 4) == UNEXPECTED_NULL
        assert code(model.set_operand_value_from_memory, -1, memory, 0, 4) == BAD_DATA
        assert code(model.set_operand_value_from_memory, 0, memory, 0, 20) == BAD_DATA
        assert code(model.set_operand_value_from_memory, 1, memory, 0, 4) == BAD_DATA
        assert code(model.set_operand_value_from_memory, 0, memory, 21, 4) == BAD_DATA
        assert code(model.set_operand_value_from_memory, 0, memory, 17, 4) == BAD_DATA
        assert code(model.finish) == BAD_DATA
        assert code(model.set_operand_value_from_memory, 0, memory, 0, 4) == BAD_STATE


def test_ValidationTestModel_SetOperandValueFromModel(model):
    value_model = Model("value")
    ins = [value_model.add_operand(T.TENSOR_FLOAT32, [2]) for _ in range(2)]
    act, out = value_model.add_operand(T.INT32), value_model.add_operand(T.TENSOR_FLOAT32, [2])
    value_model.add_operation(Op.ADD, [*ins, act], [out])
    value_model.identify_inputs_and_outputs([*ins, act], [out])
    model.add_operand(T.SUBGRAPH)
    assert code(model.set_operand_value_from_model, 0, value_model) == BAD_STATE  # unfinished
    value_model.finish()
    assert code(model.set_operand_value_from_model, 0, None) == UNEXPECTED_NULL
    assert code(model.set_operand_value_from_model, -1, value_model) == BAD_DATA
    assert code(model.set_operand_value_from_model, 1, value_model) == BAD_DATA
    assert code(model.finish) == BAD_DATA
    assert code(model.set_operand_value_from_model, 0, value_model) == BAD_STATE


def test_ValidationTestModel_AddOperation(model):
    assert code(model.add_operation, Op.AVERAGE_POOL_2D, None, [0]) == UNEXPECTED_NULL
    assert code(model.add_operation, Op.AVERAGE_POOL_2D, [0], None) == UNEXPECTED_NULL
    assert code(model.add_operation, -1, [0], [0]) == BAD_DATA  # invalid operation type
    assert code(model.finish) == BAD_DATA
    assert code(model.add_operation, Op.AVERAGE_POOL_2D, [0], [0]) == BAD_STATE


def test_ValidationTestModel_IdentifyInputsAndOutputs(model):
    assert code(model.identify_inputs_and_outputs, None, [0]) == UNEXPECTED_NULL
    assert code(model.identify_inputs_and_outputs, [0], None) == UNEXPECTED_NULL
    create_model(model)
    assert code(model.identify_inputs_and_outputs, [0], [0]) == BAD_STATE


def test_ValidationTestModel_RelaxComputationFloat32toFloat16(model):
    create_model(model)
    assert code(model.relax_computation_float32_to_float16, True) == BAD_STATE
    assert code(model.relax_computation_float32_to_float16, False) == BAD_STATE


def test_ValidationTestModel_Finish(model):
    create_model(model)
    assert code(model.finish) == BAD_STATE


def test_ValidationTestModel_EmptyModel(model):
    assert code(model.finish) == BAD_DATA


def test_ValidationTestModel_CreateCompilation(model):
    assert code(Compilation, None) == UNEXPECTED_NULL
    assert code(Compilation, model) == BAD_STATE  # not finished


def test_ValidationTestModel_CreateCompilationForDevices(model):
    create_model(model)
    device = devices()[0]
    assert code(Compilation.for_devices, None, [device]) == UNEXPECTED_NULL
    assert code(Compilation.for_devices, model, []) == BAD_DATA  # empty device list
    assert code(Compilation.for_devices, model, [device, device]) == BAD_DATA  # duplicates
    assert code(Compilation.for_devices, model, [device, None]) == UNEXPECTED_NULL
    assert code(Compilation.for_devices, None, None) == UNEXPECTED_NULL
    assert code(Compilation.for_devices, model, None) == UNEXPECTED_NULL


def test_ValidationTestModel_GetSupportedOperationsForDevices(model):
    create_model(model)
    device = devices()[0]
    supported = model.get_supported_operations_for_devices
    assert code(supported, []) == BAD_DATA  # empty device list
    assert code(supported, [device, device]) == BAD_DATA  # duplicates
    assert code(supported, [device, None]) == UNEXPECTED_NULL
    assert code(supported, None) == UNEXPECTED_NULL
    assert supported([device]) == [True]


def _add_chain(model, edges, inputs, outputs, kind=Op.ADD):
    for ins, outs in edges:
        assert code(model.add_operation, kind, ins, outs) == NO_ERROR
    assert code(model.identify_inputs_and_outputs, inputs, outputs) == NO_ERROR


def test_ValidationTestModel_Cycle(model):
    _tensors(model, 2)
    model.add_operand(T.INT32)
    _tensors(model, 3)
    _add_chain(model, [([0, 4, 2], [3]), ([1, 3, 2], [4]), ([4, 0, 2], [5])], [0, 1, 2], [5])
    assert code(model.finish) == BAD_DATA


def test_ValidationTestModel_AcyclicReadBeforeWrite(model):
    _tensors(model, 3)
    _add_chain(model, [([2], [1]), ([0], [2])], [0], [1], Op.LOGISTIC)
    assert code(model.finish) == NO_ERROR  # operations need not be added in run order


def test_ValidationTestModel_MissingWrite(model):
    _tensors(model, 4)
    _add_chain(model, [([1], [2]), ([0], [3])], [0], [2, 3], Op.LOGISTIC)
    assert code(model.finish) == BAD_DATA


def test_ValidationTestModel_UnwrittenOperand(model):
    _tensors(model, 3)
    _add_chain(model, [([0], [2])], [0], [2], Op.LOGISTIC)
    assert code(model.finish) == BAD_DATA


def test_ValidationTestModel_MultipleWrite(model):
    model.add_operand(T.TENSOR_FLOAT32, [1])
    model.add_operand(T.INT32)
    model.add_operand(T.TENSOR_FLOAT32, [1])
    _add_chain(model, [([0, 0, 1], [2]), ([0, 0, 1], [2])], [0, 1], [2])
    assert code(model.finish) == BAD_DATA


def test_ValidationTestModel_AddOperandDimensionProductOverflow(model):
    dims = [5, 4, 4, 786433, 5, 3, 16777216, 4, 5]
    assert code(model.add_operand, T.TENSOR_FLOAT32, dims) == BAD_DATA


@pytest.fixture
def identify(model):
    """``ValidationTestIdentify``: 0, 1 TENSOR_FLOAT32 [1], 2 INT32, 3 = ADD(0, 1, 2)."""
    _tensors(model, 2)
    model.add_operand(T.INT32)
    _tensors(model, 1)
    model.add_operation(Op.ADD, [0, 1, 2], [3])
    return model


def test_ValidationTestIdentify_Ok(identify):
    assert code(identify.identify_inputs_and_outputs, [0, 1, 2], [3]) == NO_ERROR
    assert code(identify.finish) == NO_ERROR


def test_ValidationTestIdentify_InputIsOutput(identify):
    assert code(identify.identify_inputs_and_outputs, [0, 1, 2], [3, 0]) == BAD_DATA


def test_ValidationTestIdentify_OutputIsInput(identify):
    assert code(identify.identify_inputs_and_outputs, [0, 1, 2, 3], [3]) == BAD_DATA


def test_ValidationTestIdentify_DuplicateInputs(identify):
    assert code(identify.identify_inputs_and_outputs, [0, 1, 2, 0], [3]) == BAD_DATA


def test_ValidationTestIdentify_DuplicateOutputs(identify):
    assert code(identify.identify_inputs_and_outputs, [0, 1, 2], [3, 3]) == BAD_DATA


# ---------------------------------------------------------------- rules of the issue beyond TestValidation
def test_add_operation_validates_the_signature_at_the_call(model):
    a, b, out = _tensors(model, 3)
    assert code(model.add_operation, Op.ADD, [a, b], [out]) == BAD_DATA  # ADD needs 3 inputs
    assert code(model.add_operation, Op.ADD, "01", [out]) == BAD_DATA  # not a list of indexes
    assert code(model.add_operation, Op.ADD, [a, b, 1.0], [out]) == BAD_DATA
    assert model.operations == ()


def test_a_failed_finish_leaves_the_model_invalid(model):
    a, b, out = _tensors(model, 3)
    model.add_operand(T.INT32)
    model.add_operation(Op.ADD, [a, b, 3], [out])
    model.identify_inputs_and_outputs([a, b], [out])  # 3 is neither input nor constant
    assert code(model.finish) == BAD_DATA
    for call, args in ((model.add_operand, (T.INT32,)), (model.set_operand_value, (3, 0)),
                       (model.identify_inputs_and_outputs, ([a], [out])), (model.finish, ()),
                       (model.relax_computation_float32_to_float16, (True,))):
        assert code(call, *args) == BAD_STATE, call.__name__
    assert code(Compilation, model) == BAD_STATE
    assert code(model.get_supported_operations_for_devices, devices()[:1]) == BAD_STATE


def test_input_and_output_rules_of_identify(model):
    a, b, out = _tensors(model, 3)
    act = model.add_operand(T.INT32)
    model.add_operation(Op.ADD, [a, b, act], [out])
    model.identify_inputs_and_outputs([a, b, act], [out])
    assert code(model.identify_inputs_and_outputs, [a, b, act], [out]) == BAD_DATA  # already identified
    model.set_operand_value(act, 0)  # accepted as in NNAPI, but an input cannot hold a value:
    assert code(model.finish) == BAD_DATA


def test_wrong_argument_types_are_bad_data_not_python_errors(model):
    index = add_tensor(model)
    assert code(model.add_operand, "TENSOR_FLOAT32", [2]) == BAD_DATA
    assert code(model.add_operand, T.TENSOR_QUANT8_ASYMM, [2], "1.0") == BAD_DATA
    assert code(model.add_operand, T.TENSOR_QUANT8_ASYMM, [2], 1.0, 1.5) == BAD_DATA
    assert code(model.add_operand, 1234) == BAD_DATA
    assert code(model.set_operand_value, "0", np.zeros(2, np.float32)) == BAD_DATA
    assert code(model.set_operand_value, index, ["a", "b"]) == BAD_DATA
    assert code(model.set_operand_value, index, object()) == BAD_DATA
    assert code(model.set_operand_value_from_memory, index, b"not memory", 0, 8) == BAD_DATA
    assert code(model.set_operand_value_from_model, index, "model") == BAD_DATA
    assert code(model.set_operand_symm_per_channel_quant_params, index, 0.5, 0) == BAD_DATA
    assert code(model.relax_computation_float32_to_float16, "yes") == BAD_DATA
    assert code(Model, 5) == BAD_DATA
    assert code(model.get_supported_operations_for_devices, ["nnapi-reference"]) == BAD_STATE
    create_model(model_two := Model("two"))
    assert code(model_two.get_supported_operations_for_devices, ["nnapi-reference"]) == BAD_DATA


def test_supported_operations_are_reported_in_the_order_they_were_added(model):
    from nnscope.runtime.drivers.registry import create_driver  # noqa: PLC0415
    minimal = create_driver("sample-minimal")  # ADD but not MUL
    x, mid, out = _tensors(model, 3, (1, 4))
    act = model.add_operand(T.INT32)
    model.set_operand_value(act, 0)
    model.add_operation(Op.ADD, [mid, mid, act], [out])  # added first, runs second
    model.add_operation(Op.MUL, [x, x, act], [mid])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    assert [op.type for op in model.operations] == [Op.MUL, Op.ADD]  # run order
    assert model.get_supported_operations_for_devices([minimal]) == [True, False]
