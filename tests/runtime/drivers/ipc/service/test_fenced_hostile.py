"""Hostile clients of ``service.fenced`` on a real driver process: fences the driver cannot
write or poll, and launches that fail at once, must each get an answer, and the driver must
serve on (the promises of ``tests.support.driver_attack`` are checked after each attack)."""
import fcntl
import os
import select
import socket
import struct

from nnscope.runtime.drivers.ipc.wire.execution_codec import MEMO_HEAD
from nnscope.runtime.drivers.ipc.wire.layouts import FENCED_INFO, FENCED_MEMO
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType
from nnscope.runtime.hal import sync_fence
from nnscope.runtime.hal.types import ErrorStatus
from tests.support.driver_attack import (ANSWER_S, AttackedDriver, exchange, execute_add_payload, prepare_add,
                                         read_reply, record, send)
from tests.support.driver_attack_rings import fenced_payload

#: Inline pool bytes of a memo of ``prepare_add``'s model: two float32[4] inputs, one output.
ADD_INLINE_BYTES = 3 * 4 * 4
_MEMO_ID = 7


def _fence(attacker, blocking: bool = False) -> int:
    return attacker.own(os.eventfd(0, os.EFD_CLOEXEC | (0 if blocking else os.EFD_NONBLOCK)))


def _memoize(sock, model_id: int) -> None:
    """An EXECUTE_SYNC that leaves memo ``_MEMO_ID`` of the ADD request on the connection."""
    payload = bytearray(execute_add_payload(model_id))
    struct.pack_into("<I", payload, 4, _MEMO_ID)  # the memo id follows the model id
    assert exchange(sock, MsgType.EXECUTE_SYNC, bytes(payload)).status == 0


def _repeat(model_id: int, deadline_ns: int = -1) -> bytes:
    """An untimed (quiet) EXECUTE_FENCED_MEMO of memo ``_MEMO_ID`` without wait fences."""
    return FENCED_MEMO.pack(0, -1, 0) + MEMO_HEAD.pack(model_id, _MEMO_ID, 0, deadline_ns) + \
        bytes(ADD_INLINE_BYTES)


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


def _deep_epoll(attacker) -> int:
    """The outermost of the deepest chain of epoll instances the kernel lets one build: no
    further epoll can watch it. The attack owns (and closes) every instance of the chain."""
    inner = _epoll(attacker)
    while True:
        outer = _epoll(attacker)
        try:
            select.epoll.fromfd(os.dup(outer)).register(inner, select.EPOLLIN)
        except OSError:
            return inner
        inner = outer


def _epoll(attacker) -> int:
    poller = select.epoll()
    try:
        return attacker.own(os.dup(poller.fileno()))
    finally:
        poller.close()


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


def test_a_wait_fence_the_driver_cannot_poll_fails_its_run():
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            model_id = prepare_add(sock)
            callback_id, fence = _launch(sock, model_id, [_deep_epoll(attacker)])
            attacker.own(fence)
            assert sync_fence.wait(fence, ANSWER_S, True) == sync_fence.ERROR
            status, message = _info(sock, callback_id)
            assert status == ErrorStatus.INVALID_ARGUMENT and "wait_for[0]" in message, message


def test_a_quiet_repeat_that_fails_at_once_is_answered_with_its_error():
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            model_id = prepare_add(sock)
            _memoize(sock, model_id)
            fence = _fence(attacker)
            send(sock, record(MsgType.EXECUTE_FENCED_MEMO, 9, _repeat(model_id, deadline_ns=1)), [fence])
            reply = read_reply(sock)
            assert (reply.type, reply.request_id, reply.status) == \
                (REPLY | MsgType.EXECUTE_FENCED_MEMO, 9, ErrorStatus.MISSED_DEADLINE_TRANSIENT), reply
            assert sync_fence.wait(fence, ANSWER_S, True) == sync_fence.ERROR  # signalled after the reply
