"""A driver never refuses in silence: a record it cannot take (here one carrying more fds than a
record may) is answered as a reply to that request, with INVALID_ARGUMENT; and the runtime never
sends such a record (it refuses it before the socket, with the same code)."""
from __future__ import annotations

import os

import pytest

from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.wire.protocol import MAX_FDS, REPLY, MsgType
from nnscope.runtime.hal.shared_memory import SharedPool
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from tests.support.driver_attack import AttackedDriver, exchange, ping


def test_a_record_with_too_many_fds_gets_an_error_reply_to_its_request():
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            fds = [attacker.own(os.open("/dev/null", os.O_RDONLY)) for _ in range(MAX_FDS + 16)]
            reply = exchange(sock, MsgType.EXECUTE_SYNC, b"\0" * 16, fds, request_id=77)
            assert (reply.type, reply.request_id, reply.status) == \
                (REPLY | MsgType.EXECUTE_SYNC, 77, ErrorStatus.INVALID_ARGUMENT)
            assert b"file descriptors" in reply.body
            ping(sock)


def test_the_runtime_refuses_to_send_more_fds_than_a_record_carries():
    device = RemoteDevice("sample-minimal")
    pools = [SharedPool(8) for _ in range(MAX_FDS)]
    try:
        device.launch(wait=True)
        with pytest.raises(HalError) as error:
            device.transact(MsgType.PING, b"x", [pool.fd for pool in pools])
        assert error.value.status == ErrorStatus.INVALID_ARGUMENT
        assert bytes(device.transact(MsgType.PING, b"still here").payload)[4:] == b"still here"
    finally:
        for pool in pools:
            pool.close()
        device.shutdown()
