"""``MemoryDesc`` validation on the in-process CPU device (AOSP ``MemoryBuilder``'s BAD_DATA /
BAD_STATE / UNEXPECTED_NULL rules) and the spans of descriptors, ``createFromDesc`` and copies."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, Execution, Memory, MemoryDesc, NnError, ResultCode
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from nnscope.runtime.model import Model
from tests.runtime.memory_domain_helpers import N, binary_model, code_of, compiled


@pytest.fixture(scope="module")
def cpu_pair():
    cpu = CpuDevice()
    return (compiled(binary_model(Op.ADD), cpu), compiled(binary_model(Op.MUL), cpu),
            compiled(binary_model(Op.ADD, (2, 3)), cpu))


def _unfinished() -> Compilation:
    return Compilation.for_devices(binary_model(Op.ADD), [CpuDevice()])


DESC_CASES = {
    "unfinished compilation": lambda d, c: d.add_input_role(_unfinished(), 0, 1.0),
    "input index out of range": lambda d, c: d.add_input_role(c[0], 2, 1.0),
    "output index out of range": lambda d, c: d.add_output_role(c[0], 1, 1.0),
    "negative index": lambda d, c: d.add_input_role(c[0], -1, 1.0),
    "frequency 0": lambda d, c: d.add_input_role(c[0], 0, 0.0),
    "frequency above 1": lambda d, c: d.add_input_role(c[0], 0, 1.5),
    "negative frequency": lambda d, c: d.add_input_role(c[0], 0, -0.5),
    "NaN frequency": lambda d, c: d.add_input_role(c[0], 0, math.nan),
    "not a compilation": lambda d, c: d.add_input_role("compilation", 0, 1.0),
    "same role twice": lambda d, c: (d.add_input_role(c[0], 0, 1.0), d.add_input_role(c[0], 0, 0.5)),
    "incompatible dimensions": lambda d, c: (d.add_input_role(c[0], 0, 1.0), d.add_input_role(c[2], 0, 1.0)),
    "dimensions conflicting a role": lambda d, c: (d.add_input_role(c[0], 0, 1.0), d.set_dimensions([N + 1])),
    "role conflicting dimensions": lambda d, c: (d.set_dimensions([2, 2]), d.add_output_role(c[1], 0, 1.0)),
    "negative dimension": lambda d, c: d.set_dimensions([-1]),
    "finish without roles": lambda d, c: d.finish(),
}


@pytest.mark.parametrize("case", DESC_CASES)
def test_descriptor_bad_data(case, cpu_pair):
    assert code_of(lambda: DESC_CASES[case](MemoryDesc(), cpu_pair)) == ResultCode.BAD_DATA


def test_descriptor_incompatible_operand_types(cpu_pair):
    desc = MemoryDesc()
    desc.add_input_role(cpu_pair[0], 0, 1.0)
    quant = Model("quant")
    a = quant.add_operand(T.TENSOR_QUANT8_ASYMM, (N,), scale=0.5, zero_point=128)
    out = quant.add_operand(T.TENSOR_FLOAT32, (N,))
    quant.add_operation(Op.DEQUANTIZE, [a], [out])
    quant.identify_inputs_and_outputs([a], [out])
    quant.finish()
    assert code_of(lambda: desc.add_input_role(compiled(quant, CpuDevice()), 0, 1.0)) == ResultCode.BAD_DATA


def test_descriptor_states_and_nulls(cpu_pair):
    desc = MemoryDesc()
    assert code_of(lambda: desc.add_input_role(None, 0, 1.0)) == ResultCode.UNEXPECTED_NULL
    assert code_of(lambda: Memory.from_desc(desc)) == ResultCode.BAD_STATE  # not finished
    assert code_of(lambda: Memory.from_desc(None)) == ResultCode.UNEXPECTED_NULL
    assert code_of(lambda: Memory.from_desc("desc")) == ResultCode.BAD_DATA
    desc.add_input_role(cpu_pair[0], 0, 1.0)
    desc.finish()
    for late in (lambda: desc.add_input_role(cpu_pair[0], 1, 1.0), lambda: desc.add_output_role(cpu_pair[0], 0, 1.0),
                 lambda: desc.set_dimensions([N]), desc.finish):
        assert code_of(late) == ResultCode.BAD_STATE
    unknown = MemoryDesc()
    unknown.add_input_role(compiled(binary_model(Op.ADD, (0,)), CpuDevice()), 0, 1.0)
    unknown.finish()
    assert code_of(lambda: Memory.from_desc(unknown)) == ResultCode.OP_FAILED  # dims not known
    unknown.free()




def test_descriptor_and_copy_spans_follow_the_contract(cpu_pair):
    with tracing.TraceSession() as session:
        desc = MemoryDesc()
        desc.add_input_role(cpu_pair[0], 0, 1.0)
        desc.add_output_role(cpu_pair[0], 0, 1.0)
        desc.set_dimensions([N])
        desc.finish()
        first, second = Memory.from_desc(desc), Memory.from_desc(desc)
        desc.free()
        host = Memory.create_shared(4 * N)
        host.array(np.float32)[:] = 1.5
        with pytest.raises(NnError):
            Memory.copy(second, first)  # second was never written
        Memory.copy(host, first)
        Memory.copy(first, second)
        names = [s.name for s in session.collect().spans()]
    assert type(second) is Memory and second.array(np.float32).tolist() == [1.5] * N
    for call in ("create", "addInputRole", "addOutputRole", "setDimensions", "finish"):
        assert f"[NN_LR_PC]ANeuralNetworksMemoryDesc_{call}" in names
    assert names.count("[NN_LR_PC]ANeuralNetworksMemory_createFromDesc") == 2
    assert "[NN_LR_PT]ANeuralNetworksMemoryDesc_free" in names
    assert names.count("[NN_LR_PE]ANeuralNetworksMemory_copy") == 3


def test_a_run_refused_for_an_uninitialised_input_leaves_the_outputs_as_they_were(cpu_pair):
    mul = cpu_pair[1]
    descs = [MemoryDesc(), MemoryDesc()]
    descs[0].add_input_role(mul, 0, 1.0)
    descs[1].add_output_role(mul, 0, 1.0)
    for desc in descs:
        desc.finish()
    source, target = (Memory.from_desc(desc) for desc in descs)
    host = Memory.create_shared(4 * N)
    host.array(np.float32)[:] = 9.0
    Memory.copy(host, target)
    execution = Execution(mul)
    execution.set_input_from_memory(0, source, 0, 0)
    execution.set_input(1, np.ones(N, np.float32))
    execution.set_output_from_memory(0, target, 0, 0)
    assert code_of(execution.compute) == ResultCode.OP_FAILED
    host.array(np.float32)[:] = 0.0
    Memory.copy(target, host)  # still initialised, still its bytes
    assert host.array(np.float32).tolist() == [9.0] * N
