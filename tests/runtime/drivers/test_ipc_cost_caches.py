"""Issue 16, bug 7: a connection's decode caches are bounded by bytes, not entries.

Before the fix the execute decoder kept 64 argument sections (whole, as keys), 64 inline pool
buffers of any size and 64 memos per connection: three 64 MiB requests for a model that does
not exist grew the driver from 31 MB to 799 MB, kept while the connection lived. The attacks
here speak the socket protocol directly to a real ``sample-all`` process.
"""
from __future__ import annotations

import struct

import numpy as np

from nnscope.runtime.drivers.ipc.wire.codec import Reader
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.service.execute import ARGS_ENTRY_BYTES, DecodeState, decode_execute
from nnscope.runtime.drivers.ipc.wire.execution_codec import HEAD_FREE, INLINE, KIND_INLINE, MAX_INLINE_BYTES
from nnscope.runtime.drivers.ipc.wire.protocol import MAX_PAYLOAD, REPLY, MsgType
from nnscope.runtime.hal.device_types import Request, RequestArgument
from tests.support.driver_attack import AttackedDriver, exchange, ping, read_reply, record, send

INVALID = 4  # ErrorStatus.INVALID_ARGUMENT
UNKNOWN_MODEL = 999_999
_ARG_RANK32 = struct.Struct("<BHII")


def execute_payload(inline_size: int, memo_id: int = 0, args: int = 0, model_id: int = UNKNOWN_MODEL) -> bytes:
    """An EXECUTE_SYNC payload: one inline pool of ``inline_size`` bytes, ``args`` inputs of
    rank 32 (about 145 bytes each) and no outputs."""
    head = HEAD_FREE.pack(model_id, memo_id, 0, -1, 0)
    pools = struct.pack("<H", 1) + INLINE.pack(KIND_INLINE, inline_size) + bytes(inline_size)
    argument = _ARG_RANK32.pack(0, 0, 0, 0) + struct.pack("<I32I", 32, *range(1000, 1032))
    return head + pools + struct.pack("<H", args) + argument * args + struct.pack("<H", 0)


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_three_64_mib_requests_for_an_unknown_model_leave_nothing_behind():
    with AttackedDriver() as driver:
        before = rss_kb(driver.pid)
        with driver.attack() as attacker:
            sock = attacker.connect()
            for number in range(3):
                size = MAX_PAYLOAD - 64 - number
                reply = exchange(sock, MsgType.EXECUTE_SYNC, execute_payload(size, memo_id=number + 1),
                                 request_id=number + 1, timeout=60.0)
                assert (reply.type, reply.status) == (REPLY | MsgType.EXECUTE_SYNC, INVALID), reply
            ping(sock)  # the serve loop has left the last request's frame (its payload) behind
            kept_mb = (rss_kb(driver.pid) - before) / 1024
            assert kept_mb < 48, f"the driver keeps {kept_mb:.0f} MB for one connection"


def test_many_distinct_requests_on_many_connections_keep_a_bounded_cache():
    """8 connections x 80 requests, each with its own inline size (~100 KB), memo id and 150 KB
    argument section: before, each connection kept over 20 MB; now the caches stay under their
    byte budget."""
    with AttackedDriver() as driver:
        before = rss_kb(driver.pid)
        with driver.attack() as attacker:
            socks = [attacker.connect() for _ in range(8)]
            for number in range(80):
                for index, sock in enumerate(socks):
                    payload = execute_payload(100_000 + number * 8 + index, memo_id=number + 1, args=1000)
                    reply = exchange(sock, MsgType.EXECUTE_SYNC, payload, request_id=number + 1, timeout=30.0)
                    assert reply.status == INVALID and b"unknown prepared model" in reply.body, reply
            kept_mb = (rss_kb(driver.pid) - before) / 1024
            assert kept_mb < 24, f"8 connections keep {kept_mb:.0f} MB"


def test_inline_bytes_beyond_the_limit_are_refused_before_copying():
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            reply = exchange(sock, MsgType.EXECUTE_SYNC, execute_payload(MAX_INLINE_BYTES + 1), timeout=30.0)
            assert reply.status == INVALID and b"shared memory" in reply.body, reply
            # a rank beyond any operation's is refused before its dimensions are read
            head = HEAD_FREE.pack(UNKNOWN_MODEL, 0, 0, -1, 0) + struct.pack("<H", 0)
            huge = head + struct.pack("<H", 1) + _ARG_RANK32.pack(0, 0, 0, 0) + struct.pack("<I", 1 << 20) \
                + bytes(4 << 20) + struct.pack("<H", 0)
            send(sock, record(MsgType.EXECUTE_SYNC, 7, huge))
            reply = read_reply(sock, 30.0)
            assert reply.status == INVALID and b"dimensions" in reply.body, reply


def test_decode_state_accounting_in_process():
    """Byte accounting of the three caches; a request too large to cache is decoded afresh; a
    memo of the largest inline request still fits its budget."""
    state = DecodeState()
    for number in range(200):
        decode_execute(Reader(execute_payload(4_000 + number, memo_id=number + 1, args=20)), state, [])
        assert state.cached_bytes() <= 512 * 1024
    assert len(state.memos) > 10  # still useful: the recent memos are kept
    big = execute_payload(100_000, args=ARGS_ENTRY_BYTES // 100)
    first = decode_execute(Reader(big), state, [])
    again = decode_execute(Reader(big), state, [])
    assert first.request is not again.request and state.last[2] is None
    largest = decode_execute(Reader(execute_payload(MAX_INLINE_BYTES, memo_id=7, args=50)), state, [])
    assert state.memos.get(7).request is largest.request
    small = execute_payload(100, args=2)
    assert decode_execute(Reader(small), state, []).request is decode_execute(Reader(small), state, []).request


def test_the_encoder_stages_inline_pools_beyond_the_drivers_inline_limit():
    pools = tuple(bytearray(4096) for _ in range(MAX_INLINE_BYTES // 4096 + 3))
    request = Request(tuple(RequestArgument(pool_index=i, offset=0, length=4096) for i in range(len(pools))),
                      (), pools)
    staging: list = []
    payload, fds, inline, staged = encode_execute(1, request, False, None, PoolCache(), staging)
    try:
        assert len(inline) == MAX_INLINE_BYTES // 4096 and len(staged) == 3 and len(fds) == 3
        assert len(payload) < MAX_INLINE_BYTES + 8192
    finally:
        for pool in staging:
            if pool is not None:
                pool.close()


def test_the_pool_cache_is_bounded_by_bytes():
    class Pool:
        def __init__(self, size):
            self.fd, self.offset, self.size = 3, 0, size

    cache = PoolCache(capacity=100, byte_capacity=10 << 20)
    pools = [Pool(4 << 20) for _ in range(5)]
    ids = [cache.lookup(pool)[0] for pool in pools]
    assert cache.bytes <= 10 << 20 and cache.pending_free == ids[:3]
    assert np.array_equal([cache.lookup(pool)[1] for pool in pools[3:]], [False, False])
