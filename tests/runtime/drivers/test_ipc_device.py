"""RemoteDevice against a real driver process: IDevice calls, prepare, sync/async execute."""
import os

import numpy as np
import pytest

from nnscope.runtime.drivers.registry import create_driver
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import DeviceType, ErrorStatus, OperandType as T
from nnscope.runtime.ops.executor import CpuExecutor
from tests.runtime.drivers._hal import add_model, conv_model, make_request

RNG = np.random.default_rng(7)


def test_driver_runs_in_its_own_process(sample_all):
    sample_all.capabilities()
    assert sample_all.pid is not None and sample_all.pid != os.getpid()
    assert sample_all.process.alive()


def _environ(pid: int) -> dict:
    with open(f"/proc/{pid}/environ", "rb") as handle:
        pairs = (entry.partition(b"=") for entry in handle.read().split(b"\0") if entry)
    return {key.decode(): value.decode() for key, _, value in pairs}


def test_driver_defaults_are_in_its_environment_unless_set(fresh_device, monkeypatch):
    """One BLAS thread and fixed malloc thresholds by default; the environment's value wins."""
    from nnscope.runtime.drivers.ipc.client._process import DRIVER_DEFAULTS  # noqa: PLC0415

    for name in DRIVER_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "12345")
    device = fresh_device("sample-float-fast")
    device.capabilities()
    env = _environ(device.pid)
    assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(32 << 20)
    assert env["MALLOC_TRIM_THRESHOLD_"] == "12345"


def test_capabilities_round_trip_equals_in_process_driver(fresh_device):
    for name in ("sample-all", "sample-float-fast"):
        remote = fresh_device(name)
        assert remote.capabilities() == create_driver(name).capabilities()
    assert remote.capabilities().performance(T.TENSOR_FLOAT32).exec_time == 0.8
    assert remote.capabilities().performance(T.TENSOR_QUANT8_ASYMM).exec_time == float("inf")


def test_device_information_calls(sample_all):
    assert sample_all.type == DeviceType.CPU
    assert sample_all.version == "nnscope-sample-1.3"
    assert sample_all.supported_extensions() == ()
    assert sample_all.number_of_cache_files_needed() == (1, 1)  # model cache, data cache


def test_add_through_driver_matches_cpu_executor(sample_all):
    model = add_model((2, 3))
    a, b = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    request, _, (out,) = make_request(model, [a, b])
    prepared = sample_all.prepare_model(model)
    result = prepared.execute(request)
    assert result.status == ErrorStatus.NONE
    assert result.output_shapes[0].dimensions == (2, 3)
    assert result.timing is None
    np.testing.assert_array_equal(out, CpuExecutor(model).run([a, b])[0])
    prepared.release()


def test_conv_with_large_constants_through_driver(sample_all):
    weights = RNG.standard_normal((16, 3, 3, 8)).astype(np.float32)  # 4.6 KiB: shared pool
    bias = RNG.standard_normal(16).astype(np.float32)
    model = conv_model(weights, bias)
    assert len(model.operand_values) > 4096
    x = RNG.standard_normal((1, 8, 8, 8)).astype(np.float32)
    request, _, (out,) = make_request(model, [x], shared=True)
    assert sample_all.supported_operations(model) == [True]
    result = sample_all.prepare_model(model).execute(request, measure_timing=True)
    assert result.status == ErrorStatus.NONE
    np.testing.assert_allclose(out, CpuExecutor(model).run([x])[0], rtol=1e-6)
    assert result.timing.on_device is not None and result.timing.in_driver >= result.timing.on_device


def test_repeated_executions_reuse_pools_and_results_change(sample_all):
    model = add_model((4,))
    request, pool, (out,) = make_request(model, [np.zeros(4, np.float32)] * 2, shared=True)
    prepared = sample_all.prepare_model(model)
    sent = _record_sends(sample_all)
    for step in range(3):
        np.frombuffer(pool.view, np.float32, 8)[:] = step
        assert prepared.execute(request).status == ErrorStatus.NONE
        assert out.tolist() == [2.0 * step] * 4
    assert [len(fds) for _, fds in sent] == [1, 0, 0]  # the pool fd crosses once


def test_async_execute_notifies_callback(sample_all):
    model = add_model((3,))
    a, b = np.float32([1, 2, 3]), np.float32([10, 20, 30])
    request, _, (out,) = make_request(model, [a, b])
    prepared = sample_all.prepare_model(model)
    callback = prepared.execute_async(request, measure_timing=True)
    result = callback.wait()
    assert result.status == ErrorStatus.NONE and result.timing.in_driver is not None
    assert out.tolist() == [11, 22, 33]
    assert callback.wait() is result


def test_two_async_executions_complete_in_any_wait_order(sample_all):
    model = add_model((2,))
    prepared = sample_all.prepare_model(model)
    first, _, (out1,) = make_request(model, [np.float32([1, 1]), np.float32([1, 1])])
    second, _, (out2,) = make_request(model, [np.float32([5, 5]), np.float32([5, 5])])
    cb1, cb2 = prepared.execute_async(first), prepared.execute_async(second)
    assert cb2.wait().status == ErrorStatus.NONE and cb1.wait().status == ErrorStatus.NONE
    assert out1.tolist() == [2, 2] and out2.tolist() == [10, 10]


def test_big_tensors_travel_by_shared_memory(sample_all):
    model = add_model((512, 512))  # 1 MiB per tensor
    a, b = RNG.standard_normal((2, 512, 512)).astype(np.float32)
    prepared = sample_all.prepare_model(model)
    for shared in (True, False):  # memfd pools, and bytearrays staged through memfd
        request, _, (out,) = make_request(model, [a, b], shared=shared)
        sent = _record_sends(sample_all)
        for _ in range(2):
            assert prepared.execute(request).status == ErrorStatus.NONE
        np.testing.assert_array_equal(out, a + b)
        assert max(size for size, _ in sent) < 512
        assert sum(len(fds) for _, fds in sent) == 1


def test_output_insufficient_size_reports_shapes(sample_all):
    model = add_model((4,), out_shape=(0,))
    request, _, _ = make_request(model, [np.ones(4, np.float32)] * 2, out_slack=8)  # room for 2
    result = sample_all.prepare_model(model).execute(request)
    assert result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert result.output_shapes[0].dimensions == (4,) and not result.output_shapes[0].is_sufficient


def test_invalid_request_region_is_rejected_and_device_keeps_working(sample_all):
    model = add_model((4,))
    prepared = sample_all.prepare_model(model)
    good, pool, (out,) = make_request(model, [np.ones(4, np.float32)] * 2)
    bad = Request(good.inputs, (RequestArgument(pool_index=0, offset=len(pool) - 4, length=16),), good.pools)
    assert prepared.execute(bad).status == ErrorStatus.INVALID_ARGUMENT
    assert prepared.execute(good).status == ErrorStatus.NONE and out.tolist() == [2.0] * 4


def test_invalid_model_raises_invalid_argument(sample_all):
    model = add_model((4,))
    broken = type(model)(model.main, operand_values=b"")  # constant points past the values
    with pytest.raises(HalError) as error:
        sample_all.prepare_model(broken)
    assert error.value.status == ErrorStatus.INVALID_ARGUMENT


def test_deadline_in_the_past(sample_all):
    model = add_model((4,))
    prepared = sample_all.prepare_model(model)
    request, _, _ = make_request(model, [np.ones(4, np.float32)] * 2)
    result = prepared.execute(request, deadline_ns=1)
    assert result.status in (ErrorStatus.MISSED_DEADLINE_PERSISTENT, ErrorStatus.MISSED_DEADLINE_TRANSIENT)
    with pytest.raises(HalError) as error:
        sample_all.prepare_model(model, deadline_ns=1)
    assert error.value.status in (ErrorStatus.MISSED_DEADLINE_PERSISTENT,
                                  ErrorStatus.MISSED_DEADLINE_TRANSIENT)


def _record_sends(device):
    """Wrap the device channel's send to record (payload size, fds) of each message."""
    device.ensure_started()
    channel = device.channel
    sent = []
    original = type(channel).send

    def send(msg_type, request_id, payload=b"", fds=(), context=None):
        sent.append((len(payload), list(fds)))
        return original(channel, msg_type, request_id, payload, fds, context)

    channel.send = send
    return sent


def test_runtime_memory_pools_for_requests_and_constants(sample_all):
    from nnscope.runtime.hal.types import DataLocation, OperandLifetime as L
    from nnscope.runtime.memory import Memory

    model = add_model((4,))
    graph = model.main
    constant = type(graph.operands[0])(T.TENSOR_FLOAT32, (4,), lifetime=L.CONSTANT_REFERENCE,
                                       location=DataLocation(0, 16, 16))
    operands = (graph.operands[0], constant, *graph.operands[2:])
    weights = Memory.create_shared(64)
    weights.array(np.float32)[:] = np.arange(16, dtype=np.float32)
    model = type(model)(type(graph)(operands, graph.operations, (0,), (3,)),
                        operand_values=model.operand_values, pools=(weights,))
    io = Memory.create_shared(32)
    io.array(np.float32)[:4] = [1, 1, 1, 1]
    request = Request((RequestArgument(pool_index=0, offset=0, length=16),),
                      (RequestArgument(pool_index=0, offset=16, length=16),), (io,))
    result = sample_all.prepare_model(model).execute(request)
    assert result.status == ErrorStatus.NONE
    assert io.array(np.float32)[4:].tolist() == [5.0, 6.0, 7.0, 8.0]
    sample_all.forget_pool(io)


def test_staging_pool_grows_with_a_larger_buffer(sample_all):
    model = add_model((64, 64))  # 16 KiB tensors: non-shared pools are staged
    prepared = sample_all.prepare_model(model)
    a, b = RNG.standard_normal((2, 64, 64)).astype(np.float32)
    request, pool, _ = make_request(model, [a, b])
    for tail in (0, 8192):  # the same regions in a pool that has grown by an unused tail
        bigger = bytearray(pool) + bytearray(tail)
        assert prepared.execute(Request(request.inputs, request.outputs, (bigger,))).status == 0
        out = np.frombuffer(bigger, np.float32, 64 * 64, request.outputs[0].offset)
        np.testing.assert_array_equal(out.reshape(64, 64), a + b)
    assert prepared.staging[0].size >= 3 * 64 * 64 * 4 + 8192
    prepared.release()
