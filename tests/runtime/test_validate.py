import dataclasses

import pytest

from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (DataLocation, ErrorStatus, HalModel, Operand, OperandLifetime as L,
                               OperandType as T, Operation, OperationType as Op, Subgraph)
from nnscope.runtime.hal.validate import merge_dimensions, run_order, validate_model, validate_request
from nnscope.runtime.model import check_operation
from tests.runtime.helpers import add_model

F = T.TENSOR_FLOAT32


def _t(lifetime=L.TEMPORARY_VARIABLE, dims=(2,)):
    return Operand(F, dims, lifetime=lifetime)


def _act():
    return Operand(T.INT32, lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 0, 4))


def _model(operands, operations, inputs, outputs):
    return HalModel(Subgraph(tuple(operands), tuple(operations), tuple(inputs), tuple(outputs)),
                    operand_values=b"\0" * 4)


def _fails(model, pattern):
    with pytest.raises(HalError, match=pattern) as info:
        validate_model(model, check_operation)
    assert info.value.status == ErrorStatus.INVALID_ARGUMENT


def test_valid_model_returns_run_order():
    assert validate_model(add_model().to_hal(), check_operation) == [0]


def test_operand_written_twice():
    ops = [Operation(Op.ADD, (0, 0, 1), (2,)), Operation(Op.ADD, (0, 0, 1), (2,))]
    _fails(_model([_t(L.SUBGRAPH_INPUT), _act(), _t(L.SUBGRAPH_OUTPUT)], ops, [0], [2]),
           "operand 2 is written by operations 0 and 1")


def test_operand_never_written():
    ops = [Operation(Op.ADD, (0, 3, 1), (2,))]
    _fails(_model([_t(L.SUBGRAPH_INPUT), _act(), _t(L.SUBGRAPH_OUTPUT), _t()], ops, [0], [2]),
           r"operand 3 \(TEMPORARY_VARIABLE\) is never written")


def test_operation_writing_a_constant_or_input():
    ops = [Operation(Op.ADD, (0, 0, 1), (1,))]
    _fails(_model([_t(L.SUBGRAPH_INPUT), _act()], ops, [0], []),
           r"operation 0 \(ADD\) writes operand 1, which is a CONSTANT_COPY")


def test_input_and_output_at_once():
    _fails(_model([Operand(F, (2,), lifetime=L.SUBGRAPH_INPUT)], [], [0], [0]),
           "operand 0 is both a model input and a model output")


def test_cycle_is_detected():
    ops = [Operation(Op.ADD, (0, 3, 1), (2,)), Operation(Op.ADD, (2, 0, 1), (3,))]
    graph = Subgraph((_t(L.SUBGRAPH_INPUT), _act(), _t(), _t()), tuple(ops), (0,), ())
    with pytest.raises(HalError, match=r"operations \[0, 1\] form a cycle"):
        run_order(graph)


def test_constant_size_must_match_type_and_shape():
    bad = Operand(F, (4,), lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 0, 4))
    ops = [Operation(Op.ADD, (0, 2, 1), (3,))]
    model = HalModel(Subgraph((_t(L.SUBGRAPH_INPUT, (4,)), _act(), bad, _t(L.SUBGRAPH_OUTPUT, (4,))),
                              tuple(ops), (0,), (3,)), operand_values=b"\0" * 16)
    _fails(model, r"operand 2: value has 4 bytes, TENSOR_FLOAT32\[4\] needs 16")


def test_out_of_range_indexes_and_pools():
    ops = [Operation(Op.ADD, (0, 0, 7), (2,))]
    _fails(_model([_t(L.SUBGRAPH_INPUT), _act(), _t(L.SUBGRAPH_OUTPUT)], ops, [0], [2]),
           r"operation 0 \(ADD\) input 2: operand index 7 out of range")
    ref = Operand(F, (2,), lifetime=L.CONSTANT_REFERENCE, location=DataLocation(3, 0, 8))
    _fails(_model([ref], [], [], []), "operand 0: pool index 3 out of range")


def test_registry_check_names_the_operation():
    ops = [Operation(Op.ADD, (0, 0), (2,))]
    _fails(_model([_t(L.SUBGRAPH_INPUT), _act(), _t(L.SUBGRAPH_OUTPUT)], ops, [0], [2]),
           r"operation 0 \(ADD\): ")


def test_request_validation():
    hal = add_model().to_hal()
    pools = (bytearray(16), bytearray(16), bytearray(16))
    good = Request((RequestArgument(pool_index=0, length=16), RequestArgument(pool_index=1, length=16)),
                   (RequestArgument(pool_index=2, length=16),), pools)
    validate_request(good, hal)
    with pytest.raises(HalError, match="request has 1 inputs, model has 2"):
        validate_request(dataclasses.replace(good, inputs=good.inputs[:1]), hal)
    short = dataclasses.replace(good, inputs=(RequestArgument(pool_index=0, length=8), good.inputs[1]))
    with pytest.raises(HalError, match=r"input 0: 8 bytes given, \[1, 4\] needs 16 \(operand 0\)"):
        validate_request(short, hal)
    outside = dataclasses.replace(good, outputs=(RequestArgument(pool_index=2, offset=8, length=16),))
    with pytest.raises(HalError, match=r"output 0: region \[8, 24\) outside pool 2"):
        validate_request(outside, hal)
    wrong_dims = dataclasses.replace(good, inputs=(RequestArgument(pool_index=0, length=16, dimensions=(2, 2)),
                                                   good.inputs[1]))
    with pytest.raises(HalError, match="do not match operand dimensions"):
        validate_request(wrong_dims, hal)


def test_merge_dimensions():
    assert merge_dimensions((0, 4), (3, 4)) == (3, 4)
    assert merge_dimensions((), (3,)) == (3,)
    assert merge_dimensions((2, 4), ()) == (2, 4)
    assert merge_dimensions((2, 4), (3, 4)) is None
    assert merge_dimensions((2,), (2, 1)) is None


def test_constant_reference_in_pool_minus_one_reads_operand_values():
    ref = Operand(F, (2,), lifetime=L.CONSTANT_REFERENCE, location=DataLocation(-1, 0, 8))
    ops = [Operation(Op.ADD, (0, 2, 1), (3,))]
    model = HalModel(Subgraph((_t(L.SUBGRAPH_INPUT), _act(), ref, _t(L.SUBGRAPH_OUTPUT)), tuple(ops),
                              (0,), (3,)), operand_values=b"\0" * 8)
    assert validate_model(model, check_operation) == [0]
