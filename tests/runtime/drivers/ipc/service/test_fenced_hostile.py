"""Hostile clients of ``service.fenced`` on a real driver process: fences the driver cannot
write must not stall it, and every launch gets an answer (the promises of
``tests.support.driver_attack`` are checked after each attack)."""
import fcntl
import os
import socket
import struct

from nnscope.runtime.drivers.ipc.wire.layouts import FENCED_INFO, FENCED_MEMO
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType
from nnscope.runtime.hal import sync_fence
from nnscope.runtime.hal.types import ErrorStatus
from tests.support.driver_attack import ANSWER_S, AttackedDriver, exchange, prepare_add, read_reply, record, send
from tests.support.driver_attack_rings import fenced_payload


def _fence(attacker, blocking: bool = False) -> int:
    return attacker.own(os.eventfd(0, os.EFD_CLOEXEC | (0 if blocking else os.EFD_NONBLOCK)))


def _launch(sock, model_id: int, waits: list) -> tuple[int, int]:
    """EXECUTE_FENCED of ADD after ``waits``: (callback id, the sync fence the reply carries)."""
    send(sock, record(MsgType.EXECUTE_FENCED, 1, fenced_payload(model_id, len(waits))), waits)
    sock.settimeout(ANSWER_S)
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 4)
    status, callback_id = struct.unpack_from("<II", data, 16)
    assert status == 0 and len(fds) == 1, (status, data[20:], fds)
    return callback_id, fds[0]


def _info(sock, callback_id: int) -> tuple[int, str]:
    """getExecutionInfo once the run is done: (execution status, message)."""
    for _ in range(100):  # a run still waiting is GENERAL_FAILURE: ask again
        reply = exchange(sock, MsgType.FENCED_INFO, struct.pack("<I", callback_id))
        if reply.status == 0:
            status = FENCED_INFO.unpack_from(reply.body)[0]
            return status, reply.body[FENCED_INFO.size + 4:].decode()
        assert reply.status == ErrorStatus.GENERAL_FAILURE, reply
    raise AssertionError("the fenced run never ended")


def test_a_refused_repeat_whose_fence_was_made_blocking_and_signalled_is_answered():
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            fence = _fence(attacker, blocking=True)
            sync_fence.signal(fence, ok=True)  # a FAILED written now would wait for a read
            send(sock, record(MsgType.EXECUTE_FENCED_MEMO, 9, FENCED_MEMO.pack(0, -1, 0)), [fence])
            reply = read_reply(sock)
            assert (reply.type, reply.status) == (REPLY | MsgType.EXECUTE_FENCED_MEMO,
                                                  ErrorStatus.INVALID_ARGUMENT), reply


def test_a_returned_fence_made_blocking_and_full_by_the_client_stalls_nothing():
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            model_id = prepare_add(sock)
            wait_for = _fence(attacker)
            callback_id, fence = _launch(sock, model_id, [wait_for])
            attacker.own(fence)
            fcntl.fcntl(fence, fcntl.F_SETFL, 0)  # the driver's own description, now blocking
            os.eventfd_write(fence, sync_fence.FAILED)  # full: no write of the driver fits
            sync_fence.signal(wait_for, ok=True)
            assert _info(sock, callback_id)[0] == ErrorStatus.NONE
