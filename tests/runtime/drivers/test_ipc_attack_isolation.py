"""Isolation attacks on a real driver process (issue 16): another client process, another user,
or a client moving the trace directory; plus user memory a driver must not map.

Each attack runs through ``tests.support.driver_attack``, which then checks the five promises.
"""
import mmap
import os
import stat
import struct
import tempfile

import numpy as np
import pytest

from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.wire.codec import Writer
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.runtime.memory import Memory
from tests.runtime.drivers._hal import add_model
from tests.support.driver_attack import (AttackedDriver, exchange, execute_add, execute_add_payload,
                                         from_other_process, other_user_python, prepare_add, result_of)

INVALID = ErrorStatus.INVALID_ARGUMENT


@pytest.fixture
def driver():
    with AttackedDriver() as attacked:
        yield attacked


def test_another_process_cannot_use_or_release_a_clients_models(driver):
    with driver.attack() as attacker:
        mine = attacker.connect()
        model_id = prepare_add(mine)
        replies = from_other_process(driver.socket_path, [
            (MsgType.EXECUTE_SYNC, 1, execute_add_payload(model_id)),
            (MsgType.RELEASE_MODEL, 2, struct.pack("<I", model_id)),
            (MsgType.EXECUTE_SYNC, 3, execute_add_payload(model_id)),
        ])
        assert [(r[0], r[2]) for r in replies] == [(REPLY | MsgType.EXECUTE_SYNC, INVALID),
                                                  (REPLY | MsgType.RELEASE_MODEL, 0),
                                                  (REPLY | MsgType.EXECUTE_SYNC, INVALID)], replies
        mine.close()
        again = attacker.connect()  # the same process reconnects to its own model
        result, outputs = result_of(execute_add(again, model_id, 4.0))
        assert result.status == ErrorStatus.NONE
        assert np.frombuffer(outputs[0][1], np.float32).tolist() == [8.0] * 4


def test_set_trace_dir_only_from_the_process_that_started_the_driver(driver):
    target = tempfile.mkdtemp(prefix="nnscope-attack-target-")
    w = Writer()
    w.text(target)
    with driver.attack() as attacker:
        replies = from_other_process(driver.socket_path, [(MsgType.SET_TRACE_DIR, 1, w.getvalue())])
        assert [(r[0], r[2]) for r in replies] == [(REPLY | MsgType.SET_TRACE_DIR, INVALID)], replies
        leave = Writer()
        leave.text("")  # the starter (this process) may
        assert exchange(attacker.connect(), MsgType.SET_TRACE_DIR, leave.getvalue()).status == 0
    assert os.listdir(target) == []
    os.rmdir(target)


@pytest.mark.skipif(os.geteuid() != 0 or other_user_python() is None,
                    reason="needs root (to run a client as another user) and a Python it may run")
def test_another_user_cannot_use_the_driver_even_through_an_open_socket(driver):
    os.chmod(driver.dir, 0o711)  # the attack: a socket left reachable by everyone
    os.chmod(driver.socket_path, 0o777)
    with driver.attack():
        replies = from_other_process(driver.socket_path, [(MsgType.PING, 1, b"hi")], user=65534)
        assert isinstance(replies, dict) and replies["replies"] == [], replies


def test_driver_socket_is_private_to_its_user():
    device = RemoteDevice("sample-minimal", timeout_s=30.0)
    try:
        device.type  # starts the process
        path = device.process.socket_path
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0
    finally:
        device.shutdown()


@pytest.mark.parametrize("kind", ["file", "memfd"])
def test_user_memory_that_can_shrink_is_copied_for_the_driver(kind, sample_all):
    """Memory.from_fd of memory a driver must not map still works: the runtime copies it."""
    prepared = sample_all.prepare_model(add_model((4,)))
    if kind == "file":
        fd = os.open(tempfile.gettempdir(), os.O_TMPFILE | os.O_RDWR)
    else:
        fd = os.memfd_create("user-memory")
    try:
        os.ftruncate(fd, 8192)
        memory = Memory.from_fd(8192, mmap.PROT_READ | mmap.PROT_WRITE, fd)
    finally:
        os.close(fd)
    with memory:
        assert not memory.sealed
        memory.array(np.float32)[:8] = 2.5
        arg = lambda offset: RequestArgument(pool_index=0, offset=offset, length=16)  # noqa: E731
        result = prepared.execute(Request((arg(0), arg(16)), (arg(32),), (memory,)))
        assert result.status == ErrorStatus.NONE
        assert memory.array(np.float32)[8:12].tolist() == [5.0] * 4
    with Memory.create_shared(64) as shared:
        assert shared.sealed
        with pytest.raises(PermissionError):
            os.ftruncate(shared.fd, 0)
