"""Long partitioned plans across real driver processes: a 90-step plan on every device set agrees
with ``nnapi-reference``, holds a few fds whatever its length, stays flat over 300 executions, and
compilations collected without ``free()`` release their driver models. Fenced runs (every step
an executeFenced waiting for the one before): traced or not the same path, two at a time on the
same drivers, and with one CPU allowed."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, Execution, manager
from nnscope.runtime.builtin_models import conv_pad_chain, sample_input
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.drivers.ipc.wire.transport import Channel
from nnscope.runtime.drivers.registry import SAMPLES
from tests.support.paths import REPO

STEPS = 90
#: Device sets the chain runs on (the CPU fallback takes what none of them supports).
DEVICE_SETS = {
    "every sample": tuple(SAMPLES),
    "minimal + float-fast": ("sample-minimal", "sample-float-fast"),
    "minimal + float-slow": ("sample-minimal", "sample-float-slow"),
    "minimal + quant": ("sample-minimal", "sample-quant"),
    "minimal alone": ("sample-minimal",),
}


@pytest.fixture(scope="module")
def drivers():
    made = {name: RemoteDevice(name) for name in SAMPLES}
    yield made
    for device in made.values():
        device.shutdown()


@pytest.fixture(scope="module")
def chain():
    model = conv_pad_chain(STEPS)
    [image] = sample_input(model)
    return model, image


def _use(drivers, names):
    manager.forTest_set_devices([drivers[name] for name in names])


@pytest.fixture(autouse=True)
def _reset_devices():
    yield
    manager.forTest_reset()


def _compute(compilation: Compilation, image: np.ndarray) -> np.ndarray:
    out = np.empty_like(image)
    execution = Execution(compilation)
    execution.set_input(0, image)
    execution.set_output(0, out)
    execution.compute()
    return out


def _reference(model, image) -> np.ndarray:
    compilation = Compilation.for_devices(model, [CpuDevice()])
    compilation.finish()
    try:
        return _compute(compilation, image)
    finally:
        compilation.free()


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.parametrize("names", list(DEVICE_SETS.values()), ids=list(DEVICE_SETS))
def test_a_90_step_plan_runs_on_every_device_set_and_agrees_with_the_reference(drivers, chain, names):
    model, image = chain
    _use(drivers, names)
    compilation = Compilation(model)
    compilation.finish()
    try:
        assert len(compilation.plan.steps) == STEPS  # every boundary is a device change
        for _ in range(4):  # the second run reuses the step memory and the step requests as
            # fenced launches in full, the third on launches them as repeats
            np.testing.assert_allclose(_compute(compilation, image), _reference(model, image),
                                       rtol=1e-5, atol=1e-6)
    finally:
        compilation.free()


def _held_fds(drivers, names) -> int:
    return _fds(os.getpid()) + sum(_fds(drivers[name].pid) for name in names)


def test_the_fds_a_plan_holds_do_not_grow_with_its_steps(drivers, chain):
    model, image = chain
    names = ("sample-minimal", "sample-float-fast")
    _use(drivers, names)
    for name in names:
        drivers[name].launch(wait=True)
    before = _held_fds(drivers, names)
    compilation = Compilation(model)
    compilation.finish()
    _compute(compilation, image)
    held = _held_fds(drivers, names) - before
    compilation.free()
    assert held < 64, f"the {STEPS}-step plan holds {held} fds in the client and its drivers"


def test_300_executions_hold_fds_and_memory_flat(drivers, chain, monkeypatch):
    model, image = chain
    names = ("sample-minimal", "sample-float-fast")
    _use(drivers, names)
    compilation = Compilation(model)
    compilation.finish()
    pids = [os.getpid(), *(drivers[name].pid for name in names)]
    sent = _sent(monkeypatch)
    try:
        for _ in range(20):  # warm-up: caches, step memory, numpy's allocator
            _compute(compilation, image)
        gc.collect()
        fds, rss = _fds(os.getpid()), [_rss_kb(pid) for pid in pids]
        sent.clear()
        for _ in range(300):
            _compute(compilation, image)
        gc.collect()
        assert sent.count(MsgType.EXECUTE_FENCED_MEMO) == 300 * STEPS, set(sent)  # fenced, as repeats
        assert _fds(os.getpid()) == fds
        growth = [_rss_kb(pid) - kb for pid, kb in zip(pids, rss)]
        assert all(kb < 5 * 1024 for kb in growth), f"RSS growth (kB) of client and drivers: {growth}"
    finally:
        compilation.free()


def test_compilations_collected_without_free_release_their_driver_models(drivers):
    model = conv_pad_chain(4, size=4, channels=2)
    [image] = sample_input(model)
    _use(drivers, ("sample-minimal", "sample-float-fast"))
    for _ in range(300):  # 600 driver models in all: over the 256 one client may hold at once
        compilation = Compilation(model)
        compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == ["sample-minimal", "sample-float-fast"] * 2
        _compute(compilation, image)
        del compilation


def _sent(monkeypatch) -> list:
    """Every message type this process sends to a driver from now on."""
    sent, send = [], Channel.send
    monkeypatch.setattr(Channel, "send", lambda channel, msg_type, *rest: sent.append(msg_type) or send(
        channel, msg_type, *rest))
    return sent


TRACED_RUNS = 3


def test_a_traced_partitioned_run_takes_the_same_fenced_path_and_shows_each_step(drivers, monkeypatch):
    """Tracing adds spans and never switches the path: traced or not, every step is a fenced
    repeat; the trace shows each step on its driver, the kernels of its bound run, and where
    it waited for the step before."""
    model = conv_pad_chain(6)
    [image] = sample_input(model)
    names = ("sample-minimal", "sample-float-fast")
    _use(drivers, names)
    compilation = Compilation(model)
    compilation.finish()
    try:
        for _ in range(3):
            _compute(compilation, image)
        sent = _sent(monkeypatch)
        untraced = _compute(compilation, image)
        assert sent.count(MsgType.EXECUTE_FENCED_MEMO) == 6 and MsgType.EXECUTE_SYNC_MEMO not in sent
        sent.clear()
        with tracing.TraceSession() as session:
            for name in names:
                drivers[name].launch()  # the running drivers join the session
            traced = [_compute(compilation, image) for _ in range(TRACED_RUNS)][-1]
        for name in names:
            drivers[name].launch()  # and leave it
        assert sent.count(MsgType.EXECUTE_FENCED_MEMO) == 6 * TRACED_RUNS and MsgType.EXECUTE_SYNC_MEMO not in sent
        np.testing.assert_array_equal(traced, untraced)
        np.testing.assert_allclose(traced, _reference(model, image), rtol=1e-5, atol=1e-6)
    finally:
        compilation.free()
    spans = list(session.collect().spans())
    pids = {drivers[name].pid for name in names}

    def named(name):
        return [span for span in spans if span.name == name]
    assert len(named("[NN_LR_PE]StepExecutor::computeFenced")) == 6 * TRACED_RUNS
    assert named("[NN_LR_PE]syncWait")  # the application's wait for the last fence
    assert {span.pid for span in named("[NN_LD_PE]SampleDriver::executeFenced")} == pids
    # a driver's wait for a fence (one that was not signalled when it looked): each driver's
    # steps wait for the other's, though a loaded machine may have one look late at times
    assert {span.pid for span in named("[NN_LD_PE]SampleDriver::syncWait")} == pids
    assert {span.pid for span in named("[NN_LC_PE]CpuExecutor::run")} == pids  # bound runs, traced
    assert len(named("[NN_LC_PE]CpuExecutor::run")) == 6 * TRACED_RUNS


def test_two_threads_run_partitioned_plans_on_the_same_drivers_at_once(drivers, monkeypatch):
    """Two executions at a time on the same drivers (two compilations, one per thread): both
    finish, each result right, every execution after the warm ones fenced (nothing backs off)."""
    model = conv_pad_chain(6)
    [image] = sample_input(model)
    _use(drivers, ("sample-minimal", "sample-float-fast"))
    compilations = [Compilation(model) for _ in range(2)]
    for compilation in compilations:
        compilation.finish()
    reference = _reference(model, image)
    try:
        for compilation in compilations:
            for _ in range(2):
                _compute(compilation, image)
        sent = _sent(monkeypatch)
        failures: list = []
        start = threading.Barrier(2)

        def run(compilation) -> None:
            start.wait(30)
            for _ in range(40):
                out = _compute(compilation, image)
                if not np.allclose(out, reference, rtol=1e-5, atol=1e-6):
                    failures.append(out)
        threads = [threading.Thread(target=run, args=(compilation,)) for compilation in compilations]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads) and failures == []
        assert sent.count(MsgType.EXECUTE_FENCED_MEMO) == 2 * 40 * 6, set(sent)
    finally:
        for compilation in compilations:
            compilation.free()


_ONE_CPU = """
import os
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import numpy as np
from nnscope.runtime import Compilation, manager
from nnscope.runtime.builtin_models import conv_pad_chain, sample_input
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.drivers.ipc.wire.transport import Channel
from nnscope.runtime.hal.sync_fence import usable_cpus
from tests.runtime.test_partitioned_runs import _compute, _reference

assert usable_cpus() == 1
model = conv_pad_chain(6)
[image] = sample_input(model)
devices = [RemoteDevice("sample-minimal"), RemoteDevice("sample-float-fast")]
manager.forTest_set_devices(devices)
compilation = Compilation(model)
compilation.finish()
expected = _reference(model, image)
for _ in range(3):
    _compute(compilation, image)
sent, send = [], Channel.send
Channel.send = lambda channel, msg_type, *rest: sent.append(msg_type) or send(channel, msg_type, *rest)
for _ in range(10):
    np.testing.assert_allclose(_compute(compilation, image), expected, rtol=1e-5, atol=1e-6)
assert sent.count(MsgType.EXECUTE_FENCED_MEMO) == 60, sent
assert all(step.prepared.reply_poll_s == 0 for step in compilation.plan.steps)  # no watch
compilation.free()
for device in devices:
    device.shutdown()
print("fenced on one CPU")
"""


def test_a_fenced_partitioned_run_with_one_cpu_allowed():
    """With one CPU allowed (``sched_setaffinity``, inherited by the drivers), the steps still
    hand over through fences, and nobody watches a fence: the one CPU runs the steps."""
    done = subprocess.run([sys.executable, "-c", _ONE_CPU], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == "fenced on one CPU", done.stderr[-2000:]
