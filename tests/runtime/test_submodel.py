"""Sub-model extraction (runtime._submodel): interfaces, numbering, constants, execution.

The graphs come from :mod:`tests.support.graphs`.
"""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime._submodel import extract, readers_of, step_interface
from nnscope.runtime.hal.types import (DataLocation, HalModel, OperandLifetime as L, OperationType as Op,
                               Subgraph)
from nnscope.runtime.ops.executor import CpuExecutor
from tests.support.graphs import X, Y, GraphBuilder, chain, run_steps


def test_middle_operation_reads_temporary_and_model_input_and_writes_temporary():
    model, (x, y, c, t1, t2, out) = chain()
    step = extract(model, [1])
    assert (step.inputs, step.outputs) == ((t1, y), (t2,))
    graph = step.model.main
    assert [o.type for o in graph.operations] == [Op.MUL]
    assert graph.input_indexes == (0, 1) and graph.output_indexes == (3,)
    assert [graph.operands[i].lifetime for i in range(4)] == [
        L.SUBGRAPH_INPUT, L.SUBGRAPH_INPUT, L.CONSTANT_COPY, L.SUBGRAPH_OUTPUT]
    result, = CpuExecutor(step.model).run([X + 0.5, Y])
    np.testing.assert_allclose(result, (X + 0.5) * Y)


def test_constants_are_copied_into_own_values_only_when_used():
    model, (x, y, c, t1, t2, out) = chain()
    first = extract(model, [0]).model
    middle = extract(model, [1]).model
    # first step: c (24 bytes) + its activation scalar; middle: only the activation scalar
    assert len(first.operand_values) == 24 + 4 and len(middle.operand_values) == 4
    constant = first.main.operands[first.main.operations[0].inputs[1]]
    assert constant.location == DataLocation(-1, 0, 24)
    assert np.frombuffer(first.operand_values, np.float32, 6).tolist() == [0.5] * 6


def test_split_steps_reproduce_whole_model():
    model, (x, y, c, t1, t2, out) = chain()
    steps = [extract(model, ops) for ops in ([0], [1, 2])]
    assert [(s.inputs, s.outputs) for s in steps] == [((x,), (t1,)), ((t1, y), (out,))]
    got = run_steps([(s.model, s.inputs, s.outputs) for s in steps], model, [X, Y])
    want = CpuExecutor(model).run([X, Y])
    np.testing.assert_allclose(got[0], want[0])


def test_model_output_read_by_a_later_operation_is_output_of_its_step_and_input_of_next():
    g = GraphBuilder()
    x, y = g.tensor(), g.tensor()
    first = g.binary(Op.ADD, x, y)
    second = g.binary(Op.MUL, first, first)
    model = g.build([x, y], [first, second])
    a, b = extract(model, [0]), extract(model, [1])
    assert a.outputs == (first,) and b.inputs == (first,) and b.outputs == (second,)
    # kept inside one step, it is a sub-model output that the step also reads
    both = extract(model, [0, 1])
    assert both.outputs == (first, second)
    got = run_steps([(both.model, both.inputs, both.outputs)], model, [X, Y])
    np.testing.assert_allclose(got[1], (X + Y) ** 2)


def test_pool_constants_keep_the_same_pool_objects_renumbered():
    g = GraphBuilder()
    x = g.tensor()
    g.const(np.zeros((2, 3)), pool=0)  # unused by the step below
    w = g.const(np.full((2, 3), 3.0), pool=1)
    t = g.binary(Op.MUL, x, w)
    out = g.binary(Op.ADD, t, x)
    model = g.build([x], [out])
    sub = extract(model, [0]).model
    assert len(sub.pools) == 1 and sub.pools[0] is model.pools[1]
    weight = sub.main.operands[sub.main.operations[0].inputs[1]]
    assert weight.lifetime == L.CONSTANT_REFERENCE and weight.location.pool_index == 0
    np.testing.assert_allclose(CpuExecutor(sub).run([X])[0], X * 3)


def test_unknown_dimensions_stay_unknown():
    g = GraphBuilder()
    x, y = g.tensor(), g.tensor()
    t = g.binary(Op.ADD, x, y, dims=(0, 0))
    out = g.binary(Op.MUL, t, y, dims=(0, 0))
    model = g.build([x, y], [out])
    first, second = extract(model, [0]), extract(model, [1])
    assert first.model.main.operands[first.model.main.output_indexes[0]].dimensions == (0, 0)
    assert second.model.main.operands[second.model.main.input_indexes[0]].dimensions == (0, 0)
    got = run_steps([(s.model, s.inputs, s.outputs) for s in (first, second)], model, [X, Y])
    np.testing.assert_allclose(got[0], (X + Y) * Y)


def test_operands_are_renumbered_in_order_of_first_use():
    model, (x, y, c, t1, t2, out) = chain()
    step = extract(model, [2])
    graph = step.model.main
    assert len(graph.operands) == 4  # t2, c, activation, out
    assert graph.operations[0].inputs == (0, 1, 2) and graph.operations[0].outputs == (3,)


def test_model_with_referenced_subgraphs_keeps_values_pools_and_subgraphs():
    model, _ = chain()
    referenced = Subgraph((), (), (), ())
    model = HalModel(model.main, (referenced,), model.operand_values, (bytearray(8),))
    sub = extract(model, [1]).model
    assert sub.referenced == (referenced,) and sub.operand_values is model.operand_values
    assert sub.pools is model.pools


def test_interface_helpers_use_readers_of_the_whole_graph():
    model, (x, y, c, t1, t2, out) = chain()
    readers = readers_of(model.main)
    assert readers[c] == {0, 2} and readers[t1] == {1}
    assert step_interface(model.main, [0, 1], readers) == ([x, y], [t2])


@pytest.mark.parametrize("operations", [[0], [0, 1], [0, 1, 2]])
def test_relax_flag_survives_extraction(operations):
    g = GraphBuilder()
    x, y = g.tensor(), g.tensor()
    out = g.binary(Op.MUL, g.binary(Op.ADD, g.binary(Op.ADD, x, y), y), x)
    model = g.build([x, y], [out], relax=True)
    assert extract(model, operations).model.relax_float32_to_float16
