"""A driver process that dies or hangs is reported promptly; no call waits forever.

"Promptly" is checked by cause, never by a stopwatch: a death is seen on the connection (the
DEAD_OBJECT does not say "no reply within", the message of a timeout), a hang ends by the
timeout (the driver killed, after at least the timeout) or by the deadline (MISSED_DEADLINE,
the driver left running). Order comes from events and a hook on the client's sends, not from
sleeping."""
import os
import signal
import threading
import time

import numpy as np
import pytest

from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.drivers._hal import add_model, make_request
from tests.support.sent import SentHook
from tests.support.stopped import stop_process


#: How the client words a DEAD_OBJECT that came from its timeout (``RemoteDevice``).
TIMED_OUT = "no reply within"


def _prepared(device, shape=(4,)):
    model = add_model(shape)
    prepared = device.prepare_model(model)
    request, _, _ = make_request(model, [np.ones(shape, np.float32)] * 2)
    return prepared, request


def test_killed_driver_is_dead_object_promptly(fresh_device):
    device = fresh_device(timeout_s=60.0)
    prepared, request = _prepared(device)
    assert prepared.execute(request).status == ErrorStatus.NONE
    os.kill(device.pid, signal.SIGKILL)
    with pytest.raises(HalError) as error:
        prepared.execute(request)
    assert error.value.status == ErrorStatus.DEAD_OBJECT
    assert TIMED_OUT not in str(error.value), str(error.value)  # seen at once, not by timing out
    with pytest.raises(HalError) as again:  # a dead device stays dead
        device.capabilities()
    assert again.value.status == ErrorStatus.DEAD_OBJECT


def test_kill_during_a_stream_of_executions(fresh_device):
    device = fresh_device(timeout_s=60.0)
    prepared, request = _prepared(device, (256, 256))
    errors, done, streaming = [], threading.Event(), threading.Event()

    def run():
        try:
            while True:
                prepared.execute(request)
                streaming.set()
        except HalError as error:
            errors.append((error.status, str(error)))
        finally:
            done.set()

    worker = threading.Thread(target=run)
    worker.start()
    assert streaming.wait(60)  # one execution done, the next ones under way
    os.kill(device.pid, signal.SIGKILL)
    assert done.wait(device.timeout_s)
    worker.join()
    assert errors[0][0] == ErrorStatus.DEAD_OBJECT and TIMED_OUT not in errors[0][1], errors


def test_pending_async_execution_sees_dead_object(fresh_device, monkeypatch):
    device = fresh_device(timeout_s=60.0)
    prepared, request = _prepared(device, (512, 512))
    stop_process(device.pid)  # nothing is processed until we kill it
    try:
        results = []  # launch + wait run in a thread; the driver answers neither before dying
        thread, sent = SentHook(monkeypatch).start(lambda: results.append(_capture(prepared, request)))
        assert sent.wait(60)  # the execute is in the stopped driver's socket
        os.kill(device.pid, signal.SIGKILL)
        thread.join(device.timeout_s)
        assert not thread.is_alive()
        assert results == [ErrorStatus.DEAD_OBJECT]
    finally:
        _reap(device)


def test_hung_driver_times_out_as_dead_object(fresh_device):
    device = fresh_device(timeout_s=30.0)
    prepared, request = _prepared(device)
    device.timeout_s = 0.5  # after preparing: a loaded machine may take longer to start up
    stop_process(device.pid)
    start = time.monotonic()
    with pytest.raises(HalError) as error:
        prepared.execute(request)
    elapsed = time.monotonic() - start
    assert error.value.status == ErrorStatus.DEAD_OBJECT
    assert f"{TIMED_OUT} 0.5s; driver killed" in str(error.value), str(error.value)  # by the timeout
    assert elapsed >= device.timeout_s  # not before it (a lower bound: load only adds to it)
    assert not device.process.alive()  # the hung process was killed


def test_deadline_bounds_the_wait_on_a_hung_driver(fresh_device):
    device = fresh_device(timeout_s=30.0)
    prepared, request = _prepared(device)
    stop_process(device.pid)
    try:
        result = prepared.execute(request, deadline_ns=time.monotonic_ns() + 200_000_000)
        assert result.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT  # a timeout is DEAD_OBJECT
        assert device.process.alive()  # the deadline ended the wait: the driver was not killed
    finally:
        os.kill(device.pid, signal.SIGCONT)
    assert prepared.execute(request).status == ErrorStatus.NONE  # reconnects once it answers


def test_unknown_driver_name_fails_start_up():
    device = RemoteDevice("sample-does-not-exist", startup_timeout_s=20.0)
    with pytest.raises(HalError) as error:
        device.capabilities()
    assert error.value.status == ErrorStatus.DEVICE_UNAVAILABLE
    device.shutdown()


def test_shutdown_stops_the_process(fresh_device):
    device = fresh_device()
    device.capabilities()
    popen = device.process.popen
    device.shutdown()
    assert popen.poll() == 0
    with pytest.raises(HalError):
        device.capabilities()


def _capture(prepared, request):
    try:
        prepared.execute_async(request).wait()
    except HalError as error:
        return error.status
    return None


def _reap(device):
    if device.process.alive():
        os.kill(device.pid, signal.SIGKILL)
        device.process.popen.wait(5.0)
