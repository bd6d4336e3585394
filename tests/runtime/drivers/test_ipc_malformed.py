"""A real driver process fed malformed and random records answers INVALID_ARGUMENT, never
crashes, hangs or reads outside a pool, and keeps serving correct requests afterwards."""
import os
import socket
import struct

import numpy as np
import pytest

from nnscope.runtime.drivers.ipc import SharedPool
from nnscope.runtime.drivers.ipc.client.device import model_payload
from nnscope.runtime.drivers.ipc.wire.codec import Reader
from nnscope.runtime.drivers.ipc.client.encoder import EncodeMemo, PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.wire.execution_codec import MEMO_HEAD, decode_result
from nnscope.runtime.drivers.ipc.wire.protocol import FLAG_BULK, HEADER, MAGIC, REPLY, VERSION, MsgType, pack_header
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.drivers._hal import add_model, make_request

INVALID = ErrorStatus.INVALID_ARGUMENT
TIMEOUT_S = 10.0


@pytest.fixture(scope="module")
def driver(sample_all):
    """(device, prepared ADD model id) on a running sample-all driver."""
    prepared = sample_all.prepare_model(add_model((4,)))
    return sample_all, prepared


@pytest.fixture
def raw(driver):
    """A second, raw connection to the same driver process."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(TIMEOUT_S)
    sock.connect(driver[0].process.socket_path)
    yield sock
    sock.close()


def send_record(sock, record: bytes, fds=()):
    if fds:
        socket.send_fds(sock, [record], list(fds))
    else:
        sock.send(record)


def reply(sock):
    """(type, request id, status, rest) of the next record from the driver."""
    data = sock.recv(1 << 17)
    assert len(data) >= HEADER.size + 4, data
    magic, version, _, msg_type, request_id, length = HEADER.unpack_from(data)
    assert (magic, version, length) == (MAGIC, VERSION, len(data) - HEADER.size)
    (status,) = struct.unpack_from("<I", data, HEADER.size)
    return msg_type, request_id, status, data[HEADER.size + 4:]


def exchange(sock, record: bytes, fds=()):
    send_record(sock, record, fds)
    return reply(sock)


def ping_ok(sock):
    msg_type, request_id, status, rest = exchange(sock, pack_header(MsgType.PING, 4242, 3) + b"abc")
    assert (msg_type, request_id, status, rest) == (REPLY | MsgType.PING, 4242, 0, b"abc")


def execute_record(prepared, request, request_id=9, pools=None, fds_out=None):
    payload, fds, _, _ = encode_execute(prepared.model_id, request, False, None, pools or PoolCache(), [])
    if fds_out is not None:
        fds_out.extend(fds)
    return pack_header(MsgType.EXECUTE_SYNC, request_id, len(payload)) + payload


def good_execute(sock, prepared):
    request, _, (out,) = make_request(prepared.model, [np.full(4, 2, np.float32)] * 2)
    _, _, status, rest = exchange(sock, execute_record(prepared, request))
    assert status == 0
    result, inline = decode_result(Reader(rest))
    assert result.status == ErrorStatus.NONE
    assert np.frombuffer(inline[0][1], np.float32).tolist() == [4.0] * 4


@pytest.mark.parametrize("record", [
    struct.pack("<IBBHII", 0xDEADBEEF, VERSION, 0, MsgType.PING, 1, 0),                  # bad magic
    struct.pack("<IBBHII", MAGIC, VERSION + 7, 0, MsgType.PING, 1, 0),                    # bad version
    struct.pack("<IBBHII", MAGIC, VERSION, 0x80, MsgType.PING, 1, 0),                     # unknown flag
    struct.pack("<IBBHII", MAGIC, VERSION, 0, MsgType.PING, 1, 0xFFFFFFFF),               # huge length
    struct.pack("<IBBHII", MAGIC, VERSION, 0, MsgType.PING, 1, 100) + b"short",           # truncated
    struct.pack("<IBBHII", MAGIC, VERSION, 0, MsgType.PING, 1, 0) + b"extra",             # too long
    b"NNIP\x01",                                                                          # < header
    pack_header(999, 1, 0),                                                               # unknown type
    pack_header(REPLY | MsgType.GET_TYPE, 1, 4) + bytes(4),                               # a reply
    pack_header(MsgType.NOTIFY, 1, 0),                                                    # a callback
    pack_header(MsgType.GET_CAPABILITIES, 1, 3) + b"xyz",                                 # payload where none
    pack_header(MsgType.PING, 1, 0, FLAG_BULK),                                           # bulk, no fd
    pack_header(MsgType.RELEASE_MODEL, 1, 2) + b"\x01\x00",                               # short u32
])
def test_malformed_framing_is_invalid_argument(raw, driver, record):
    _, _, status, _ = exchange(raw, record)
    assert status == INVALID
    ping_ok(raw)
    good_execute(raw, driver[1])


def test_bulk_payload_fd_shorter_than_length(raw):
    with SharedPool(8) as pool:
        status = exchange(raw, pack_header(MsgType.PING, 3, 1 << 30, FLAG_BULK), [pool.fd])[2]
    assert status == INVALID
    ping_ok(raw)


def test_too_many_fds_are_refused_and_closed(raw, driver):
    ping_ok(raw)  # the driver has accepted this connection (its fd is counted)
    with SharedPool(8) as pool:
        before = _fd_count(driver[0].pid)
        fds = [os.dup(pool.fd) for _ in range(80)]
        try:
            assert exchange(raw, pack_header(MsgType.PING, 5, 0), fds)[2] == INVALID
        finally:
            for fd in fds:
                os.close(fd)
    ping_ok(raw)
    assert _fd_count(driver[0].pid) <= before


def test_every_prefix_of_a_prepare_is_rejected(raw, driver):
    payload, fds, keep = model_payload(add_model((4,)))
    head = struct.pack("<BBq", 1, 100, -1) + struct.pack("<I", 0) + struct.pack("<I", 0)
    full = head + payload
    assert exchange(raw, pack_header(MsgType.PREPARE_MODEL, 1, len(full)) + full)[2] == 0
    for cut in range(len(full)):
        record = pack_header(MsgType.PREPARE_MODEL, 2, cut) + full[:cut]
        assert exchange(raw, record)[2] == INVALID, cut
        if cut < len(payload):
            record = pack_header(MsgType.GET_SUPPORTED_OPERATIONS, 2, cut) + payload[:cut]
            assert exchange(raw, record)[2] == INVALID, cut
    good_execute(raw, driver[1])


@pytest.mark.parametrize("deadline", [-2, -(1 << 63)])
def test_a_negative_deadline_other_than_none_is_invalid(raw, driver, deadline):
    """-1 is "no deadline" on the wire; any other negative value is malformed, in an execute, a
    repeat of a memo and a prepare alike (a fenced launch: test_fenced_hostile)."""
    prepared = driver[1]
    request, _, _ = make_request(prepared.model, [np.full(4, 2, np.float32)] * 2)
    payload, _, _, _ = encode_execute(prepared.model_id, request, False, deadline, PoolCache(), [])
    assert exchange(raw, pack_header(MsgType.EXECUTE_SYNC, 1, len(payload)) + payload)[2] == INVALID
    pools, memo = PoolCache(), EncodeMemo()
    payload, _, _, _ = encode_execute(prepared.model_id, request, False, None, pools, [], memo)
    assert memo.memo_id and exchange(raw, pack_header(MsgType.EXECUTE_SYNC, 2, len(payload)) + payload)[2] == 0
    repeat = memo.repeat(request, MEMO_HEAD.pack(prepared.model_id, memo.memo_id, 0, deadline), pools)
    assert exchange(raw, pack_header(MsgType.EXECUTE_SYNC_MEMO, 3, len(repeat)) + repeat)[2] == INVALID
    repeat = memo.repeat(request, MEMO_HEAD.pack(prepared.model_id, memo.memo_id, 0, -1), pools)
    assert exchange(raw, pack_header(MsgType.EXECUTE_SYNC_MEMO, 4, len(repeat)) + repeat)[2] == 0
    model, _, _ = model_payload(add_model((4,)))
    prepare = struct.pack("<BBq", 1, 100, deadline) + struct.pack("<I", 0) + struct.pack("<I", 0) + model
    assert exchange(raw, pack_header(MsgType.PREPARE_MODEL, 5, len(prepare)) + prepare)[2] == INVALID
    good_execute(raw, prepared)


def test_out_of_bounds_pool_regions(raw, driver):
    prepared = driver[1]
    model = prepared.model
    with SharedPool(64) as pool:
        request, _, _ = make_request(model, [np.ones(4, np.float32)] * 2, shared=True)
        for offset, size in ((0, 4096), (1 << 40, 16), (60, 16)):  # regions outside the 64-byte file
            fake = type(pool).__new__(type(pool))
            fake.fd, fake.offset, fake.size = pool.fd, offset, size
            bad = request.__class__(request.inputs, request.outputs, (fake,))
            fds = []
            record = execute_record(prepared, bad, fds_out=fds)
            assert exchange(raw, record, fds)[2] == INVALID
        for arg_offset in (60, 1 << 31, 0xFFFFFFFF):  # arguments outside a valid 64-byte pool
            region = request.inputs[0].__class__(pool_index=0, offset=arg_offset, length=16)
            bad = request.__class__((region, region), request.outputs, (pool,))
            fds = []
            _, _, status, rest = exchange(raw, execute_record(prepared, bad, fds_out=fds), fds)
            assert status == 0 and decode_result(Reader(rest))[0].status == INVALID
        request.pools[0].close()
    # an execute announcing a new shared pool but sending no fd, and one naming an unknown pool id
    request, _, _ = make_request(model, [np.ones(4, np.float32)] * 2, shared=True)
    assert exchange(raw, execute_record(prepared, request))[2] == INVALID
    cache = PoolCache()
    cache._next = 10_000  # an id this connection never announced
    cache.lookup(request.pools[0])
    assert exchange(raw, execute_record(prepared, request, pools=cache))[2] == INVALID
    request.pools[0].close()
    good_execute(raw, driver[1])


def test_random_records_and_bit_flips(raw, driver):
    rng = np.random.default_rng(20240611)
    prepared = driver[1]
    request, _, _ = make_request(prepared.model, [np.ones(4, np.float32)] * 2)
    valid = execute_record(prepared, request)
    allowed = {0, INVALID}
    for i in range(300):
        kind = i % 3
        if kind == 0:  # random bytes
            record = rng.integers(0, 256, int(rng.integers(1, 200)), dtype=np.uint8).tobytes()
        elif kind == 1:  # valid header, random type and payload (never SHUTDOWN)
            body = rng.integers(0, 256, int(rng.integers(0, 120)), dtype=np.uint8).tobytes()
            msg_type = int(rng.choice([t for t in MsgType if t != MsgType.SHUTDOWN] + [77, 0x8001]))
            record = pack_header(msg_type, i, len(body)) + body
        else:  # a real execute with a few flipped bytes in its payload
            data = bytearray(valid)
            for position in rng.integers(HEADER.size, len(data), int(rng.integers(1, 4))):
                data[position] ^= int(rng.integers(1, 256))
            record = bytes(data)
        msg_type, _, status, rest = exchange(raw, record)
        if msg_type == REPLY | MsgType.EXECUTE and status == 0:  # async launch: its callback follows
            assert reply(raw)[0] == MsgType.NOTIFY
        assert status in allowed, (i, status, rest)
    ping_ok(raw)
    good_execute(raw, prepared)


def test_driver_survives_and_the_runtime_connection_still_works(raw, driver):
    device, prepared = driver
    for i in range(50):
        send_record(raw, bytes([i]) * (i + 1))
        reply(raw)
    raw.close()  # abrupt close with nothing pending
    request, _, (out,) = make_request(prepared.model, [np.full(4, 3, np.float32)] * 2)
    assert prepared.execute(request).status == ErrorStatus.NONE
    assert out.tolist() == [6.0] * 4
    assert device.process.alive()


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))
