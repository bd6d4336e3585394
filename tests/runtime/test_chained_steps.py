"""Chained steps (issue 23): once every step of a partitioned plan has answered a repeat, an
execution sends all its steps at once and the drivers hand over through words in the step memory
(``EXECUTE_CHAINED``). Checked against real driver processes: the chained run agrees with the CPU
for new inputs every time; without fallback a stopped driver gives the NNAPI error and the next
execution runs on the restarted driver (with fallback: ``test_partitioned_timeouts``); a lost
last answer is waited for one timeout; a driver that refuses a chained request answers, and the
execution still completes one step at a time; the driver checks every field it is sent, and a
driver waiting in a chain gives way when its client hangs up or another client connects."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from nnscope.runtime import Compilation, NnError, ResultCode, manager
from nnscope.runtime.builtin_models import conv_pad_chain, sample_input
from nnscope.runtime.drivers.ipc import RemoteDevice, SharedPool
from nnscope.runtime.drivers.ipc.wire import chain
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType, pack_header
from nnscope.runtime.drivers.ipc.wire.transport import Channel
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus, Preference
from nnscope.runtime.plan import STEP_POLL_US, step_polling_window_s
from nnscope.runtime.drivers.ipc.client import chain as client_chain
from tests.runtime.drivers._hal import add_model
from tests.runtime.test_partitioned_timeouts import _reference, _run, _stop
from tests.support.log_capture import captured_log

TIMEOUT_S = 2.0
#: Chaining needs a polling window (two CPUs at least) and the x86 family.
needs_chaining = pytest.mark.skipif(not client_chain.worthwhile(step_polling_window_s(Preference.FAST_SINGLE_ANSWER)),
                                    reason="no chained steps on one CPU or off x86")
WARM = 3  # two full executes (the second one memoized), then a repeat answered in full: the 4th chains
_CHAINED = int(MsgType.EXECUTE_CHAINED)


@pytest.fixture
def devices():
    """Fresh minimal and float-fast driver processes with a short call timeout."""
    made = [RemoteDevice("sample-minimal", timeout_s=TIMEOUT_S), RemoteDevice("sample-float-fast",
                                                                              timeout_s=TIMEOUT_S)]
    manager.forTest_set_devices(made)
    yield made
    manager.forTest_reset()
    for device in made:
        device.shutdown()


@pytest.fixture
def sent(monkeypatch):
    """The message types the application sends, in order."""
    types: list[int] = []
    original = Channel.send

    def send(channel, msg_type, *args, **kwargs):
        types.append(int(msg_type))
        return original(channel, msg_type, *args, **kwargs)
    monkeypatch.setattr(Channel, "send", send)
    return types


def _warm(model, image, devices=None):
    compilation = Compilation(model) if devices is None else Compilation.for_devices(model, devices)
    compilation.finish()
    for _ in range(WARM):
        _run(compilation, image)
    return compilation


@pytest.fixture
def warmed(devices):
    """(model, image, compilation): conv_pad_chain(6) over both drivers, warm enough to chain."""
    model = conv_pad_chain(6)
    [image] = sample_input(model)
    compilation = _warm(model, image)
    yield model, image, compilation
    compilation.free()


@needs_chaining
def test_a_warm_partitioned_execution_chains_its_steps_and_follows_its_inputs(devices, warmed, sent):
    model, image, compilation = warmed
    assert len(compilation.plan.steps) == 6
    rng = np.random.default_rng(7)
    for _ in range(4):
        image = rng.standard_normal(image.shape).astype(np.float32)
        sent.clear()
        out, _ = _run(compilation, image)
        assert sent == [_CHAINED] * 6  # every step sent at once, nothing else
        np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-5)


def test_without_fallback_a_silent_driver_mid_chain_gives_the_nnapi_error(devices):
    model = conv_pad_chain(6)
    [image] = sample_input(model)
    compilation = _warm(model, image, devices)
    assert len(compilation.plan.steps) == 6 and compilation.plan.fallback is None
    _stop(devices[0])
    start = time.monotonic()
    with pytest.raises(NnError) as error:
        _run(compilation, image)
    assert error.value.code == ResultCode.DEAD_OBJECT
    assert time.monotonic() - start >= TIMEOUT_S  # the silence was waited out once
    out, _ = _run(compilation, image)  # restarted on next use
    np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-5)
    compilation.free()


@needs_chaining
def test_a_driver_that_refuses_to_chain_answers_and_the_steps_run_one_by_one(devices, warmed, sent):
    fast = devices[1]
    model, image, compilation = warmed
    other = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # the driver is not alone now
    other.settimeout(TIMEOUT_S)
    other.connect(fast.process.socket_path)
    try:
        other.send(pack_header(MsgType.PING, 1, 1) + b"x")
        assert other.recv(4096)  # answered: the driver serves the second connection
        sent.clear()
        pids = [device.pid for device in devices]
        with captured_log("nn", "execution") as lines:
            out, _ = _run(compilation, image)
        assert not any("no chained step ended" in line for line in lines)  # answered, not waited out
        assert [device.pid for device in devices] == pids
        np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-5)
        assert sent[:6] == [_CHAINED] * 6 and _CHAINED not in sent[6:]
        assert any("not serving this client alone" in line for line in lines), lines
        sent.clear()
        _run(compilation, image)
        assert _CHAINED not in sent  # a pause after a refused chain
    finally:
        other.close()


@pytest.fixture
def memoized():
    """(device, prepared ADD model, request in a shared region with room for two words)."""
    device = RemoteDevice("sample-all", timeout_s=TIMEOUT_S)
    prepared = device.prepare_model(add_model((4,)))
    region = SharedPool(64, "test-chain")
    region.view[:16] = np.ones(4, np.float32).tobytes()
    request = Request((RequestArgument(False, 0, 0, 16), RequestArgument(False, 0, 0, 16)),
                      (RequestArgument(False, 0, 16, 16),), (region,))
    for _ in range(3):  # full, then a memo, then a repeat answered in full: the memo has its shapes
        assert prepared.execute(request).status == ErrorStatus.NONE
    yield device, prepared, request, region
    region.close()
    device.shutdown()


@pytest.mark.parametrize("fields", [dict(done_at=64), dict(wait_at=60), dict(done_at=44), dict(wait_at=48),
                                    dict(run=0), dict(wait_ns=0), dict(wait_ns=10**15), dict(flags=2)],
                         ids=["word-outside", "wait-outside", "unaligned", "waits-for-itself", "run-0",
                              "no-wait", "wait-too-long", "unknown-flag"])
def test_the_driver_answers_a_bad_chained_request_with_invalid_argument(memoized, fields):
    device, prepared, request, region = memoized
    payload = prepared.chained_payload(request, chain.HEAD.pack(
        fields.get("wait_at", -1), fields.get("done_at", 48), fields.get("run", 1),
        fields.get("wait_ns", 10**9), fields.get("flags", chain.ALWAYS_REPLY)))
    reply = bytes(device.transact(_CHAINED, payload).payload)
    assert int.from_bytes(reply[:4], "little") == ErrorStatus.INVALID_ARGUMENT
    assert device.transact(MsgType.PING, b"x")  # and serves on


def test_a_chained_step_runs_after_the_word_before_and_ends_the_chain_after_a_failure(memoized):
    device, prepared, request, region = memoized
    chain.write(region.view, 40, chain.word(3, chain.DONE))
    reply = bytes(device.transact(_CHAINED, prepared.chained_payload(
        request, chain.HEAD.pack(40, 48, 3, 10**9, chain.ALWAYS_REPLY))).payload)
    assert reply[:4] == bytes(4)
    assert np.frombuffer(region.view, np.float32, 4, 16).tolist() == [2.0] * 4
    assert chain.read(region.view, 48) == chain.word(3, chain.REPLIED)  # the last step answered
    chain.write(region.view, 40, chain.word(4, chain.REPLIED))  # the step before failed
    reply = bytes(device.transact(_CHAINED, prepared.chained_payload(
        request, chain.HEAD.pack(40, 48, 4, 10**9, 0))).payload)
    assert int.from_bytes(reply[:4], "little") == ErrorStatus.GENERAL_FAILURE
    assert b"did not finish" in reply
    assert chain.read(region.view, 48) == chain.word(4, chain.REPLIED)


@needs_chaining
def test_a_lost_last_answer_is_waited_for_one_timeout_then_its_steps_fall_back(devices, warmed, monkeypatch):
    fast = devices[1]  # runs the last step
    model, image, compilation = warmed
    receive = RemoteDevice.receive
    lost = []

    def losing(device, timeout_s):
        message = receive(device, timeout_s)
        if device is fast and not lost:
            lost.append(message.request_id)
            return message._replace(request_id=message.request_id ^ 0xFFFF)  # not an answer of the chain
        return message
    monkeypatch.setattr(RemoteDevice, "receive", losing)
    with captured_log("nn", "execution,manager") as lines:
        out, elapsed = _run(compilation, image)
    assert lost
    np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-5)
    assert sum(f"no chained step ended within {TIMEOUT_S:g}s" in line for line in lines) == 1, lines
    assert elapsed >= TIMEOUT_S


def _waiting_step(device, prepared, request, run: int) -> int:
    """Send a step that waits (100 s at most) for a word nobody will write, and return its
    request id once the driver naps in that wait (its serve loop in ``clock_nanosleep``, which
    only the wait's naps call: the loop itself waits in ``epoll_wait`` or ``recvmsg``)."""
    request_id = device.send_request(_CHAINED, prepared.chained_payload(
        request, chain.HEAD.pack(40, 48, run, 100 * 10**9, 0)))
    give_up = time.monotonic() + 50.0
    while _syscall(device.pid) != _CLOCK_NANOSLEEP:
        assert time.monotonic() < give_up, "the driver never waited for the word"
        time.sleep(0.005)
    return request_id


_CLOCK_NANOSLEEP = "230"  # x86-64, where chaining runs


def _syscall(pid: int) -> str:
    with open(f"/proc/{pid}/syscall", encoding="ascii") as syscall:
        return syscall.read().split()[0]


def _ping_as_another_client(device) -> None:
    other = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    other.settimeout(50.0)  # half the waiting step's wait: an answer means the wait gave way
    other.connect(device.process.socket_path)
    try:
        other.send(pack_header(MsgType.PING, 1, 1) + b"x")
        assert other.recv(4096)
    finally:
        other.close()


@needs_chaining
def test_a_driver_waiting_in_a_chain_gives_way_when_its_client_hangs_up(memoized):
    device, prepared, request, region = memoized
    with device.lock:
        _waiting_step(device, prepared, request, 9)
        device.channel.close()
        device.channel = None
    give_up = time.monotonic() + 50.0
    while chain.read(region.view, 48) != chain.word(9, chain.REPLIED):  # no other client yet
        assert time.monotonic() < give_up, "the wait went on after the hang-up"
        time.sleep(0.005)
    _ping_as_another_client(device)


@needs_chaining
def test_a_driver_waiting_in_a_chain_serves_another_client_that_connects(memoized):
    device, prepared, request, region = memoized
    with device.lock:
        request_id = _waiting_step(device, prepared, request, 11)
        _ping_as_another_client(device)
        answer = device.receive(TIMEOUT_S)
    assert answer.request_id == request_id
    assert int.from_bytes(bytes(answer.payload[:4]), "little") == ErrorStatus.GENERAL_FAILURE
    assert b"did not finish" in bytes(answer.payload)  # it gave way in the wait, not before
    assert chain.read(region.view, 48) == chain.word(11, chain.REPLIED)


@pytest.mark.parametrize("how", ["low-power", "no-polling"])
def test_low_power_or_no_polling_window_runs_the_steps_one_by_one(devices, sent, monkeypatch, how):
    model = conv_pad_chain(6)
    [image] = sample_input(model)
    if how == "no-polling":
        monkeypatch.setenv(STEP_POLL_US, "0")
    compilation = Compilation(model)
    if how == "low-power":
        compilation.set_preference(Preference.LOW_POWER)
    compilation.finish()
    for _ in range(WARM + 1):
        sent.clear()
        out, _ = _run(compilation, image)
    assert _CHAINED not in sent and sent.count(int(MsgType.EXECUTE_SYNC_MEMO)) == 6
    np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-5)
    compilation.free()


@needs_chaining
def test_a_callback_answered_during_a_chain_is_kept_for_its_wait(devices, warmed, sent):
    fast = devices[1]
    model, image, compilation = warmed
    pid = fast.pid
    prepared = fast.prepare_model(add_model((4,)))
    pool = bytearray(np.ones(4, np.float32).tobytes() + bytes(16))
    request = Request((RequestArgument(False, 0, 0, 16), RequestArgument(False, 0, 0, 16)),
                      (RequestArgument(False, 0, 16, 16),), (pool,))
    callback = prepared.execute_async(request)  # its NOTIFY comes while the chain runs
    sent.clear()
    out, _ = _run(compilation, image)
    assert _CHAINED in sent
    np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-5)
    assert callback.wait().status == ErrorStatus.NONE
    assert np.frombuffer(pool, np.float32, 4, 16).tolist() == [2.0] * 4
    assert fast.pid == pid  # nobody was killed
    prepared.release()


@needs_chaining
def test_a_chain_waits_with_poll_when_an_fd_is_beyond_select(devices, warmed, sent, monkeypatch):
    model, image, compilation = warmed
    monkeypatch.setattr(client_chain, "_FD_SETSIZE", 0)  # as if every socket were fd 1024 or more
    sent.clear()
    out, _ = _run(compilation, image)
    assert sent == [_CHAINED] * 6
    np.testing.assert_allclose(out, _reference(model, image), rtol=1e-5, atol=1e-5)


def test_a_chained_step_with_an_output_outside_shared_memory_answers_with_its_bytes():
    device = RemoteDevice("sample-all", timeout_s=TIMEOUT_S)
    try:
        prepared = device.prepare_model(add_model((4,)))
        region = SharedPool(64, "test-chain")
        region.view[:16] = np.ones(4, np.float32).tobytes()
        out = bytearray(16)  # a plain pool: its bytes travel in the reply
        request = Request((RequestArgument(False, 0, 0, 16), RequestArgument(False, 0, 0, 16)),
                          (RequestArgument(False, 1, 0, 16),), (region, out))
        for _ in range(3):
            assert prepared.execute(request).status == ErrorStatus.NONE
        reply = bytes(device.transact(_CHAINED, prepared.chained_payload(
            request, chain.HEAD.pack(-1, 48, 5, 10**9, 0))).payload)  # not the last step, yet answered
        assert reply[:4] == bytes(4) and np.frombuffer(reply[-16:], np.float32).tolist() == [2.0] * 4
        assert chain.read(region.view, 48) == chain.word(5, chain.REPLIED)
        region.close()
    finally:
        device.shutdown()
