"""Partitioning across fake devices: device choice, step grouping, VLOG, and that the steps'
sub-models, run in order with CpuExecutor, compute what the whole model computes."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope import vlog
from nnscope.runtime.api import BadDataError, NnError, ResultCode
from nnscope.runtime.drivers.base import Device
from nnscope.runtime.hal.device_types import Capabilities, PerformanceInfo as Perf
from nnscope.runtime.hal.types import (HalModel, OperandLifetime as L, OperandType as T,
                               OperationType as Op, Preference)
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.partition import (Partition, UnsupportedOperationError,
                               find_best_device_for_each_operation, partition)
from nnscope.runtime.plan import ExecutionPlan
from tests.support.graphs import X, Y, GraphBuilder, chain, run_steps
from tests.support.log_capture import captured_log

FAST, LOW_POWER = Preference.FAST_SINGLE_ANSWER, Preference.LOW_POWER


def simple(part: Partition) -> bool:
    """One step running the whole, unchanged model: its plan is simple."""
    return ExecutionPlan.from_partition(part).simple


class FakeDevice(Device):
    """Advertises ``perf`` per operand type; supports operations whose type is in ``ops`` (all
    if None) and whose input 0 has a type in ``perf``."""

    def __init__(self, name, perf, ops=None, relaxed=Perf(), answer=None):
        self.name, self.perf, self.ops, self.relaxed, self.answer = name, perf, ops, relaxed, answer
        self.support_calls = 0

    def capabilities(self) -> Capabilities:
        return Capabilities(self.relaxed, self.relaxed, tuple(self.perf.items()))

    def supported_operations(self, model: HalModel) -> list[bool]:
        self.support_calls += 1
        if self.answer is not None:
            return self.answer
        graph = model.main
        return [(self.ops is None or op.type in self.ops)
                and graph.operands[op.inputs[0]].type in self.perf for op in graph.operations]

    def prepare_model(self, *args, **kwargs):
        raise NotImplementedError("partitioning never prepares")


def everything(name, exec_time=1.0, power=1.0, ops=None):
    perf = Perf(exec_time, power)
    return FakeDevice(name, {t: perf for t in (T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM,
                                               T.TENSOR_INT32)}, ops)


def run_partition(part: Partition, inputs) -> list[np.ndarray]:
    return run_steps([(s.model, s.inputs, s.outputs) for s in part.steps], part.model, inputs)


def assert_same_as_whole(part: Partition, inputs):
    got, want = run_partition(part, inputs), CpuExecutor(part.model).run(inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.fixture
def vlog_lines():
    """Messages logged under tag ExecutionPlan while vlog ``compilation`` and the finer
    ``partition`` (one line per operation) are on."""
    with captured_log("nn.ExecutionPlan", "compilation partition") as lines:
        yield lines


@pytest.fixture
def summary_lines():
    """Messages logged under tag ExecutionPlan with ``NN_VLOG=all`` (no ``partition``)."""
    with captured_log("nn.ExecutionPlan", "all") as lines:
        yield lines


# ------------------------------------------------------------------ device choice
@pytest.mark.parametrize("preference, expected", [
    (FAST, 0), (Preference.SUSTAINED_SPEED, 0), (LOW_POWER, 1)])
def test_preference_selects_exec_time_or_power_usage(preference, expected):
    model, _ = chain()
    devices = [everything("quick", exec_time=0.5, power=2.0),
               everything("frugal", exec_time=1.5, power=0.4)]
    assert find_best_device_for_each_operation(model, devices, preference) == [expected] * 3


def test_ties_go_to_the_earlier_device():
    model, _ = chain()
    devices = [everything("slow", 2.0), everything("a", 0.8), everything("b", 0.8)]
    assert find_best_device_for_each_operation(model, devices, FAST) == [1, 1, 1]


def test_performance_is_looked_up_for_the_type_of_input_zero():
    g = GraphBuilder()
    x = g.tensor((1, 4))
    q = g.tensor((1, 4), T.TENSOR_QUANT8_ASYMM, 0.5, 128)
    g.op(Op.QUANTIZE, (x,), (q,))
    q2 = g.binary(Op.ADD, q, q)
    out = g.tensor((1, 4))
    g.op(Op.DEQUANTIZE, (q2,), (out,))
    model = g.build([x], [out])
    devices = [FakeDevice("floaty", {T.TENSOR_FLOAT32: Perf(0.5, 1), T.TENSOR_QUANT8_ASYMM: Perf(3, 1)}),
               FakeDevice("quanty", {T.TENSOR_FLOAT32: Perf(2, 1), T.TENSOR_QUANT8_ASYMM: Perf(0.2, 1)})]
    assert find_best_device_for_each_operation(model, devices, FAST) == [0, 1, 1]


def test_relaxed_model_uses_relaxed_float_performance():
    model, _ = chain()
    plain = FakeDevice("plain", {T.TENSOR_FLOAT32: Perf(0.5, 1)}, relaxed=Perf(0.9, 1))
    relaxing = FakeDevice("relaxing", {T.TENSOR_FLOAT32: Perf(0.7, 1)}, relaxed=Perf(0.3, 1))
    assert find_best_device_for_each_operation(model, [plain, relaxing], FAST) == [0, 0, 0]
    relaxed = HalModel(model.main, operand_values=model.operand_values, relax_float32_to_float16=True)
    assert find_best_device_for_each_operation(relaxed, [plain, relaxing], FAST) == [1, 1, 1]


def test_each_device_is_asked_for_support_once():
    model, _ = chain()
    devices = [everything("a", 0.5, ops={Op.ADD}), everything("b")]
    partition(model, devices, FAST)
    assert [d.support_calls for d in devices] == [1, 1]


def test_unsupported_operation_without_fallback_names_it():
    model, _ = chain()
    devices = [everything("adder", ops={Op.ADD})]
    with pytest.raises(UnsupportedOperationError) as info:
        partition(model, devices, FAST)
    error = info.value
    assert isinstance(error, BadDataError) and error.code == ResultCode.BAD_DATA
    assert (error.operation_index, error.operation_type) == (1, Op.MUL)
    assert "operation 1 (MUL)" in str(error) and "adder" in str(error)
    assert type(NnError(ResultCode.BAD_DATA, "x")) is BadDataError  # registry untouched


def test_unsupported_operation_goes_to_cpu_fallback():
    model, _ = chain()
    devices = [everything("adder", 0.5, ops={Op.ADD}), everything("cpu", ops=set())]
    assert find_best_device_for_each_operation(model, devices, FAST, cpu_index=1) == [0, 1, 0]


def test_wrong_number_of_support_flags_counts_as_no_support():
    model, _ = chain()
    devices = [FakeDevice("broken", {T.TENSOR_FLOAT32: Perf(0.1, 1)}, answer=[True]),
               everything("ok")]
    assert find_best_device_for_each_operation(model, devices, FAST) == [1, 1, 1]


# ------------------------------------------------------------------ VLOG
def test_vlog_lines_for_each_operation_and_single_device(vlog_lines):
    model, _ = chain()
    partition(model, [everything("slow", 2.0), everything("sample-float-fast", 0.8)], FAST)
    assert [line for line in vlog_lines if line.startswith("ModelBuilder::")] == [
        "ModelBuilder::findBestDeviceForEachOperation(ADD) = 1 (sample-float-fast)",
        "ModelBuilder::findBestDeviceForEachOperation(MUL) = 1 (sample-float-fast)",
        "ModelBuilder::findBestDeviceForEachOperation(ADD) = 1 (sample-float-fast)",
        "ModelBuilder::findBestDeviceForEachOperation: sample-float-fast takes 3 #0-2",
        "ModelBuilder::partitionTheWork: only one best device: sample-float-fast",
    ]


def test_vlog_all_sums_the_choice_up_in_one_line_per_device(summary_lines):
    """Issue 37: NN_VLOG=all printed one line per operation and device (380 of 427 lines);
    now one line per device that cannot run something, with counts and indexes, and one line
    of what each chosen device takes. The per-operation lines need the tag ``partition``."""
    model, _ = chain()  # ADD, MUL, ADD
    devices = [everything("adder", 0.5, ops={Op.ADD}), everything("muller", 0.6, ops={Op.MUL}),
               everything("none", 0.1, ops=set()), everything("cpu")]
    partition(model, devices, FAST)
    assert [line for line in summary_lines if line.startswith("ModelBuilder::findBest")] == [
        "ModelBuilder::findBestDeviceForEachOperation: adder can't do 1 of 3 operations: MUL #1",
        "ModelBuilder::findBestDeviceForEachOperation: muller can't do 2 of 3 operations: ADD x2 #0,2",
        "ModelBuilder::findBestDeviceForEachOperation: none can't do any of the 3 operations",
        "ModelBuilder::findBestDeviceForEachOperation: adder takes 2 #0,2; muller takes 1 #1",
    ]
    assert not any("can't do operation" in line for line in summary_lines)


def test_vlog_for_split_model_has_no_single_device_line(vlog_lines):
    model, _ = chain()
    partition(model, [everything("adder", 0.5, ops={Op.ADD}), everything("cpu")], FAST)
    assert "ModelBuilder::findBestDeviceForEachOperation(MUL) = 1 (cpu)" in vlog_lines
    assert "Device adder can't do operation MUL" in vlog_lines
    assert not any("only one best device" in line for line in vlog_lines)


def test_nothing_is_logged_when_compilation_tag_is_off(vlog_lines):
    model, _ = chain()
    with vlog.override(""):
        partition(model, [everything("a")], FAST)
    assert vlog_lines == []


# ------------------------------------------------------------------ steps
def assert_runnable_in_order(part: Partition):
    """Every step input is a model input or an output of an earlier step."""
    available = set(part.model.main.input_indexes)
    for step in part.steps:
        assert set(step.inputs) <= available, (step.index, step.inputs, available)
        available |= set(step.outputs)
    assert set(part.model.main.output_indexes) <= available
    assert sorted(i for s in part.steps for i in s.operations) == list(
        range(len(part.model.main.operations)))


def test_single_device_step_is_the_whole_model_unchanged():
    model, _ = chain()
    part = partition(model, [everything("a", 2.0), everything("b", 0.5)], FAST)
    assert simple(part) and len(part.steps) == 1
    step = part.steps[0]
    assert step.model is model and step.device_index == 1 and step.operations == (0, 1, 2)
    assert (step.inputs, step.outputs) == (model.main.input_indexes, model.main.output_indexes)
    assert part.operation_device == (1, 1, 1) and part.cross_device_operands == frozenset()


def test_single_device_when_everything_falls_back_to_cpu():
    model, _ = chain()
    part = partition(model, [everything("none", ops=set()), everything("cpu", ops=set())], FAST,
                     cpu_index=1)
    assert simple(part) and part.steps[0].device_index == 1


def test_chain_alternating_devices_gives_three_steps_that_compute_the_model():
    model, (x, y, c, t1, t2, out) = chain()
    part = partition(model, [everything("adder", 0.5, ops={Op.ADD}), everything("cpu")], FAST)
    assert not simple(part)
    assert [(s.device_index, s.operations) for s in part.steps] == [(0, (0,)), (1, (1,)), (0, (2,))]
    assert [(s.inputs, s.outputs) for s in part.steps] == [
        ((x,), (t1,)), ((t1, y), (t2,)), ((t2,), (out,))]
    assert part.operation_device == (0, 1, 0)
    assert part.cross_device_operands == {t1, t2}
    sub = part.steps[1].model.main
    assert [sub.operands[i].lifetime for i in sub.input_indexes] == [L.SUBGRAPH_INPUT] * 2
    assert [sub.operands[i].lifetime for i in sub.output_indexes] == [L.SUBGRAPH_OUTPUT]
    assert_runnable_in_order(part)
    assert_same_as_whole(part, [X, Y])


def diamond():
    """a = x + y (ADD), m = x * y (MUL), a2 = a + x (ADD), out = a2 + m (ADD)."""
    g = GraphBuilder()
    x, y = g.tensor(), g.tensor()
    a = g.binary(Op.ADD, x, y)
    m = g.binary(Op.MUL, x, y)
    a2 = g.binary(Op.ADD, a, x)
    out = g.binary(Op.ADD, a2, m)
    return g.build([x, y], [out]), (x, y, a, m, a2, out)


def test_diamond_merges_independent_operations_of_one_device():
    model, (x, y, a, m, a2, out) = diamond()
    part = partition(model, [everything("adder", 0.5, ops={Op.ADD}), everything("cpu")], FAST)
    # The highest-numbered device with ready work goes first; the ADD queue then drains
    # through operations 0, 2 and 3 as each becomes ready, in one step.
    assert [(s.device_index, s.operations) for s in part.steps] == [(1, (1,)), (0, (0, 2, 3))]
    assert part.steps[1].inputs == (x, y, m) and part.steps[1].outputs == (out,)
    assert part.cross_device_operands == {m}
    assert_runnable_in_order(part)
    assert_same_as_whole(part, [X, Y])


def test_operand_between_steps_of_the_same_device_does_not_cross_devices():
    g = GraphBuilder()
    x, y = g.tensor(), g.tensor()
    t1 = g.binary(Op.ADD, x, y)        # device 0, step 0
    u = g.binary(Op.SUB, x, y)         # device 0, step 0; read again only in step 2
    t2 = g.binary(Op.MUL, t1, y)       # device 1, step 1
    out = g.binary(Op.ADD, t2, u)      # device 0, step 2
    model = g.build([x, y], [out])
    part = partition(model, [everything("d0", 0.5, ops={Op.ADD, Op.SUB}), everything("d1")], FAST)
    assert [(s.device_index, s.operations) for s in part.steps] == [(0, (0, 1)), (1, (2,)), (0, (3,))]
    assert part.steps[0].outputs == (t1, u) and part.steps[2].inputs == (t2, u)
    assert part.cross_device_operands == {t1, t2}
    assert_same_as_whole(part, [X, Y])


def test_model_output_read_by_another_device_is_routed():
    g = GraphBuilder()
    x, y = g.tensor(), g.tensor()
    first = g.binary(Op.ADD, x, y)
    second = g.binary(Op.MUL, first, x)
    model = g.build([x, y], [first, second])
    part = partition(model, [everything("adder", 0.5, ops={Op.ADD}), everything("cpu")], FAST)
    assert [s.outputs for s in part.steps] == [(first,), (second,)]
    assert part.steps[1].inputs == (first, x) and part.cross_device_operands == {first}
    assert_same_as_whole(part, [X, Y])


def test_float_and_quant_devices_split_at_quantize_and_dequantize():
    g = GraphBuilder()
    x, y = g.tensor((1, 4)), g.tensor((1, 4))
    s = g.binary(Op.ADD, x, y)
    q = g.tensor((1, 4), T.TENSOR_QUANT8_ASYMM, 0.25, 100)
    g.op(Op.QUANTIZE, (s,), (q,))
    q2 = g.binary(Op.ADD, q, q)
    d = g.tensor((1, 4))
    g.op(Op.DEQUANTIZE, (q2,), (d,))
    out = g.binary(Op.MUL, d, x)
    model = g.build([x, y], [out])
    devices = [FakeDevice("sample-float-fast", {T.TENSOR_FLOAT32: Perf(0.8, 1)}),
               FakeDevice("sample-quant", {T.TENSOR_QUANT8_ASYMM: Perf(0.5, 1)})]
    part = partition(model, devices, FAST)
    assert [(s.device_index, s.operations) for s in part.steps] == [
        (0, (0, 1)), (1, (2, 3)), (0, (4,))]
    assert part.cross_device_operands == {q, d}
    quant_step = part.steps[1].model.main
    assert quant_step.operands[quant_step.input_indexes[0]].type == T.TENSOR_QUANT8_ASYMM
    assert quant_step.operands[quant_step.input_indexes[0]].scale == 0.25
    x_val = np.float32([[0.5, -1, 2, 3.25]])
    y_val = np.float32([[1, 2.5, -3, 0]])
    assert_same_as_whole(part, [x_val, y_val])


def conv(g: GraphBuilder, x: int, weights: np.ndarray, bias: np.ndarray) -> int:
    n, h, w, _ = g.operands[x].dimensions
    out = g.tensor((n, h, w, weights.shape[0]))
    scalars = [g.const(v, T.INT32) for v in (1, 1, 1, 0)]  # SAME, strides 1, fuse NONE
    g.op(Op.CONV_2D, (x, g.const(weights, pool=0), g.const(bias), *scalars), (out,))
    return out


def test_conv_accelerator_and_cpu_alternate_and_pool_constants_follow():
    rng = np.random.default_rng(7)
    g = GraphBuilder()
    x, z = g.tensor((1, 5, 5, 2)), g.tensor((1, 5, 5, 3))
    c1 = conv(g, x, rng.standard_normal((3, 3, 3, 2)), rng.standard_normal(3))
    added = g.binary(Op.ADD, c1, z)
    out = conv(g, added, rng.standard_normal((2, 3, 3, 3)), rng.standard_normal(2))
    model = g.build([x, z], [out])
    part = partition(model, [everything("conv-accel", 0.3, ops={Op.CONV_2D}), everything("cpu")],
                     FAST)
    assert [(s.device_index, s.operations) for s in part.steps] == [(0, (0,)), (1, (1,)), (0, (2,))]
    assert part.cross_device_operands == {c1, added}
    assert all(s.model.pools[0] is model.pools[0] for s in (part.steps[0], part.steps[2]))
    assert part.steps[1].model.pools == ()
    inputs = [rng.standard_normal((1, 5, 5, 2)).astype(np.float32),
              rng.standard_normal((1, 5, 5, 3)).astype(np.float32)]
    assert_same_as_whole(part, inputs)


def test_low_power_and_fast_partition_the_same_model_differently():
    model, _ = chain()
    devices = [everything("quick", 0.5, 2.0, ops={Op.ADD}), everything("frugal", 1.5, 0.4)]
    fast, frugal = partition(model, devices, FAST), partition(model, devices, LOW_POWER)
    assert fast.operation_device == (0, 1, 0) and len(fast.steps) == 3
    assert simple(frugal) and frugal.steps[0].device_index == 1


def test_no_devices_is_bad_data():
    model, _ = chain()
    with pytest.raises(BadDataError, match="no devices"):
        partition(model, [], FAST)
