"""The polling window of partitioned steps (issue 23): the runtime watches a step's socket for
the reply before it sleeps, so that a short step's boundary costs no wake-up of the application.
Steps of a compound plan get the window; simple plans, LOW_POWER and ``NNSCOPE_STEP_POLL_US=0``
do not; a record is received whether it comes inside the window or after it, and a nap before
the window ends when the record comes. A repeated step writes its outputs in place in the driver."""
from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from nnscope.runtime import Compilation, Execution
from nnscope.runtime.builtin_models import conv_pad_chain, sample_input
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.drivers.ipc.wire.transport import Channel
from nnscope.runtime.hal.types import Preference
from nnscope.runtime.manager import get_device
from nnscope.runtime.plan import DEFAULT_STEP_POLL_US, STEP_POLL_US, step_polling_window_s
from tests.runtime.test_partitioned_runs import _compute, _reference

ALTERNATING = ("sample-minimal", "sample-float-fast")  # PAD only on float-fast: every op a step


def _compile(model, preference=Preference.FAST_SINGLE_ANSWER) -> Compilation:
    compilation = Compilation.for_devices(model, [get_device(name) for name in ALTERNATING])
    compilation.set_preference(preference)
    compilation.finish()
    return compilation


def test_steps_of_a_partitioned_plan_poll_and_still_agree_with_the_reference():
    model = conv_pad_chain(6)
    compilation = _compile(model)
    steps = compilation.plan.steps
    assert len(steps) == 6
    assert {step.prepared.reply_poll_s for step in steps} == {DEFAULT_STEP_POLL_US / 1e6}
    [image] = sample_input(model)
    for _ in range(3):
        np.testing.assert_allclose(_compute(compilation, image), _reference(model, image), rtol=1e-5, atol=1e-5)


def test_a_simple_plan_and_low_power_do_not_poll(monkeypatch):
    model = conv_pad_chain(6)
    assert {s.prepared.reply_poll_s for s in _compile(model, Preference.LOW_POWER).plan.steps} == {0.0}
    single = Compilation.for_devices(model, [get_device("sample-float-fast")])
    single.finish()
    assert single.plan.simple and single.plan.steps[0].prepared.reply_poll_s == 0.0
    monkeypatch.setenv(STEP_POLL_US, "0")
    assert step_polling_window_s(Preference.FAST_SINGLE_ANSWER) == 0.0
    monkeypatch.setenv(STEP_POLL_US, "999999")
    assert step_polling_window_s(Preference.FAST_SINGLE_ANSWER) == 0.002
    monkeypatch.setenv(STEP_POLL_US, "many")
    assert step_polling_window_s(Preference.FAST_SINGLE_ANSWER) == DEFAULT_STEP_POLL_US / 1e6


def test_a_reused_execution_of_a_partitioned_plan_follows_its_inputs():
    """Repeats of a step run in place in the driver (its bound run): each new input is seen."""
    model = conv_pad_chain(6)
    compilation = _compile(model)
    [image] = sample_input(model)
    out = np.empty_like(image)
    execution = Execution(compilation)
    execution.set_input(0, image)
    execution.set_output(0, out)
    execution.set_reusable(True)
    rng = np.random.default_rng(23)
    for _ in range(4):
        image[...] = rng.standard_normal(image.shape, dtype=np.float32)
        execution.compute()
        np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("poll_s, nap_s", [(0.0, 0.0), (1e-4, 0.0), (5.0, 0.0), (1e-4, 60.0)])
def test_a_polled_receive_gets_a_record_sent_during_or_after_the_window(poll_s, nap_s):
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    receiver, sender = Channel(left), Channel(right)
    ready = threading.Event()
    thread = threading.Thread(target=lambda: (ready.wait(), sender.send(MsgType.PING, 7, b"late")))
    thread.start()
    sender.send(MsgType.PING, 6, b"early")
    assert bytes(receiver.recv(10.0, poll_s, nap_s).payload) == b"early"  # already there
    ready.set()
    start = time.monotonic()
    message = receiver.recv(100.0, poll_s, nap_s)  # sent while napping, polling or asleep
    assert (message.request_id, bytes(message.payload)) == (7, b"late")
    assert time.monotonic() - start < 30.0 or not nap_s  # the record ended the 60 s nap
    thread.join()
    receiver.close()
    sender.close()
