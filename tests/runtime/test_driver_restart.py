"""Drivers that come back: a driver process killed mid-run is restarted on next use, its models
are prepared again on the new process, and executions run there again with correct outputs."""
from __future__ import annotations

import os
import signal
import time

import numpy as np

from nnscope import tracing
from nnscope.runtime import Compilation, Execution
from nnscope.runtime.drivers.ipc.client import _restart
from tests.runtime.helpers import chain_model
from tests.support.log_capture import captured_log

RUNS_AFTER_KILL = 20


def _run(compilation, run: int) -> None:
    x = np.full((2, 3), run, np.float32)
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.zeros((2, 3), np.float32)
    execution = Execution(compilation)
    execution.set_input(0, x)
    execution.set_input(1, y)
    execution.set_output(0, out)
    execution.compute()
    np.testing.assert_allclose(out, (x + 0.5) * y + 0.5, rtol=1e-6)


def _server_pids(spans) -> list:
    return [s.pid for s in spans if s.name == "HIDL::IPreparedModel::executeSynchronously::server"]


def test_killed_driver_is_restarted_and_runs_the_model_again(fast):
    with tracing.TraceSession() as session, captured_log("nn", "manager,execution") as lines:
        compilation = Compilation(chain_model())
        compilation.finish()
        assert [step.device.name for step in compilation.plan.steps] == ["sample-float-fast"]
        _run(compilation, 0)
        old_pid = fast.pid
        session.collect()  # the driver writes out its spans (it writes them now and then)
        os.kill(old_pid, signal.SIGKILL)
        for run in range(1, RUNS_AFTER_KILL + 1):
            _run(compilation, run)
    assert fast.pid != old_pid and fast.backoff.restarts == 1
    spans = list(session.collect().spans())
    pids = _server_pids(spans)
    assert pids[0] == old_pid and pids.count(fast.pid) >= RUNS_AFTER_KILL - 1
    names = {s.name for s in spans}
    assert {"[NN_LI_PI]VersionedIDevice::recover", "[NN_LI_PI]VersionedIPreparedModel::recover"} <= names
    assert any("driver sample-float-fast restarted (restart 1" in line for line in lines)
    assert any("model prepared again on restarted driver sample-float-fast" in line for line in lines)


def test_a_driver_that_keeps_dying_is_restarted_after_a_backoff(fast, monkeypatch):
    """The backoff is 30 s here (so runs 3 and 4 surely fall inside it, however slow the
    machine); its end is then brought forward, as a clock moving on would, not slept through."""
    monkeypatch.setattr(_restart, "BASE_S", 30.0)
    compilation = Compilation(chain_model())
    compilation.finish()
    _run(compilation, 0)
    os.kill(fast.pid, signal.SIGKILL)
    _run(compilation, 1)  # DEAD_OBJECT, CPU fallback
    _run(compilation, 2)  # restarted: the first restart is immediate
    assert fast.backoff.restarts == 1
    os.kill(fast.pid, signal.SIGKILL)
    _run(compilation, 3)  # died again soon after its start: now it must wait
    _run(compilation, 4)
    assert fast.backoff.restarts == 1 and fast.backoff.not_before > time.monotonic()
    fast.backoff.not_before = time.monotonic()  # the 30 s are over
    _run(compilation, 5)
    assert fast.backoff.restarts == 2


def test_a_shut_down_device_is_not_restarted(fast):
    compilation = Compilation(chain_model())
    compilation.finish()
    fast.shutdown()
    for run in range(3):
        _run(compilation, run)  # on the CPU
    assert fast.backoff.restarts == 0 and not fast.process.alive()
