"""HAL ``IPreparedModel.executeFenced`` on a real driver process: sync fences in and out over
SCM_RIGHTS, ``getExecutionInfo``, and malformed requests sent straight over the socket (each
INVALID_ARGUMENT, the driver serving on without leaking an fd)."""
import contextlib
import os
import struct
import time

import numpy as np
import pytest

from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.client import fenced as fenced_client
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.service.fenced import MAX_RUNNING, MAX_WAIT_FENCES
from nnscope.runtime.drivers.ipc.wire.execution_codec import MEMO_HEAD
from nnscope.runtime.drivers.ipc.wire.layouts import FENCED_LAUNCH as LAUNCH, FENCED_MEMO
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.sync_fence import ACTIVE, DONE, ERROR, FAILED, count, new_fence, wait
from nnscope.runtime.drivers.ipc.wire.transport import Channel
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.drivers._hal import add_model, make_request
from nnscope.timing import NO_TIMING

INVALID = ErrorStatus.INVALID_ARGUMENT
_THREADS: dict[int, int] = {}  # driver pid -> its thread count before any fenced job


@pytest.fixture(scope="module")
def driver():
    """(device, prepared ADD model, HAL model) on a driver process of this module alone."""
    device = RemoteDevice("sample-all", timeout_s=30.0)
    model = add_model((4,))
    prepared = device.prepare_model(model)
    _THREADS[device.pid] = _threads(device.pid)  # a driver starts its own threads at once
    yield device, prepared, model
    device.shutdown()


@pytest.fixture
def gate():
    fd = os.eventfd(0, os.EFD_CLOEXEC)
    yield fd
    os.close(fd)


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(4).astype(np.float32) for _ in range(2)]


def _reference(model, inputs) -> np.ndarray:
    """The nnapi-reference CPU device's output."""
    request, _, (out,) = make_request(model, inputs)
    assert CpuDevice().prepare_model(model).execute(request).status == ErrorStatus.NONE
    return out.copy()


def _finish(fence: int, callback, timeout: float = 30.0):
    state = wait(fence, timeout)
    os.close(fence)
    return state, callback.get_execution_info()


def test_driver_waits_for_the_fences_then_signals_its_own(driver, gate):
    device, prepared, model = driver
    inputs = _inputs(1)
    request, pool, (out,) = make_request(model, inputs, shared=True)
    fence, callback = fenced_client.execute_fenced(prepared, request, [gate], measure=True)
    assert wait(fence, 0.1) == ACTIVE and not out.any()
    with pytest.raises(HalError, match="still running") as info:
        callback.get_execution_info()
    assert info.value.status == ErrorStatus.GENERAL_FAILURE
    time.sleep(0.05)
    os.eventfd_write(gate, 1)
    state, result = _finish(fence, callback)
    assert state == DONE and result.status == ErrorStatus.NONE
    np.testing.assert_array_equal(out, _reference(model, inputs))
    assert result.launched.on_device == result.fenced.on_device is not None
    assert result.launched.in_driver - result.fenced.in_driver >= 40_000  # us: the wait for the gate
    assert callback.get_execution_info() == result  # asked again: the same answer
    pool.close()


def test_unmeasured_timing_reads_as_unknown(driver):
    _, prepared, model = driver
    request, pool, (out,) = make_request(model, _inputs(2), shared=True)
    state, result = _finish(*fenced_client.execute_fenced(prepared, request, [], measure=False))
    assert state == DONE and result.status == ErrorStatus.NONE
    assert result.launched == result.fenced == NO_TIMING
    assert fenced_client.timing_or_none(result.launched) is None and result.fenced.in_driver is None
    pool.close()


def test_a_failed_wait_fence_fails_the_execution_and_its_fence(driver, gate):
    _, prepared, model = driver
    request, pool, (out,) = make_request(model, _inputs(3), shared=True)
    failed = os.eventfd(0, os.EFD_CLOEXEC)
    fence, callback = fenced_client.execute_fenced(prepared, request, [gate, failed], measure=True)
    os.eventfd_write(gate, 1)
    os.eventfd_write(failed, FAILED)
    os.close(failed)
    waited = wait(fence, 30)
    assert waited == ERROR and count(fence) == FAILED
    _, result = _finish(fence, callback)
    assert result.status == ErrorStatus.GENERAL_FAILURE and "wait_for[1] signalled an error" in result.message
    assert result.launched == NO_TIMING and not out.any()
    pool.close()


def test_the_deadline_bounds_the_wait_for_fences(driver, gate):
    _, prepared, model = driver
    request, pool, (out,) = make_request(model, _inputs(4), shared=True)
    fence, callback = fenced_client.execute_fenced(prepared, request, [gate],
                                                   deadline_ns=time.monotonic_ns() + 50_000_000)
    state, result = _finish(fence, callback)  # the gate never opens
    assert state == ERROR and result.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    assert not out.any()
    pool.close()


def test_a_plain_output_or_a_foreign_fence_is_refused_at_the_client(driver):
    _, prepared, model = driver
    request, _, _ = make_request(model, _inputs(5))  # a bytearray pool
    with pytest.raises(ValueError, match="shared memory"):
        fenced_client.execute_fenced(prepared, request, [])
    read_end, write_end = os.pipe()
    shared_request, pool, _ = make_request(model, _inputs(5), shared=True)
    for not_a_fence in (read_end, 999_999):
        with pytest.raises(ValueError, match="eventfd"):
            fenced_client.execute_fenced(prepared, shared_request, [not_a_fence])
    os.close(read_end)
    os.close(write_end)
    pool.close()
    shared, copies = fenced_client.shared_request(request)
    state, result = _finish(*fenced_client.execute_fenced(prepared, shared, []))
    assert state == DONE and result.status == ErrorStatus.NONE
    fenced_client.copy_back(request, copies)
    fenced_client.close_copies(copies)


# ---------------------------------------------------------------------- malformed requests
def _status(device, msg_type, payload, fds=()) -> ErrorStatus:
    """The driver's reply status (the fds of a successful launch are closed here)."""
    message = device.transact(msg_type, payload, list(fds))
    for fd in message.fds:
        os.close(fd)
    return ErrorStatus(struct.unpack_from("<I", message.payload)[0])


def _body(prepared, model_id=None):
    """(execute payload, pool fds, pool) of a valid shared-memory request."""
    request, pool, _ = make_request(prepared.model, _inputs(6), shared=True)
    payload, fds, _, _ = encode_execute(prepared.model_id if model_id is None else model_id, request,
                                        False, None, PoolCache(), [])
    return payload, fds, pool


def _malformed_cases(prepared, gate):
    body, (pool_fd,), pool = _body(prepared)
    unknown_model, _, other = _body(prepared, model_id=9999)
    read_end, write_end = os.pipe()
    launch = LAUNCH.pack
    cases = {
        "more fences declared than fds": (launch(3, -1) + body, [gate, pool_fd]),
        "a pipe as fence": (launch(1, -1) + body, [read_end, pool_fd]),
        "a memfd as fence": (launch(1, -1) + body, [pool_fd, pool_fd]),
        "a fence read as a pool": (launch(0, -1) + body, [gate, pool_fd]),
        "a pool fd missing": (launch(1, -1) + body, [gate]),
        "too many fences": (launch(MAX_WAIT_FENCES + 1, -1) + body,
                            [gate] * (MAX_WAIT_FENCES + 1) + [pool_fd]),
        "negative timeout_after_fence": (launch(1, -5) + body, [gate, pool_fd]),
        "truncated head": (b"\x01\x00\x00", [gate]),
        "unknown model": (launch(1, -1) + unknown_model, [gate, pool_fd]),
        "trailing bytes": (launch(1, -1) + body + b"\x00", [gate, pool_fd]),
        "garbage after the head": (launch(1, -1) + bytes(range(7, 90)), [gate]),
    }
    return cases, (pool, other, read_end, write_end)


def _open_fds(pid: int) -> list:
    """What the driver's fds point to (sorted): compared whole, a leak names itself."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}").split(":[")[0])
    return sorted(targets)


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _quiet_fds(device) -> list:
    """The driver's fds once no fenced worker runs. A worker signals its sync fence, then
    closes it and ends: its thread gone (the driver back to the threads it had before any
    fenced job, ``_THREADS``) is the sign that it closed everything."""
    device.transact(MsgType.PING, b"ping")  # the serve loop is done with earlier messages' fds
    give_up = time.monotonic() + 60.0  # a bound on the wait only; nothing is timed
    while _threads(device.pid) != _THREADS[device.pid]:
        assert time.monotonic() < give_up, f"a fenced worker of driver {device.pid} never ended"
        time.sleep(0.01)
    return _open_fds(device.pid)


def test_malformed_execute_fenced_is_invalid_argument_and_the_driver_serves_on(driver, gate):
    device, prepared, model = driver
    _finish(*fenced_client.execute_fenced(prepared, make_request(model, _inputs(7), shared=True)[0], []))
    before = _quiet_fds(device)
    cases, keep = _malformed_cases(prepared, gate)
    answers = {name: _status(device, MsgType.EXECUTE_FENCED, payload, fds)
               for name, (payload, fds) in cases.items()}
    assert answers == {name: INVALID for name in cases}
    for name, payload in (("unknown callback", struct.pack("<I", 4242)), ("truncated", b"\x01"),
                          ("trailing bytes", struct.pack("<IB", 1, 0))):
        assert _status(device, MsgType.FENCED_INFO, payload) == INVALID, name
    rng = np.random.default_rng(20261123)
    for _ in range(100):  # seeded garbage: random heads, bodies and fence counts
        payload = rng.integers(0, 256, int(rng.integers(0, 200)), dtype=np.uint8).tobytes()
        assert _status(device, MsgType.EXECUTE_FENCED, payload, [gate] * int(rng.integers(0, 3))) == INVALID
    for item in keep[:2]:
        item.close()
    os.close(keep[2])
    os.close(keep[3])
    assert _quiet_fds(device) == before  # nothing leaked in the driver
    inputs = _inputs(8)
    request, pool, (out,) = make_request(model, inputs, shared=True)
    state, result = _finish(*fenced_client.execute_fenced(prepared, request, [], measure=True))
    assert state == DONE and result.status == ErrorStatus.NONE
    np.testing.assert_array_equal(out, _reference(model, inputs))
    assert device.capabilities() is not None
    pool.close()


def test_a_job_whose_client_disconnects_stops_waiting_and_frees_its_fds(driver, gate):
    device, prepared, _ = driver
    before = _quiet_fds(device)
    body, fds, pool = _body(prepared)
    channel = Channel.connect(device.process.socket_path, 10.0)
    channel.send(MsgType.EXECUTE_FENCED, 1, LAUNCH.pack(1, -1) + body, [gate, *fds])
    launched = channel.recv(10.0)
    assert struct.unpack_from("<I", launched.payload)[0] == ErrorStatus.NONE and len(launched.fds) == 1
    fence = launched.fds[0]
    channel.close()  # gone while the driver waits for a gate that never opens
    assert wait(fence, 10.0) == ERROR  # the job gave up
    os.close(fence)
    pool.close()
    assert _quiet_fds(device) == before


def test_bit_flipped_launches_never_break_the_driver(driver, gate):
    """Seeded bit flips in a valid executeFenced: each is refused (INVALID_ARGUMENT) or runs to a
    status its fence reports; the driver serves on without leaking an fd."""
    device, prepared, model = driver
    os.eventfd_write(gate, 1)  # an open gate: launched jobs finish at once
    body, fds, pool = _body(prepared)
    valid = bytearray(LAUNCH.pack(1, -1) + body)
    before = _quiet_fds(device)
    rng = np.random.default_rng(7)
    outcomes = set()
    for _ in range(150):
        payload = bytearray(valid)
        for bit in rng.integers(0, len(payload) * 8, int(rng.integers(1, 4))):
            payload[bit // 8] ^= 1 << (bit % 8)
        message = device.transact(MsgType.EXECUTE_FENCED, bytes(payload), [gate, *fds])
        status = ErrorStatus(struct.unpack_from("<I", message.payload)[0])
        if status == ErrorStatus.NONE:
            [fence] = message.fds
            callback = fenced_client.FencedCallback(device, struct.unpack_from("<I", message.payload, 4)[0])
            state, result = _finish(fence, callback)
            assert state in (DONE, ERROR) and (state == DONE) == (result.status == ErrorStatus.NONE)
            outcomes.add(("launched", result.status))
        else:
            assert status == INVALID and not message.fds
            outcomes.add(("refused", status))
    assert ("refused", INVALID) in outcomes and ("launched", ErrorStatus.NONE) in outcomes
    pool.close()
    assert _quiet_fds(device) == before
    inputs = _inputs(9)
    request, shared, (out,) = make_request(model, inputs, shared=True)
    state, result = _finish(*fenced_client.execute_fenced(prepared, request, []))
    assert state == DONE and result.status == ErrorStatus.NONE
    np.testing.assert_array_equal(out, _reference(model, inputs))
    shared.close()


def test_too_many_running_on_one_connection_is_resource_exhausted(driver, gate):
    _, prepared, model = driver
    request, pool, _ = make_request(model, _inputs(10), shared=True)
    running = [fenced_client.execute_fenced(prepared, request, [gate]) for _ in range(MAX_RUNNING)]
    with pytest.raises(HalError) as info:
        fenced_client.execute_fenced(prepared, request, [gate])
    assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
    os.eventfd_write(gate, 1)
    assert all(_finish(fence, callback)[1].status == ErrorStatus.NONE for fence, callback in running)
    state, _ = _finish(*fenced_client.execute_fenced(prepared, request, [gate]))  # room again
    assert state == DONE
    pool.close()


def _fenced_repeat(device, prepared, request, monkeypatch) -> bytes:
    """The payload of a valid ``EXECUTE_FENCED_MEMO`` (the driver holds ``request`` as a memo),
    after that launch ran."""
    for _ in range(2):  # the pool travels, then the request is memoized
        assert prepared.execute(request).status == ErrorStatus.NONE
    sent, real = [], device.send_expecting

    def capture(msg_type, payload, fds=()):
        sent.append(bytes(payload))
        return real(msg_type, payload, fds)
    monkeypatch.setattr(device, "send_expecting", capture)
    run = prepared.execute_fenced(request, [])
    assert run.result(run.state(30.0)).status == ErrorStatus.NONE
    run.close()
    monkeypatch.undo()
    return sent[0]


def test_malformed_fenced_repeats_are_refused_and_fail_their_sync_fence(driver, gate, monkeypatch):
    """EXECUTE_FENCED_MEMO straight over the socket: each malformed launch is INVALID_ARGUMENT,
    the sync fence the client sent with it is failed (whoever waits for it learns at once), a
    memo launched and pending is refused a second launch and a plain repeat, and the driver
    serves on without leaking an fd."""
    device, prepared, model = driver
    request, pool, (out,) = make_request(model, _inputs(21), shared=True)
    valid = _fenced_repeat(device, prepared, request, monkeypatch)
    _, _, watch = FENCED_MEMO.unpack_from(valid)
    body = valid[FENCED_MEMO.size:]
    model_id, memo_id, _, _ = MEMO_HEAD.unpack_from(body)
    before = _quiet_fds(device)
    read_end, write_end = os.pipe()

    def head(waits, after=-1):
        return FENCED_MEMO.pack(waits, after, watch)

    def memo(model=model_id, memo=memo_id, measure=0, deadline=-1):
        return MEMO_HEAD.pack(model, memo, measure, deadline)
    cases = {  # name: (payload, wait fds; a new sync fence follows them)
        "more fences declared than sent": (head(2) + body, [gate]),
        "a pipe as wait fence": (head(1) + body, [read_end]),
        "unknown memo": (head(0) + memo(memo=memo_id + 999), []),
        "the memo of another model": (head(0) + memo(model=model_id + 7), []),
        "bad measure flags": (head(0) + memo(measure=0x80), []),
        "a deadline below -1": (head(0) + memo(deadline=-5), []),
        "negative timeout_after_fence": (head(0, after=-7) + body, []),
        "too many fences": (head(MAX_WAIT_FENCES + 1) + body, [gate] * (MAX_WAIT_FENCES + 1)),
        "trailing bytes": (head(0) + body + b"\x00", []),
        "truncated": (valid[:FENCED_MEMO.size + 3], []),
    }
    for name, (payload, waits) in cases.items():
        fence = new_fence()
        assert _status(device, MsgType.EXECUTE_FENCED_MEMO, payload, [*waits, fence]) == INVALID, name
        assert wait(fence, 0) == ERROR, name  # failed by the driver: nobody waits for it in vain
        os.close(fence)
    for name, fds in (("no sync fence", []), ("a memfd as sync fence", [pool.fd])):
        assert _status(device, MsgType.EXECUTE_FENCED_MEMO, head(0) + body, fds) == INVALID, name
    pending = new_fence()  # a timed launch: answered with its callback id (an untimed one is quiet)
    assert _status(device, MsgType.EXECUTE_FENCED_MEMO, head(1) + memo(measure=1), [gate, pending]) == \
        ErrorStatus.NONE
    again = new_fence()
    assert _status(device, MsgType.EXECUTE_FENCED_MEMO, head(0) + body, [again]) == INVALID
    assert wait(again, 0) == ERROR and wait(pending, 0.05) == ACTIVE
    assert _status(device, MsgType.EXECUTE_SYNC_MEMO, memo(measure=2)) == INVALID  # not while it waits
    os.eventfd_write(gate, 1)
    assert wait(pending, 30.0) == DONE
    for fd in (again, pending, read_end, write_end):
        os.close(fd)
    assert _quiet_fds(device) == before  # nothing leaked in the driver
    out[:] = 0
    run = prepared.execute_fenced(request, [])  # the memo serves on
    assert run.result(run.state(30.0)).status == ErrorStatus.NONE
    run.close()
    np.testing.assert_array_equal(out, _reference(model, _inputs(21)))
    pool.close()
