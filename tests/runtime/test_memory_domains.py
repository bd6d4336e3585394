"""Memory domains across real driver processes: ``MemoryDesc``, ``Memory.from_desc`` (a driver-side
IBuffer, or runtime memory when the roles span devices), executions chained through a device
memory with outputs checked against the in-process reference CPU device, ``Memory.copy`` both
ways, uninitialised reads, bursts, and BAD_DATA for memories used outside their roles (the
descriptor's own checks are in ``test_memory_desc``)."""
from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

from nnscope import tracing
from nnscope.parse_systrace._classify import classify
from nnscope.runtime import Burst, Compilation, Execution, Memory, MemoryDesc, ResultCode, manager
from nnscope.runtime.memory import DeviceMemory
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.types import OperationType as Op
from tests.runtime.helpers import mixed_expected, mixed_model
from tests.runtime.memory_domain_helpers import (N, RNG, binary_model, chain_desc, code_of, compiled,
                                                  reference)


@pytest.fixture(scope="module")
def fast():
    device = RemoteDevice("sample-float-fast", timeout_s=30.0)
    yield device
    device.shutdown()


@pytest.fixture(scope="module")
def every(sample_all):
    return sample_all


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
        "a model constant": lambda: binary_model(Op.ADD, finish=False).set_operand_value_from_memory(
            1, memory, 0, 4 * N),
    }
    for name, call in cases.items():
        assert code_of(call) == ResultCode.BAD_DATA, name
    Execution(consumer).set_input_from_memory(0, memory, 0, 0, [N])  # the right dimensions


def test_bursts_run_device_memories_through_execute_synchronously(pair):
    producer, consumer = pair
    memory = Memory.from_desc(chain_desc(producer, consumer))
    x, b, w = (np.full(N, v, np.float32) for v in (1.0, 2.0, 3.0))
    out = np.empty(N, np.float32)
    make, use = _chain_executions(producer, consumer, memory, x, b, w, out)
    make_burst, use_burst = Burst(producer), Burst(consumer)
    for step in range(3):
        x[:] = step
        make.burst_compute(make_burst)
        use.burst_compute(use_burst)
        assert out.tolist() == [(step + 2.0) * 3.0] * N
    for burst in (make_burst, use_burst):
        burst.free()
    memory.free()


def test_a_partitioned_consumer_gets_runtime_memory(fast):
    """x of the mixed model is read only by its first step, on float-fast, but the plan's other
    steps (CPU, quant driver) receive every pool: the memory stays in the runtime."""
    quant = RemoteDevice("sample-quant", timeout_s=30.0)
    manager.forTest_set_devices([fast, quant])
    try:
        mixed = Compilation(mixed_model())
        mixed.finish()
        assert len({step.device.name for step in mixed.plan.steps}) == 3
        producer = compiled(binary_model(Op.ADD, (1, 4)), fast)
        desc = MemoryDesc()
        desc.add_output_role(producer, 0, 1.0)
        desc.add_input_role(mixed, 0, 1.0)
        desc.finish()
        memory = Memory.from_desc(desc)
        assert type(memory) is Memory
        half = np.float32([[0.0, 0.75, -1.0, 1.5]])
        make = Execution(producer)
        make.set_input(0, half)
        make.set_input(1, half)
        make.set_output_from_memory(0, memory, 0, 0)
        make.compute()
        y, q, out = np.float32([[2.0, -1.0, 0.5, 1.0]]), np.uint8([[130, 120, 128, 140]]), np.empty((1, 4), np.float32)
        use = Execution(mixed)
        use.set_input_from_memory(0, memory, 0, 0)
        use.set_input(1, y)
        use.set_input(2, q)
        use.set_output(0, out)
        use.compute()
        np.testing.assert_allclose(out, mixed_expected(half + half, y, q))
    finally:
        manager.forTest_reset()
        quant.shutdown()
