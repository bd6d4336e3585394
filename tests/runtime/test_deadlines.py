"""Deadlines end to end, as VTS's DeadlineTest: every way to prepare or execute on a real driver
process x {no deadline, passed, short, generous}; a hung driver never holds the caller past its
deadline; a driver declines what it cannot make (MISSED_DEADLINE_PERSISTENT) or what it cannot
make only because it is busy (MISSED_DEADLINE_TRANSIENT)."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from nnscope.runtime import Burst, Compilation, Execution, NnError, ResultCode
from nnscope.runtime.builtin_models import mobilenet, sample_input
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.runtime.manager import cpu_device
from tests.support.log_capture import captured_log
from tests.support.stopped import stop_process

MISSED = {ResultCode.MISSED_DEADLINE_TRANSIENT, ResultCode.MISSED_DEADLINE_PERSISTENT}
TIMEOUTS = {"none": 0, "passed": 1, "short": 1_000_000, "generous": 60_000_000_000}
RUNS = ("compute", "start_compute", "fenced", "burst")


@pytest.fixture(scope="module")
def driver(sample_all):
    return sample_all


@pytest.fixture(scope="module")
def big(driver):
    """MobileNet compiled for the driver, and its reference outputs from the in-process CPU."""
    model = mobilenet()
    inputs = sample_input(model)
    compilation = Compilation.for_devices(model, [driver])
    compilation.finish()
    reference = Compilation.for_devices(model, [cpu_device()])
    reference.finish()
    return compilation, inputs, _outputs(reference, inputs)


def _execution(compilation, inputs):
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    out = np.zeros((1, 1000), np.float32)
    execution.set_output(0, out)
    return execution, out


def _outputs(compilation, inputs) -> np.ndarray:
    execution, out = _execution(compilation, inputs)
    execution.compute()
    return out


def _run(kind: str, execution, compilation) -> None:
    if kind == "compute":
        execution.compute()
    elif kind == "start_compute":
        execution.start_compute().wait()
    elif kind == "fenced":
        execution.start_compute_with_dependencies([]).wait()
    else:
        with Burst(compilation) as burst:
            execution.burst_compute(burst)


@pytest.mark.parametrize("timeout", TIMEOUTS)
@pytest.mark.parametrize("kind", RUNS)
def test_execution_deadline_matrix(big, kind, timeout):
    compilation, inputs, expected = big
    execution, out = _execution(compilation, inputs)
    if TIMEOUTS[timeout]:
        execution.set_timeout(TIMEOUTS[timeout])
    if timeout in ("passed", "short"):
        with pytest.raises(NnError) as error:
            _run(kind, execution, compilation)
        assert error.value.code in MISSED, error.value
    else:
        _run(kind, execution, compilation)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("timeout", TIMEOUTS)
def test_prepare_deadline_matrix(driver, timeout):
    compilation = Compilation.for_devices(mobilenet(), [driver])
    if TIMEOUTS[timeout]:
        compilation.set_timeout(TIMEOUTS[timeout])
    if timeout in ("passed", "short"):
        with pytest.raises(NnError) as error:
            compilation.finish()
        assert error.value.code in MISSED, error.value
    else:
        compilation.finish()
        compilation.free()


@pytest.mark.parametrize("timeout", TIMEOUTS)
def test_prepare_from_cache_deadline_matrix(driver, timeout, tmp_path):
    model, token = mobilenet(size=64), bytes(range(32))
    warm = Compilation.for_devices(model, [driver])
    warm.set_caching(str(tmp_path), token)
    warm.finish()  # writes the cache files
    warm.free()
    for path in tmp_path.iterdir():  # the driver must read and verify them again (cache_files.MEMO)
        os.utime(path)
    compilation = Compilation.for_devices(model, [driver])
    compilation.set_caching(str(tmp_path), token)
    if TIMEOUTS[timeout]:  # short: 0.1 ms (a load from cache takes about a millisecond)
        compilation.set_timeout(TIMEOUTS[timeout] if timeout != "short" else 100_000)
    with captured_log("nn", "compilation") as lines:
        if timeout in ("passed", "short"):
            with pytest.raises(NnError) as error:
                compilation.finish()
            assert error.value.code in MISSED, error.value
            return
        compilation.finish()
    assert any("from cache" in line and "not prepared" not in line for line in lines), lines
    reference = Compilation.for_devices(model, [cpu_device()])
    reference.finish()
    inputs = sample_input(model)
    np.testing.assert_allclose(_outputs(compilation, inputs), _outputs(reference, inputs), rtol=1e-5, atol=1e-6)
    compilation.free()


def test_a_hung_driver_returns_control_by_the_deadline():
    device = RemoteDevice("sample-float-fast", timeout_s=60.0)
    try:
        model = mobilenet(size=32)
        compilation = Compilation.for_devices(model, [device])
        compilation.finish()
        execution, _ = _execution(compilation, sample_input(model))
        timeout_ns = 1_000_000_000
        execution.set_timeout(timeout_ns)
        stop_process(device.pid)
        with pytest.raises(NnError) as error:
            execution.compute()
        # ended by the deadline, not by the device's 60 s timeout: that one gives DEAD_OBJECT
        # and kills the driver
        assert error.value.code in MISSED
        assert device.process.alive()
    finally:
        os.kill(device.pid, signal.SIGCONT)
        device.shutdown()


def _request(prepared, inputs) -> Request:
    pools = [np.ascontiguousarray(x) for x in inputs] + [np.zeros((1, 1000), np.float32)]
    arguments = [RequestArgument(False, i, 0, pool.nbytes, pool.shape) for i, pool in enumerate(pools)]
    return Request(tuple(arguments[:-1]), (arguments[-1],), tuple(pools))


def test_a_busy_driver_declines_transient_an_idle_one_persistent():
    driver = SampleDriver(SAMPLES["sample-all"])
    model = mobilenet(size=64)
    hal = model.to_hal()
    long_run, short_run = driver.prepare_model(hal), driver.prepare_model(hal)
    inputs = sample_input(model)
    request, other = _request(long_run, inputs), _request(short_run, inputs)
    for prepared, req in ((long_run, request), (short_run, other)):
        assert prepared.execute(req).status == ErrorStatus.NONE  # learns its duration
    needed = int(short_run.mean_ns)
    idle = short_run.execute(other, deadline_ns=time.monotonic_ns() + needed // 4)
    assert idle.status == ErrorStatus.MISSED_DEADLINE_PERSISTENT
    long_run.mean_ns = 1000 * needed  # the running execution is expected to last long
    runner = threading.Thread(target=long_run.execute, args=(request,))
    started, finish = threading.Event(), threading.Event()
    original = long_run.executor.forTest_step_hook
    long_run.executor.forTest_step_hook = lambda index, values: (started.set(), finish.wait(60))
    runner.start()
    try:
        assert started.wait(30)  # it runs, and waits after its first operation until finish
        # feasible alone (a stall of 99x its run before the driver looks would be needed to
        # make it so), impossible behind the running one
        busy = short_run.execute(other, deadline_ns=time.monotonic_ns() + 100 * needed)
        assert busy.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    finally:
        finish.set()
        runner.join()
        long_run.executor.forTest_step_hook = original
    calm = short_run.execute(other, deadline_ns=time.monotonic_ns() + 60_000_000_000)
    assert calm.status == ErrorStatus.NONE
