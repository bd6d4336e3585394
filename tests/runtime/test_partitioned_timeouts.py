"""A driver that stops answering in the middle of a partitioned run: the execution returns after
the device timeout (the step redone on the CPU, or the NNAPI error without fallback), and the next
execution runs on the restarted driver. The silence comes from real processes: a request that
never reaches the driver, or a driver stopped with SIGSTOP."""
from __future__ import annotations

import time

import numpy as np
import pytest

from nnscope.runtime import Compilation, Execution, NnError, ResultCode, manager
from nnscope.runtime.builtin_models import conv_pad_chain, sample_input
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from tests.support.log_capture import captured_log
from tests.support.sent import EXECUTES
from tests.support.stopped import stop_process

TIMEOUT_S = 2.0
#: Executions before the silence, and how it is found: none, the steps go one by one (a reply
#: that does not come); after one, each step is a fenced launch in full (its reply does not
#: come); after two, a quiet fenced repeat (its fence does not signal).
WARM = {"one-by-one": (0, "no reply within {}s; driver killed"),
        "fenced": (1, "no reply within {}s; driver killed"),
        "fenced-repeat": (2, "no fenced step ended within {}s; driver killed")}


@pytest.fixture
def devices():
    """Fresh minimal and float-fast driver processes with a short call timeout."""
    made = [RemoteDevice("sample-minimal", timeout_s=TIMEOUT_S), RemoteDevice("sample-float-fast")]
    manager.forTest_set_devices(made)
    yield made
    manager.forTest_reset()
    for device in made:
        device.shutdown()


def _swallow_next_execute(device: RemoteDevice) -> None:
    """The next execute request (or fenced step) on ``device``'s connection is lost on the way
    (the driver never sees it, so it never answers)."""
    channel = device.channel
    send = channel.send

    def lossy(msg_type, request_id, *rest):
        if msg_type in EXECUTES:
            channel.send = send
            return None
        return send(msg_type, request_id, *rest)
    channel.send = lossy


def _stop(device: RemoteDevice) -> None:
    stop_process(device.pid)


def _run(compilation, image):
    out = np.empty_like(image)
    execution = Execution(compilation)
    execution.set_input(0, image)
    execution.set_output(0, out)
    start = time.monotonic()
    try:
        execution.compute()
    finally:
        elapsed = time.monotonic() - start
    return out, elapsed


def _reference(model, image):
    compilation = Compilation.for_devices(model, [CpuDevice()])
    compilation.finish()
    out, _ = _run(compilation, image)
    compilation.free()
    return out


@pytest.mark.parametrize("warm", list(WARM))
@pytest.mark.parametrize("silence", [_swallow_next_execute, _stop], ids=["lost-request", "SIGSTOP"])
def test_a_silent_driver_mid_plan_falls_back_then_restarts(devices, silence, warm):
    minimal = devices[0]
    model = conv_pad_chain(6)
    [image] = sample_input(model)
    compilation = Compilation(model)
    compilation.finish()
    assert [s.device.name for s in compilation.plan.steps] == ["sample-minimal", "sample-float-fast"] * 3
    runs, found = WARM[warm]
    for _ in range(runs):  # warm: the next requests are repeats
        _run(compilation, image)
    first_pid = minimal.pid
    silence(minimal)
    with captured_log("nn", "execution,manager") as lines:
        out, elapsed = _run(compilation, image)
    np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-6)
    # one wait for the timeout, then the dead driver's later steps go straight to the CPU
    assert sum(found.format(f"{TIMEOUT_S:g}") in line for line in lines) == 1, lines
    assert sum("cpuFallbackPartial" in line for line in lines) == 3  # every step of the dead driver
    assert elapsed >= TIMEOUT_S  # a lower bound only: the silence was waited out once
    with captured_log("nn", "execution,manager") as lines:
        again, _ = _run(compilation, image)
    np.testing.assert_allclose(again, out)
    assert minimal.pid != first_pid and minimal.process.alive()
    assert not any("cpuFallback" in line for line in lines)
    assert sum("on sample-minimal: NONE" in line for line in lines) == 3
    compilation.free()


def test_without_fallback_a_silent_driver_gives_the_nnapi_error(devices):
    minimal = devices[0]
    model = conv_pad_chain(1)  # CONV_2D alone: the minimal driver runs the whole model
    [image] = sample_input(model)
    compilation = Compilation.for_devices(model, [minimal])
    compilation.finish()
    _run(compilation, image)
    _stop(minimal)
    with pytest.raises(NnError) as error:
        _run(compilation, image)
    assert error.value.code == ResultCode.DEAD_OBJECT
    out, _ = _run(compilation, image)  # restarted on next use
    np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-6)
    compilation.free()
