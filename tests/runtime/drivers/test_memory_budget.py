"""Issue 12: a sample driver's whole memory budget (``runtime.drivers.memory_budget``), against
real driver processes (``--driver-memory-budget`` / NNSCOPE_DRIVER_MEMORY_BUDGET) and, for
executions running at once, an in-process SampleDriver with one execution held at an operation
boundary. Outputs are checked against the nnapi-reference CPU device."""
from __future__ import annotations

import random
import struct
import subprocess
import sys
import threading

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.drivers.memory_budget import (DRIVER_BUDGET_ENV, EXECUTE, MemoryBudget,
                                           configured_driver_budget, model_footprint)
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (ErrorStatus, HalModel, Operand, OperandLifetime as L,
                               OperandType as T, Operation, OperationType as Op, Subgraph)
from nnscope.runtime.ops.executor import CpuExecutor
from tests.runtime.drivers._hal import _Values, add_model
from tests.support.driver_attack import AttackedDriver, exchange, prepare_payload
from tests.support.log_capture import captured_log

BUDGET = 1 << 20
BIG = 40960      # a [1, BIG] constant ADD holds 16 * BIG + 4 bytes (~640 KiB): one fits, two do not
HUGE = 98304     # 16 * HUGE bytes: more than the whole budget
LARGE_REQUEST = 131072  # 12 * n bytes of inputs and output: 1.5 MiB


def constant_add_model(n: int) -> HalModel:
    """``out [1, n] = x + c`` with ``c`` a constant: 4n constant bytes, 12n planned for ADD."""
    values = _Values()
    x = Operand(T.TENSOR_FLOAT32, (1, n), lifetime=L.SUBGRAPH_INPUT)
    c = values.add(T.TENSOR_FLOAT32, np.linspace(-1, 1, n, dtype=np.float32), (1, n))
    act = values.add(T.INT32, np.int32(0))
    out = Operand(T.TENSOR_FLOAT32, (1, n), lifetime=L.SUBGRAPH_OUTPUT)
    graph = Subgraph((x, c, act, out), (Operation(Op.ADD, (0, 1, 2), (3,)),), (0,), (3,))
    return HalModel(graph, operand_values=bytes(values.blob))


def dynamic_request(n: int):
    """``a + a`` for a = 0..n-1 on :func:`dynamic_model` (12n bytes): (request, output view)."""
    a = np.arange(n, dtype=np.float32)
    pool = bytearray(a.tobytes() + bytes(4 * n))
    dims = (1, n)
    args = (RequestArgument(False, 0, 0, 4 * n, dims),) * 2
    out = RequestArgument(False, 0, 4 * n, 4 * n, dims)
    view = np.frombuffer(pool, np.float32, n, 4 * n)
    return Request(args, (out,), (pool,)), view


def dynamic_model() -> HalModel:
    """ADD of two [1, ?] inputs: its footprint is a few bytes, its requests any size."""
    return add_model(shape=(1, 0))


def reference(model: HalModel, request: Request) -> np.ndarray:
    """Output 0 of ``request`` on the nnapi-reference CPU device (on a copy of its pool)."""
    pool = bytearray(request.pools[0])
    result = CpuDevice().prepare_model(model).execute(Request(request.inputs, request.outputs, (pool,)))
    assert result.status == ErrorStatus.NONE
    arg = request.outputs[0]
    return np.frombuffer(pool, np.float32, arg.length // 4, arg.offset)


@pytest.fixture
def budgeted(monkeypatch, fresh_device):
    """A fresh ``sample-float-fast`` process with a 1 MiB driver memory budget (from the
    environment it inherits)."""
    monkeypatch.setenv(DRIVER_BUDGET_ENV, str(BUDGET))
    return fresh_device("sample-float-fast", timeout_s=30.0)


def _status_of(call) -> ErrorStatus:
    with pytest.raises(HalError) as caught:
        call()
    return caught.value.status


def test_a_model_larger_than_the_whole_budget_is_persistent_at_prepare(budgeted):
    assert _status_of(lambda: budgeted.prepare_model(constant_add_model(HUGE))) == \
        ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
    prepared = budgeted.prepare_model(constant_add_model(BIG))  # nothing was left charged
    prepared.release()


def test_the_flag_sets_the_budget_and_prepare_answers_the_hal_code_number():
    with AttackedDriver(extra_args=["--driver-memory-budget", str(BUDGET)]) as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            (huge, _), (big, first), (again, _) = [_raw_prepare(sock, n) for n in (HUGE, BIG, BIG)]
            _raw_release(sock, first)
            after_release, second = _raw_prepare(sock, BIG)
            _raw_release(sock, second)  # the driver holds no model fds when the attack ends
    statuses = [huge, big, again, after_release]
    # HAL ErrorStatus 8 RESOURCE_EXHAUSTED_PERSISTENT, 0 NONE, 7 RESOURCE_EXHAUSTED_TRANSIENT
    assert statuses == [8, 0, 7, 0]
    assert (ErrorStatus(8).name, ErrorStatus(7).name) == ("RESOURCE_EXHAUSTED_PERSISTENT",
                                                          "RESOURCE_EXHAUSTED_TRANSIENT")


def _raw_prepare(sock, n: int) -> tuple[int, int | None]:
    """PREPARE_MODEL of :func:`constant_add_model` over the wire: (status, model id)."""
    payload, fds, keep = prepare_payload(constant_add_model(n))
    try:
        reply = exchange(sock, MsgType.PREPARE_MODEL, payload, fds, timeout=30.0)
    finally:
        for pool in keep:
            pool.close()
    return reply.status, struct.unpack_from("<I", reply.body)[0] if reply.status == 0 else None


def _raw_release(sock, model_id: int) -> None:
    assert exchange(sock, MsgType.RELEASE_MODEL, struct.pack("<I", model_id), [], timeout=30.0).status == 0


def test_a_model_that_fits_once_another_is_released_is_transient_at_prepare(budgeted):
    first = budgeted.prepare_model(constant_add_model(BIG))
    assert _status_of(lambda: budgeted.prepare_model(constant_add_model(BIG))) == \
        ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
    first.release()  # RELEASE_MODEL gives the charge back
    second = budgeted.prepare_model(constant_add_model(BIG))
    request, out = _constant_request(BIG)
    assert second.execute(request).status == ErrorStatus.NONE
    np.testing.assert_array_equal(out, reference(constant_add_model(BIG), request))


def _constant_request(n: int):
    x = np.full(n, 0.5, np.float32)
    pool = bytearray(x.tobytes() + bytes(4 * n))
    request = Request((RequestArgument(False, 0, 0, 4 * n),), (RequestArgument(False, 0, 4 * n, 4 * n),),
                      (pool,))
    return request, np.frombuffer(pool, np.float32, n, 4 * n)


def test_a_request_larger_than_the_whole_budget_is_persistent_at_execute(budgeted):
    prepared = budgeted.prepare_model(dynamic_model())
    request, _ = dynamic_request(LARGE_REQUEST)
    assert prepared.execute(request).status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
    small, out = dynamic_request(1024)
    assert prepared.execute(small).status == ErrorStatus.NONE  # its charge was given back
    np.testing.assert_array_equal(out, reference(dynamic_model(), small))


_CALLS = {  # every way a driver process runs an execution
    "executeSynchronously": lambda prepared: prepared.execute,
    "execute": lambda prepared: lambda request: prepared.execute_async(request).wait(30.0),
    "burst": lambda prepared: prepared.configure_burst().execute,
}


@pytest.mark.parametrize("call", sorted(_CALLS))
def test_a_request_that_fits_once_memory_is_released_is_transient(budgeted, call):
    holder = budgeted.prepare_model(constant_add_model(BIG))
    prepared = budgeted.prepare_model(dynamic_model())
    execute = _CALLS[call](prepared)
    request, out = dynamic_request(BIG)  # 12 * BIG bytes: fits the budget, not what is free
    assert execute(request).status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
    holder.release()
    assert execute(request).status == ErrorStatus.NONE
    np.testing.assert_array_equal(out, reference(dynamic_model(), request))
    assert execute(dynamic_request(LARGE_REQUEST)[0]).status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT


def test_the_driver_trace_and_vlog_name_the_code(monkeypatch, fresh_device, capfd):
    monkeypatch.setenv(DRIVER_BUDGET_ENV, str(BUDGET))
    monkeypatch.setenv("NN_VLOG", "driver")
    with tracing.TraceSession() as session:
        device = fresh_device("sample-float-fast", timeout_s=30.0)
        with pytest.raises(HalError):
            device.prepare_model(constant_add_model(HUGE))
        prepared = device.prepare_model(dynamic_model())
        assert prepared.execute(dynamic_request(LARGE_REQUEST)[0]).status == \
            ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
        device.capabilities()  # a reply after the driver flushed its spans
        names = [(span.pid, span.name) for span in session.collect().spans()]
    assert (device.pid, "[NN_LD_PC]SampleDriver::prepareModel::RESOURCE_EXHAUSTED_PERSISTENT") in names
    assert (device.pid, "[NN_LD_PE]SampleDriver::execute::RESOURCE_EXHAUSTED_PERSISTENT") in names
    err = capfd.readouterr().err
    assert "SampleDriver: prepareModel: RESOURCE_EXHAUSTED_PERSISTENT (ErrorStatus 8): needs" in err
    assert "SampleDriver: execute: RESOURCE_EXHAUSTED_PERSISTENT (ErrorStatus 8): needs" in err


# ---------------------------------------------------------------- in process: executions at once
def test_an_execution_is_transient_while_another_holds_the_memory():
    driver = SampleDriver(SAMPLES["sample-float-fast"])
    driver.memory = MemoryBudget(BUDGET)
    held, waiting = dynamic_request(2 * BIG), dynamic_request(BIG)  # each fits, not both
    first, second = driver.prepare_model(dynamic_model()), driver.prepare_model(dynamic_model())
    models_bytes = driver.memory.held_bytes
    at_boundary, go_on, results = threading.Event(), threading.Event(), []

    def hold(step_index, values):
        at_boundary.set()
        assert go_on.wait(30.0)
    first.executor.forTest_step_hook = hold
    runner = threading.Thread(target=lambda: results.append(first.execute(held[0])))
    runner.start()
    try:
        assert at_boundary.wait(30.0)
        assert driver.memory.held_bytes == models_bytes + 24 * BIG
        with tracing.TraceSession() as session, captured_log("nn", "driver") as lines:
            assert second.execute(waiting[0]).status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
        names = [span.name for span in session.collect().spans()]
    finally:
        go_on.set()
        runner.join(30.0)
    assert results[0].status == ErrorStatus.NONE
    assert driver.memory.held_bytes == models_bytes  # both executions gave theirs back
    assert second.execute(waiting[0]).status == ErrorStatus.NONE
    for request, out in (held, waiting):
        np.testing.assert_array_equal(out, reference(dynamic_model(), request))
    assert "[NN_LD_PE]SampleDriver::execute::RESOURCE_EXHAUSTED_TRANSIENT" in names
    assert any(line.startswith("execute: RESOURCE_EXHAUSTED_TRANSIENT (ErrorStatus 7): needs "
                               f"{12 * BIG} bytes") for line in lines)
    first.release()
    second.release()
    assert driver.memory.held_bytes == 0


def test_the_repeat_path_is_accounted_as_execute():
    driver = SampleDriver(SAMPLES["sample-float-fast"])
    driver.memory = MemoryBudget(BUDGET)
    prepared = driver.prepare_model(dynamic_model())
    request, out = dynamic_request(BIG)
    bound = prepared.bound_run(request, prepared.execute(request))
    runs = prepared.runs
    blocker = driver.memory.reserve(BUDGET - driver.memory.held_bytes, EXECUTE)
    assert bound() is False and prepared.runs == runs  # refused: execute() reports it
    blocker.release()
    out[:] = 0
    assert bound() is True and prepared.runs == runs + 1  # its time counts in the estimate
    np.testing.assert_array_equal(out, reference(dynamic_model(), request))
    assert prepared.load.running == 0 and driver.memory.held_bytes == prepared.charge.bytes


def test_model_footprint_is_constants_plus_the_planned_peak():
    assert model_footprint(constant_add_model(BIG), _executor(constant_add_model(BIG))) == 16 * BIG + 4
    # x -> t1 = x + x -> t2 = t1 + t1 -> out = t2 + t2 ([1, 256]): t1 is freed after the 2nd step
    values = _Values()
    act = values.add(T.INT32, np.int32(0))
    f = [Operand(T.TENSOR_FLOAT32, (1, 256), lifetime=lt) for lt in
         (L.SUBGRAPH_INPUT, L.TEMPORARY_VARIABLE, L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT)]
    ops = tuple(Operation(Op.ADD, (i, i, 4), (i + 1,)) for i in range(3))
    chain = HalModel(Subgraph((*f, act), ops, (0,), (3,)), operand_values=bytes(values.blob))
    # at steps 2 and 3 one [1, 256] temporary (1 KiB) is live besides the step's own 12 bytes
    # per element (without the frees, step 3 would hold t1 and t2)
    assert model_footprint(chain, _executor(chain)) == 4 + 1024 + 12 * 256


def _executor(model):
    return CpuExecutor(model)


def test_charges_from_many_threads_never_exceed_the_budget():
    budget, errors = MemoryBudget(10_000), []

    def churn(seed):
        rng = random.Random(seed)
        for _ in range(2000):
            try:
                with budget.reserve(rng.randrange(1, 4000), EXECUTE):
                    if budget.held_bytes > budget.total_bytes:
                        errors.append(budget.held_bytes)
            except HalError as error:
                if error.status != ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT:
                    errors.append(error.status)
    threads = [threading.Thread(target=churn, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60.0)
    assert errors == [] and budget.held_bytes == 0


def test_the_environment_budget_and_its_default():
    assert configured_driver_budget({DRIVER_BUDGET_ENV: "4096"}) == 4096
    default = configured_driver_budget({})
    assert configured_driver_budget({DRIVER_BUDGET_ENV: "lots"}) == default == 4 << 30


@pytest.mark.parametrize("driver, value, message", [
    ("sample-all", "0", "argument --driver-memory-budget: '0' is not a positive number of bytes"),
    ("sample-all", "1MB", "argument --driver-memory-budget: '1MB' is not a positive number of bytes"),
    ("sample-fibonacci", "4096", "--driver-memory-budget: driver sample-fibonacci has no memory budget"),
])
def test_a_bad_driver_budget_is_one_clear_line_and_exit_2(tmp_path, driver, value, message):
    proc = subprocess.run([sys.executable, "-m", "nnscope.runtime.drivers", driver, "--socket",
                           str(tmp_path / "driver.sock"), "--driver-memory-budget", value],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == f"python -m nnscope.runtime.drivers: error: {message}"
    assert "Traceback" not in proc.stderr and not (tmp_path / "driver.sock").exists()
