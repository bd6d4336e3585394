import numpy as np
import pytest

from nnscope.runtime import Memory, Model, NnError, ResultCode
from nnscope.runtime.hal.types import OperandLifetime as L, OperandType as T, OperationType as Op
from tests.runtime.helpers import add_model, run


def _two_inputs(model, shape=(1, 4)):
    return model.add_operand(T.TENSOR_FLOAT32, shape), model.add_operand(T.TENSOR_FLOAT32, shape)


def test_add_operand_returns_consecutive_indexes_and_rejects_bad_types():
    model = Model()
    assert [model.add_operand(T.TENSOR_FLOAT32, (2,)), model.add_operand(T.INT32)] == [0, 1]
    with pytest.raises(NnError) as info:
        model.add_operand(1234, (2,))
    assert info.value.code == ResultCode.BAD_DATA and "operand 2" in info.value.message
    with pytest.raises(NnError, match="scalar but has dimensions"):
        model.add_operand(T.INT32, (3,))
    with pytest.raises(NnError, match="scale > 0"):
        model.add_operand(T.TENSOR_QUANT8_ASYMM, (2,), scale=0.0)


def test_small_values_are_copied_large_ones_go_to_a_shared_pool():
    model = Model()
    small, large = model.add_operand(T.TENSOR_FLOAT32, (4,)), model.add_operand(T.TENSOR_FLOAT32, (64,))
    a, out = _two_inputs(model, (64,))
    act = model.add_operand(T.INT32)
    small_value = np.arange(4, dtype=np.float32)
    large_value = np.arange(64, dtype=np.float32)
    model.set_operand_value(small, small_value)
    model.set_operand_value(large, large_value)
    model.set_operand_value(act, 0)
    model.add_operation(Op.ADD, [a, large, act], [out])
    model.identify_inputs_and_outputs([a], [out])
    model.finish()
    hal = model.to_hal()
    assert hal.main.operands[small].lifetime == L.CONSTANT_COPY
    assert hal.main.operands[large].lifetime == L.CONSTANT_REFERENCE
    pool = hal.pools[hal.main.operands[large].location.pool_index]
    assert pool.fd >= 0  # real shared memory a driver process could map
    loc = hal.main.operands[large].location
    assert np.array_equal(np.frombuffer(pool.buffer(), np.float32, 64, loc.offset), large_value)
    large_value[:] = -1  # the model keeps its own copy
    result = run(model, np.ones(64, np.float32), out_shape=(64,))
    assert np.array_equal(result, np.arange(64, dtype=np.float32) + 1)


def test_value_errors_name_the_operand():
    model = Model()
    t = model.add_operand(T.TENSOR_FLOAT32, (2, 2))
    with pytest.raises(NnError, match=r"operand 0 is TENSOR_FLOAT32 \(float32\), value has dtype float64"):
        model.set_operand_value(t, np.zeros((2, 2)))
    with pytest.raises(NnError, match="operand 0: value has 8 bytes"):
        model.set_operand_value(t, np.zeros(2, np.float32))
    with pytest.raises(NnError, match="operand index 7 out of range"):
        model.set_operand_value(7, 1)


def test_value_from_memory_is_a_constant_reference():
    with Memory.create_shared(64) as memory:
        memory.array(np.float32)[:4] = [1, 2, 3, 4]
        model = Model()
        a, c = _two_inputs(model)
        act, out = model.add_operand(T.INT32), model.add_operand(T.TENSOR_FLOAT32, (1, 4))
        model.set_operand_value_from_memory(c, memory, 0, 16)
        model.set_operand_value(act, 0)
        model.add_operation(Op.ADD, [a, c, act], [out])
        model.identify_inputs_and_outputs([a], [out])
        model.finish()
        assert model.to_hal().main.operands[c].lifetime == L.CONSTANT_REFERENCE
        result = run(model, np.ones((1, 4), np.float32))
        assert result.tolist() == [[2, 3, 4, 5]]
        other = Model()
        index = other.add_operand(T.TENSOR_FLOAT32, (1, 4))
        with pytest.raises(NnError, match=r"operand 0: region \[60, 76\) outside memory of 64 bytes"):
            other.set_operand_value_from_memory(index, memory, 60, 16)


def test_finished_model_is_immutable():
    model = add_model()
    for call in (lambda: model.add_operand(T.INT32), lambda: model.finish(),
                 lambda: model.add_operation(Op.ADD, [0, 1, 2], [3]),
                 lambda: model.relax_computation_float32_to_float16(True)):
        with pytest.raises(NnError) as info:
            call()
        assert info.value.code == ResultCode.BAD_STATE


def test_add_operation_checks_type_and_indexes():
    model = Model()
    a, b = _two_inputs(model)
    with pytest.raises(NnError, match="unknown operation type 999"):
        model.add_operation(999, [a], [b])
    with pytest.raises(NnError, match=r"operation 0 \(ADD\): input\[2\]: operand index 9 out of range"):
        model.add_operation(Op.ADD, [a, b, 9], [b])


def test_add_operation_reports_registry_validation_with_operation_index():
    model = Model()
    a, b = _two_inputs(model)
    out = model.add_operand(T.TENSOR_FLOAT32, (1, 4))
    with pytest.raises(NnError) as info:
        model.add_operation(Op.ADD, [a, b], [out])  # missing the activation input
    assert info.value.code == ResultCode.BAD_DATA
    assert "operation 0 (ADD)" in info.value.message
    assert model.operations == ()  # not added


def test_operations_are_sorted_into_run_order():
    model = Model()
    x = model.add_operand(T.TENSOR_FLOAT32, (1, 4))
    act = model.add_operand(T.INT32)
    mid, out = model.add_operand(T.TENSOR_FLOAT32, (1, 4)), model.add_operand(T.TENSOR_FLOAT32, (1, 4))
    model.set_operand_value(act, 0)
    model.add_operation(Op.MUL, [mid, mid, act], [out])  # added before its producer
    model.add_operation(Op.ADD, [x, x, act], [mid])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    assert [op.type for op in model.operations] == [Op.ADD, Op.MUL]
    assert run(model, np.full((1, 4), 1.5, np.float32)).tolist() == [[9.0] * 4]


def test_per_channel_quant_params_are_checked():
    model = Model()
    w = model.add_operand(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (3, 1, 1, 2))
    with pytest.raises(NnError, match="2 channel scales for 3 channels"):
        model.set_operand_symm_per_channel_quant_params(w, [0.5, 0.25], 0)
    model.set_operand_symm_per_channel_quant_params(w, [0.5, 0.25, 1.0], 0)
    assert model.operands[w].channel_quant.scales == (0.5, 0.25, 1.0)
    f = model.add_operand(T.TENSOR_FLOAT32, (3,))
    with pytest.raises(NnError, match="not TENSOR_QUANT8_SYMM_PER_CHANNEL"):
        model.set_operand_symm_per_channel_quant_params(f, [1.0, 1.0, 1.0], 0)


def test_value_from_model_flattens_referenced_subgraphs():
    body = add_model()
    model = Model("outer")
    sub = model.add_operand(T.SUBGRAPH)
    model.set_operand_value_from_model(sub, body)
    x = model.add_operand(T.TENSOR_FLOAT32, (1, 4))
    act, out = model.add_operand(T.INT32), model.add_operand(T.TENSOR_FLOAT32, (1, 4))
    model.set_operand_value(act, 0)
    model.add_operation(Op.ADD, [x, x, act], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    hal = model.to_hal()
    assert len(hal.referenced) == 1
    assert hal.main.operands[sub].lifetime == L.SUBGRAPH
    assert hal.referenced[hal.main.operands[sub].location.offset].operations[0].type == Op.ADD
    with pytest.raises(NnError) as info:
        Model().set_operand_value_from_model(0, body)
    assert info.value.code == ResultCode.BAD_DATA  # index 0 out of range
    with pytest.raises(NnError) as info:
        Model().set_operand_value_from_model(0, Model())
    assert info.value.code == ResultCode.BAD_STATE  # the referenced model is checked first, as AOSP


def test_from_hal_round_trip_and_bad_hal_rejected():
    hal = add_model().to_hal()
    again = Model.from_hal(hal, name="copy")
    assert again.finished and again.name == "copy" and again.to_hal() is hal
    assert run(again, np.ones((1, 4), np.float32), np.ones((1, 4), np.float32)).tolist() == [[2.0] * 4]
    import dataclasses
    broken = dataclasses.replace(hal, main=dataclasses.replace(hal.main, input_indexes=(0, 0)))
    with pytest.raises(NnError, match="listed twice"):
        Model.from_hal(broken)
    with pytest.raises(NnError) as info:
        Model().to_hal()
    assert info.value.code == ResultCode.BAD_STATE


def test_identify_rejects_constants_and_duplicates():
    model = Model()
    a = model.add_operand(T.INT32)
    model.set_operand_value(a, 1)
    with pytest.raises(NnError, match="has a value and cannot be a model input"):
        model.identify_inputs_and_outputs([a], [])
    b = model.add_operand(T.TENSOR_FLOAT32, (1,))
    with pytest.raises(NnError, match="duplicate input"):
        model.identify_inputs_and_outputs([b, b], [])
