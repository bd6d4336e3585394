"""Malformed memory-domain requests sent straight to a real driver process (IDevice.allocate,
IBuffer copyTo/copyFrom/release, executions naming buffers by token): each gets
INVALID_ARGUMENT (GENERAL_FAILURE for reading an uninitialised buffer, as VTS expects), another
client process cannot use a client's token, and the driver keeps serving correct requests."""
from __future__ import annotations

import math
import os
import struct

import numpy as np
import pytest

from nnscope.runtime.drivers.ipc import SharedPool
from nnscope.runtime.drivers.ipc.client.buffer import RemoteBuffer, allocate
from nnscope.runtime.drivers.ipc.wire.codec import Writer
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.drivers._hal import add_model, make_request
from tests.support.driver_attack import from_other_process

INVALID = ErrorStatus.INVALID_ARGUMENT
SIZE = 16  # four float32


@pytest.fixture(scope="module")
def driver(sample_all):
    """(device, a prepared ``a + b`` on float32[4], another one)."""
    return sample_all, sample_all.prepare_model(add_model((4,))), sample_all.prepare_model(add_model((4,)))


def status_of(device, msg_type, payload, fds=()) -> int:
    message = device.transact(msg_type, payload, fds)
    assert message.type == REPLY | msg_type
    return struct.unpack_from("<I", message.payload)[0]


def allocate_payload(dims, model_ids, inputs=(), outputs=()) -> bytes:
    w = Writer()
    w.u32s(dims)
    w.u32s(model_ids)
    for roles in (inputs, outputs):
        w.u32(len(roles))
        for position, index, frequency in roles:
            w.parts.append(struct.pack("<IId", position, index, frequency))
    return w.getvalue()


def region_payload(token, size=SIZE, offset=0, dims=None) -> bytes:
    tail = b"" if dims is None else struct.pack(f"<I{len(dims)}I", len(dims), *dims)
    return struct.pack("<IQQ", token, offset, size) + tail


ALLOCATE_CASES = {
    "truncated": lambda m: b"\x01",
    "no roles": lambda m: allocate_payload([4], [m]),
    "unknown model": lambda m: allocate_payload([4], [999_999], [(0, 0, 1.0)]),
    "model position past the list": lambda m: allocate_payload([4], [m], [(1, 0, 1.0)]),
    "input index out of range": lambda m: allocate_payload([4], [m], [(0, 2, 1.0)]),
    "output index out of range": lambda m: allocate_payload([4], [m], (), [(0, 1, 1.0)]),
    "frequency 0": lambda m: allocate_payload([4], [m], [(0, 0, 0.0)]),
    "frequency above 1": lambda m: allocate_payload([4], [m], [(0, 0, 1.5)]),
    "NaN frequency": lambda m: allocate_payload([4], [m], [(0, 0, math.nan)]),
    "same role twice": lambda m: allocate_payload([4], [m], [(0, 0, 1.0), (0, 0, 0.5)]),
    "conflicting dimensions": lambda m: allocate_payload([5], [m], [(0, 0, 1.0)]),
    "wrong rank": lambda m: allocate_payload([4, 1], [m], [(0, 0, 1.0)]),
    "a billion roles": lambda m: allocate_payload([4], [m]) [:-8] + struct.pack("<I", 10**9),
    "rank 33": lambda m: allocate_payload([1] * 33, [m], [(0, 0, 1.0)]),
    "too many models": lambda m: allocate_payload([4], [m] * 257, [(0, 0, 1.0)]),
    "trailing bytes": lambda m: allocate_payload([4], [m], [(0, 0, 1.0)]) + b"\0",
}


@pytest.mark.parametrize("case", ALLOCATE_CASES)
def test_malformed_allocate_is_invalid_argument(case, driver):
    device, prepared, _ = driver
    assert status_of(device, MsgType.ALLOCATE, ALLOCATE_CASES[case](prepared.model_id)) == INVALID
    _still_serves(driver)


def test_allocate_refuses_fds_and_unknown_dimensions(driver, sample_all):
    device, prepared, _ = driver
    with SharedPool(SIZE) as pool:
        payload = allocate_payload([4], [prepared.model_id], [(0, 0, 1.0)])
        assert status_of(device, MsgType.ALLOCATE, payload, [pool.fd]) == INVALID
    dynamic = device.prepare_model(add_model((0,)))
    assert status_of(device, MsgType.ALLOCATE,
                     allocate_payload([], [dynamic.model_id], [(0, 0, 1.0)])) == INVALID
    dynamic.release()
    _still_serves(driver)


def _buffer(driver) -> RemoteBuffer:
    device, prepared, _ = driver
    return allocate(device, (4,), [(prepared, "output", 0, 1.0), (prepared, "input", 1, 0.5)])


def test_malformed_copies_are_invalid_argument(driver):
    device, _, _ = driver
    buffer = _buffer(driver)
    plain = os.memfd_create("unsealed")  # can shrink: the driver must not map it
    os.ftruncate(plain, SIZE)
    try:
        with SharedPool(SIZE) as pool, SharedPool(2 * SIZE) as big:
            token = buffer.token
            assert status_of(device, MsgType.BUFFER_COPY_TO, region_payload(token), [pool.fd]) \
                == ErrorStatus.GENERAL_FAILURE  # never written
            for msg_type, payload, fds in (
                    (MsgType.BUFFER_COPY_TO, region_payload(token + 1000), [pool.fd]),  # unknown token
                    (MsgType.BUFFER_COPY_TO, region_payload(token, SIZE + 4), [big.fd]),  # wrong size
                    (MsgType.BUFFER_COPY_TO, region_payload(token), []),  # no memory
                    (MsgType.BUFFER_COPY_TO, region_payload(token), [pool.fd, big.fd]),  # two
                    (MsgType.BUFFER_COPY_TO, region_payload(token), [plain]),  # not sealed
                    (MsgType.BUFFER_COPY_TO, region_payload(token, offset=SIZE * 2), [big.fd]),  # past end
                    (MsgType.BUFFER_COPY_TO, region_payload(token)[:-3], [pool.fd]),  # truncated
                    (MsgType.BUFFER_COPY_FROM, region_payload(token, dims=[5]), [pool.fd]),
                    (MsgType.BUFFER_COPY_FROM, region_payload(token, dims=[2, 2]), [pool.fd]),
                    (MsgType.BUFFER_COPY_FROM, region_payload(token + 1000, dims=[4]), [pool.fd]),
                    (MsgType.BUFFER_FREE, struct.pack("<I", token + 1000), []),
                    (MsgType.BUFFER_FREE, b"\0", [])):
                assert status_of(device, msg_type, payload, fds) == INVALID, (msg_type, payload)
            data = np.float32([1, -2, 3.5, 4])
            pool.view[:] = data.tobytes()
            buffer.copy_from(pool, (4,))
            pool.view[:] = bytes(SIZE)
            buffer.copy_to(pool)
            assert np.frombuffer(pool.view, np.float32).tolist() == data.tolist()
            assert status_of(device, MsgType.BUFFER_COPY_FROM, region_payload(token, dims=[7]), [pool.fd]) \
                == INVALID
            with pytest.raises(HalError) as caught:  # the failed copyFrom left it uninitialised
                buffer.copy_to(pool)
            assert caught.value.status == ErrorStatus.GENERAL_FAILURE
    finally:
        os.close(plain)
    buffer.release()
    assert status_of(device, MsgType.BUFFER_FREE, struct.pack("<I", buffer.token)) == INVALID  # twice
    _still_serves(driver)


class _TokenPool:
    """A request pool that names a driver buffer (what a DeviceMemory is to the encoder)."""

    def __init__(self, token: int):
        self.ibuffer_token = token


def _execute_status(device, model_id, token, output_length=SIZE, token_input=True) -> int:
    data = np.float32([1, 2, 3, 4]).tobytes()
    args = [RequestArgument(False, 1, 0, SIZE, (4,))] * 2
    out = RequestArgument(False, 1, 0, output_length, (4,))
    if token_input:
        args[1] = RequestArgument(False, 0, 0, SIZE, (4,))
    else:
        out = RequestArgument(False, 0, 0, output_length, (4,))
    request = Request(tuple(args), (out,), (_TokenPool(token), bytearray(data)))
    payload, fds, _, _ = encode_execute(model_id, request, False, None, PoolCache(), [])
    assert not fds
    return status_of(device, MsgType.EXECUTE_SYNC, payload)


def test_executions_check_each_token(driver):
    device, prepared, other = driver
    buffer = _buffer(driver)  # roles: output 0 and input 1 of ``prepared``
    assert _execute_status(device, prepared.model_id, buffer.token + 1000) == INVALID
    assert _execute_status(device, prepared.model_id, buffer.token) == ErrorStatus.GENERAL_FAILURE  # unread
    assert _execute_status(device, other.model_id, buffer.token, token_input=False) == INVALID  # no role
    assert _execute_status(device, prepared.model_id, buffer.token, SIZE - 4, token_input=False) == INVALID
    assert _execute_status(device, prepared.model_id, buffer.token, token_input=False) == 0  # writes it
    assert _execute_status(device, prepared.model_id, buffer.token) == 0  # now it may be read
    with SharedPool(SIZE) as pool:
        buffer.copy_to(pool)
        assert np.frombuffer(pool.view, np.float32).tolist() == [2.0, 4.0, 6.0, 8.0]
    buffer.release()
    _still_serves(driver)


def test_another_process_cannot_use_a_clients_buffer(driver):
    device, prepared, _ = driver
    buffer = _buffer(driver)
    with SharedPool(SIZE) as pool:
        pool.view[:] = np.float32([4, 3, 2, 1]).tobytes()
        buffer.copy_from(pool, (4,))
        free = (MsgType.BUFFER_FREE, 1, struct.pack("<I", buffer.token))
        copy = (MsgType.BUFFER_COPY_TO, 2, region_payload(buffer.token))  # its fd cannot follow
        replies = from_other_process(device.process.socket_path, [free, copy])
        assert [(r[0], r[2]) for r in replies] == [(REPLY | MsgType.BUFFER_FREE, INVALID),
                                                  (REPLY | MsgType.BUFFER_COPY_TO, INVALID)], replies
        pool.view[:] = bytes(SIZE)
        buffer.copy_to(pool)  # still there, still its owner's
        assert np.frombuffer(pool.view, np.float32).tolist() == [4.0, 3.0, 2.0, 1.0]
    buffer.release()
    _still_serves(driver)


def _still_serves(driver):
    device, prepared, _ = driver
    model = add_model((4,))
    request, _, (out,) = make_request(model, [np.float32([1, 2, 3, 4])] * 2)
    result = prepared.execute(request)
    assert result.status == ErrorStatus.NONE and out.tolist() == [2.0, 4.0, 6.0, 8.0]
    assert device.process.alive()
