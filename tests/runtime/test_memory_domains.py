"""Memory domains across real driver processes: ``MemoryDesc``, ``Memory.from_desc`` (a driver-side
IBuffer, or runtime memory when the roles span devices), executions chained through a device
memory with outputs checked against the in-process reference CPU device, ``Memory.copy`` both
ways, uninitialised reads, and the BAD_DATA / BAD_STATE matrix."""
from __future__ import annotations

import math
import mmap
import os

import numpy as np
import pytest

import tracing
from parse_systrace._classify import classify
from runtime import Compilation, Execution, Memory, MemoryDesc, NnError, ResultCode
from runtime.device_memory import DeviceMemory
from runtime.drivers.cpu import CpuDevice
from runtime.drivers.ipc import RemoteDevice
from runtime.drivers.ipc.protocol import MsgType
from runtime.hal.types import OperandType as T, OperationType as Op
from runtime.model import Model

N = 6
RNG = np.random.default_rng(12)


def binary_model(op: Op, shape=(N,), other=None, out_type=T.TENSOR_FLOAT32) -> Model:
    """``out = a <op> b`` with ``b`` of shape ``other`` (broadcast) or ``shape``."""
    model = Model(f"{op.name.lower()}")
    a = model.add_operand(T.TENSOR_FLOAT32, shape)
    b = model.add_operand(T.TENSOR_FLOAT32, other or shape)
    act = model.add_operand(T.INT32)
    out = model.add_operand(out_type, shape)
    model.set_operand_value(act, 0)
    model.add_operation(op, [a, b, act], [out])
    model.identify_inputs_and_outputs([a, b], [out])
    model.finish()
    return model


def compiled(model: Model, device) -> Compilation:
    compilation = Compilation.for_devices(model, [device])
    compilation.finish()
    return compilation


def reference(model: Model, *inputs) -> np.ndarray:
    """The output of ``model`` on the in-process reference CPU device (plain buffers)."""
    execution = Execution(compiled(model, CpuDevice()))
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    out = np.empty_like(inputs[0])
    execution.set_output(0, out)
    execution.compute()
    return out


def chain_desc(producer: Compilation, consumer: Compilation, dims=None) -> MemoryDesc:
    desc = MemoryDesc()
    desc.add_output_role(producer, 0, 1.0)
    desc.add_input_role(consumer, 0, 0.5)
    if dims is not None:
        desc.set_dimensions(dims)
    desc.finish()
    return desc


def code_of(call) -> ResultCode:
    with pytest.raises(NnError) as caught:
        call()
    return caught.value.code


@pytest.fixture(scope="module")
def fast():
    device = RemoteDevice("sample-float-fast", timeout_s=30.0)
    yield device
    device.shutdown()


@pytest.fixture(scope="module")
def every():
    device = RemoteDevice("sample-all", timeout_s=30.0)
    yield device
    device.shutdown()


@pytest.fixture(scope="module")
def pair(fast):
    """Producer ``m = x + b`` and consumer ``out = m * w`` compiled on the float-fast driver."""
    return compiled(binary_model(Op.ADD), fast), compiled(binary_model(Op.MUL), fast)


def _chain_executions(producer, consumer, memory, x, b, w, out):
    make = Execution(producer)
    make.set_input(0, x)
    make.set_input(1, b)
    make.set_output_from_memory(0, memory, 0, 0)
    make.set_reusable(True)
    use = Execution(consumer)
    use.set_input_from_memory(0, memory, 0, 0)
    use.set_input(1, w)
    use.set_output(0, out)
    use.set_reusable(True)
    return make, use


def test_chain_through_a_device_memory_matches_the_reference_cpu(pair, fast):
    producer, consumer = pair
    memory = Memory.from_desc(chain_desc(producer, consumer))
    assert isinstance(memory, DeviceMemory) and memory.device is fast and memory.size == 4 * N
    x, b, w = (np.zeros(N, np.float32), RNG.standard_normal(N).astype(np.float32),
               RNG.standard_normal(N).astype(np.float32))
    out = np.empty(N, np.float32)
    make, use = _chain_executions(producer, consumer, memory, x, b, w, out)
    add, mul = binary_model(Op.ADD), binary_model(Op.MUL)
    for _ in range(20):
        x[:] = RNG.standard_normal(N)
        make.compute()
        use.compute()
        np.testing.assert_array_equal(out, reference(mul, reference(add, x, b), w))
    host = Memory.create_shared(4 * N)
    Memory.copy(memory, host)  # copyTo: the last sum, out of the driver
    np.testing.assert_array_equal(host.array(np.float32), reference(add, x, b))
    memory.free()
    assert code_of(lambda: Memory.copy(memory, host)) == ResultCode.BAD_DATA  # freed


def _ping_pong(fast, size: int, steps: int):
    """m1 = m0 + k, m0 = m1 * w, ``steps`` times, both memories in the driver; returns (result,
    expected, execute payload sizes, driver span names during the executions)."""
    plus = compiled(binary_model(Op.ADD, (size,), (1,)), fast)
    times = compiled(binary_model(Op.MUL, (size,), (1,)), fast)
    m0 = Memory.from_desc(chain_desc(times, plus))
    m1 = Memory.from_desc(chain_desc(plus, times))
    assert isinstance(m0, DeviceMemory) and isinstance(m1, DeviceMemory)
    start = RNG.standard_normal(size).astype(np.float32)
    k, w = np.float32([0.25]), np.float32([0.5])
    host = Memory.create_shared(4 * size)
    host.array(np.float32)[:] = start
    Memory.copy(host, m0)  # copyFrom: the only transfer in
    first, second = Execution(plus), Execution(times)
    first.set_input_from_memory(0, m0, 0, 0)
    first.set_input(1, k)
    first.set_output_from_memory(0, m1, 0, 0)
    second.set_input_from_memory(0, m1, 0, 0)
    second.set_input(1, w)
    second.set_output_from_memory(0, m0, 0, 0)
    for execution in (first, second):
        execution.set_reusable(True)
    sizes, send = [], fast.transact

    def recording(msg_type, payload, *args, **kwargs):
        if msg_type in (MsgType.EXECUTE_SYNC, MsgType.EXECUTE_SYNC_MEMO):
            sizes.append(len(payload))
        return send(msg_type, payload, *args, **kwargs)

    fast.transact = recording
    try:
        with tracing.TraceSession() as session:
            fast.launch()  # the running driver joins this session
            for _ in range(steps):
                first.compute()
                second.compute()
            fast.capabilities()  # a later request: the driver has flushed its spans
            names = [s.name for s in session.collect().spans() if s.pid == fast.pid]
    finally:
        del fast.transact
    Memory.copy(m0, host)  # copyTo: the only transfer out
    expected = start.copy()
    plus_model, times_model = binary_model(Op.ADD, (size,), (1,)), binary_model(Op.MUL, (size,), (1,))
    for _ in range(steps):
        expected = reference(times_model, reference(plus_model, expected, k), w)
    result = host.array(np.float32).copy()
    for memory in (m0, m1, host):
        memory.free()
    return result, expected, sizes, names


def test_chained_executions_move_no_tensor_data(fast):
    small = _ping_pong(fast, 4, 10)
    large = _ping_pong(fast, 1 << 16, 10)
    for result, expected, sizes, names in (small, large):
        np.testing.assert_array_equal(result, expected)
        assert len(sizes) == 20
        assert names.count("[NN_LD_PE]SampleDriver::executeSynchronously") == 20
        assert not [n for n in names if "copyTo" in n or "copyFrom" in n or "IBuffer" in n], names
    # 4 floats or 65536: every execute record the client sends has the same payload size
    assert set(small[2]) == set(large[2]) and len(set(small[2])) <= 2, (small[2], large[2])
    assert max(large[2]) < 200


def test_copy_both_ways_and_between_device_memories(pair, fast):
    producer, consumer = pair
    desc = chain_desc(producer, consumer)
    first, second = Memory.from_desc(desc), Memory.from_desc(desc)
    data = RNG.standard_normal(N).astype(np.float32)
    source = Memory.create_shared(4 * N)
    source.array(np.float32)[:] = data
    back = _unsealed_memory(4 * N)  # a driver may not map it: the copy is staged through a memfd
    with tracing.TraceSession() as session:
        fast.launch()  # the running driver joins this session
        Memory.copy(source, first)  # copyFrom
        Memory.copy(first, second)  # copyTo a staging memfd, then copyFrom
        Memory.copy(second, back)  # copyTo
        fast.capabilities()  # a later request: the driver has flushed its spans
        names = [s.name for s in session.collect().spans()]
    for method in ("copyTo", "copyFrom"):
        assert names.count(f"[NN_LD_PE]SampleDriver::{method}") == 2
        assert names.count(f"HIDL::IBuffer::{method}::server") == 2
        assert classify(f"HIDL::IBuffer::{method}::client")[1:3] == ("LI", "PE")
    assert names.count("[NN_LR_PE]ANeuralNetworksMemory_copy") == 3
    assert classify("HIDL::IDevice::allocate::server")[1:3] == ("LD", "PC")
    assert np.frombuffer(back.buffer(), np.float32).tolist() == data.tolist()
    out = np.empty(N, np.float32)
    use = Execution(consumer)
    use.set_input_from_memory(0, second, 0, 0)
    use.set_input(1, np.ones(N, np.float32))
    use.set_output(0, out)
    use.compute()
    assert out.tolist() == data.tolist()


def _unsealed_memory(size: int) -> Memory:
    fd = os.memfd_create("plain")
    try:
        os.ftruncate(fd, size)
        memory = Memory.from_fd(size, mmap.PROT_READ | mmap.PROT_WRITE, fd)
    finally:
        os.close(fd)
    assert not memory.sealed
    return memory


@pytest.mark.parametrize("on_device", [True, False], ids=["device", "runtime"])
def test_uninitialised_reads_fail_and_a_failed_run_uninitialises(on_device, pair, fast, every):
    producer, consumer = pair
    if not on_device:  # the consumer on another driver: roles span devices
        consumer = compiled(binary_model(Op.MUL), every)
    memory = Memory.from_desc(chain_desc(producer, consumer))
    assert isinstance(memory, DeviceMemory) == on_device
    out = np.empty(N, np.float32)
    use = Execution(consumer)
    use.set_input_from_memory(0, memory, 0, 0)
    use.set_input(1, np.ones(N, np.float32))
    use.set_output(0, out)
    use.set_reusable(True)
    assert code_of(use.compute) == ResultCode.OP_FAILED
    host = Memory.create_shared(4 * N)
    assert code_of(lambda: Memory.copy(memory, host)) == ResultCode.BAD_DATA  # AOSP copyInternal
    make = Execution(producer)
    make.set_input(0, np.full(N, 2.0, np.float32))
    make.set_input(1, np.full(N, 1.0, np.float32))
    make.set_output_from_memory(0, memory, 0, 0)
    make.set_reusable(True)
    make.compute()
    use.compute()
    assert out.tolist() == [3.0] * N
    failing = Execution(producer)  # a deadline that has passed: the run fails
    failing.set_input(0, np.zeros(N, np.float32))
    failing.set_input(1, np.zeros(N, np.float32))
    failing.set_output_from_memory(0, memory, 0, 0)
    failing.set_timeout(1)
    assert code_of(failing.compute) in (ResultCode.MISSED_DEADLINE_TRANSIENT,
                                        ResultCode.MISSED_DEADLINE_PERSISTENT)
    assert code_of(use.compute) == ResultCode.OP_FAILED
    host.array(np.float32)[:] = 5.0
    Memory.copy(host, memory)  # a copy initialises it again
    use.compute()
    assert out.tolist() == [5.0] * N


def test_roles_across_devices_fall_back_to_runtime_memory(fast, every):
    producer = compiled(binary_model(Op.ADD), fast)
    consumer = compiled(binary_model(Op.MUL), every)
    desc = chain_desc(producer, consumer)
    assert desc.allocator is None
    memory = Memory.from_desc(desc)
    assert type(memory) is Memory and memory.sealed and memory.size == 4 * N
    x, b, w = (RNG.standard_normal(N).astype(np.float32) for _ in range(3))
    out = np.empty(N, np.float32)
    make, use = _chain_executions(producer, consumer, memory, x, b, w, out)
    for _ in range(3):
        make.compute()
        use.compute()
        np.testing.assert_array_equal(out, reference(binary_model(Op.MUL), x + b, w))
    cpu_only = chain_desc(compiled(binary_model(Op.ADD), CpuDevice()),
                          compiled(binary_model(Op.MUL), CpuDevice()))
    assert cpu_only.allocator is None and type(Memory.from_desc(cpu_only)) is Memory


# ---------------------------------------------------------------------- the BAD_DATA matrix
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


def test_descriptor_incompatible_operand_types(cpu_pair, fast):
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


@pytest.mark.parametrize("on_device", [True, False], ids=["device", "runtime"])
def test_memory_usage_bad_data(on_device, pair, fast):
    producer, consumer = pair if on_device else (compiled(binary_model(Op.ADD), CpuDevice()),
                                                 compiled(binary_model(Op.MUL), CpuDevice()))
    memory = Memory.from_desc(chain_desc(producer, consumer))
    stranger = compiled(binary_model(Op.ADD), fast if on_device else CpuDevice())
    cases = {
        "compilation not in the roles": lambda: Execution(stranger).set_input_from_memory(0, memory, 0, 0),
        "input role used as output": lambda: Execution(consumer).set_output_from_memory(0, memory, 0, 0),
        "output role used as input": lambda: Execution(producer).set_input_from_memory(0, memory, 0, 0),
        "other input index": lambda: Execution(consumer).set_input_from_memory(1, memory, 0, 0),
        "non-zero offset": lambda: Execution(consumer).set_input_from_memory(0, memory, 4, 0),
        "non-zero length": lambda: Execution(consumer).set_input_from_memory(0, memory, 0, 4 * N),
        "wrong dimensions": lambda: Execution(consumer).set_input_from_memory(0, memory, 0, 0, [N + 1]),
        "copy of another size": lambda: Memory.copy(Memory.create_shared(4 * N + 4), memory),
    }
    for name, call in cases.items():
        assert code_of(call) == ResultCode.BAD_DATA, name
    Execution(consumer).set_input_from_memory(0, memory, 0, 0, [N])  # the right dimensions
