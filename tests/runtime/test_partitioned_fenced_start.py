"""startComputeWithDependencies on a compound plan, as AOSP's computeFenced: once its steps
repeat, every step is launched fenced at the call, the first waiting for the inputs, which are
copied in only after the dependencies signalled; a failed dependency fails the execution and
leaves the drivers ready for the next one."""
from __future__ import annotations

import os

import numpy as np
import pytest

from nnscope.runtime import Compilation, Execution, NnError, ResultCode, manager
from nnscope.runtime.builtin_models import conv_pad_chain, sample_input
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.drivers.ipc.wire.transport import Channel
from nnscope.runtime.event import Event
from nnscope.runtime.hal.sync_fence import FAILED, SIGNALED

STEPS = 6
NAMES = ("sample-minimal", "sample-float-fast")


@pytest.fixture(scope="module")
def compilation():
    drivers = [RemoteDevice(name) for name in NAMES]
    manager.forTest_set_devices(drivers)
    compilation = Compilation(conv_pad_chain(STEPS))
    compilation.finish()
    yield compilation
    compilation.free()
    manager.forTest_reset()
    for device in drivers:
        device.shutdown()


@pytest.fixture
def sent(monkeypatch) -> list:
    """Every message type this process sends to a driver from now on."""
    sent, send = [], Channel.send
    monkeypatch.setattr(Channel, "send", lambda channel, msg_type, *rest: sent.append(msg_type) or send(
        channel, msg_type, *rest))
    return sent


class Gate:
    """A dependency the test signals: an eventfd wrapped as an Event."""

    def __init__(self):
        self.fd = os.eventfd(0, os.EFD_CLOEXEC)
        self.event = Event.from_sync_fence_fd(self.fd)

    def open(self, ok: bool = True) -> None:
        os.eventfd_write(self.fd, SIGNALED if ok else FAILED)

    def close(self) -> None:
        self.event.free()
        os.close(self.fd)


def _execution(compilation, image, out) -> Execution:
    execution = Execution(compilation)
    execution.set_input(0, image)
    execution.set_output(0, out)
    return execution


def _reference(image) -> np.ndarray:
    compilation = Compilation.for_devices(conv_pad_chain(STEPS), [CpuDevice()])
    compilation.finish()
    out = np.empty_like(image)
    _execution(compilation, image, out).compute()
    compilation.free()
    return out


def _warm(compilation, image) -> None:
    for _ in range(2):  # the second execution builds every step's request: the steps repeat
        _execution(compilation, image, np.empty_like(image)).compute()


def test_every_step_is_launched_at_the_call_and_the_inputs_are_read_after_the_dependency(compilation, sent):
    [image] = sample_input(conv_pad_chain(STEPS))
    _warm(compilation, image)
    assert len(compilation.plan.steps) == STEPS
    sent.clear()
    gate, held, out = Gate(), np.zeros_like(image), np.zeros_like(image)
    try:
        event = _execution(compilation, held, out).start_compute_with_dependencies([gate.event])
        assert sent.count(MsgType.EXECUTE_FENCED_MEMO) == STEPS  # all launched, none waited for
        assert not event.done and not out.any()
        held[:] = image  # written after the call, before the dependency signals: the input read
        gate.open()
        event.wait()
        event.free()
    finally:
        gate.close()
    assert sent.count(MsgType.EXECUTE_FENCED_MEMO) == STEPS  # nothing ran twice
    np.testing.assert_allclose(out, _reference(image), rtol=1e-5, atol=1e-6)


def test_a_failed_dependency_fails_the_execution_and_the_next_one_runs(compilation):
    [image] = sample_input(conv_pad_chain(STEPS))
    _warm(compilation, image)
    gate, out = Gate(), np.zeros_like(image)
    try:
        event = _execution(compilation, image, out).start_compute_with_dependencies([gate.event])
        gate.open(ok=False)
        with pytest.raises(NnError) as error:
            event.wait()
        assert error.value.code == ResultCode.OP_FAILED
        event.free()
    finally:
        gate.close()
    assert not out.any()
    again = np.zeros_like(image)
    _execution(compilation, image, again).compute()
    np.testing.assert_allclose(again, _reference(image), rtol=1e-5, atol=1e-6)


def test_a_plan_whose_steps_do_not_repeat_yet_runs_after_the_dependency(compilation, sent):
    [image] = sample_input(conv_pad_chain(STEPS))
    fresh = Compilation(conv_pad_chain(STEPS))
    fresh.finish()
    sent.clear()
    gate, out = Gate(), np.zeros_like(image)
    try:
        event = _execution(fresh, image, out).start_compute_with_dependencies([gate.event])
        assert not sent  # nothing launched: its first execution builds the step requests
        gate.open()
        event.wait()
        event.free()
    finally:
        gate.close()
        fresh.free()
    np.testing.assert_allclose(out, _reference(image), rtol=1e-5, atol=1e-6)
