"""Attacks on a real driver process through its socket (issue 16, transport and process bugs).

Each test speaks the wire protocol directly, as a hostile client would, and the harness then
checks the five promises: alive, a correct request answered within 5 s, peak RSS under 500 MB,
no more fds than before, no traceback on stderr.
"""
import fcntl
import os
import select
import socket
import struct
import tempfile
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from nnscope.runtime.drivers.ipc.service._serve import STUCK_S
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.wire.execution_codec import HEAD_FREE, KIND_NEW_SHM, NEW_KIND
from nnscope.runtime.drivers.ipc.wire.protocol import FLAG_BULK, REPLY, MsgType, pack_header
from nnscope.runtime.hal.shared_memory import SharedPool
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.drivers._hal import add_model
from tests.support.driver_attack import (AttackedDriver, exchange, execute_add, ping, prepare_add,
                                         prepare_payload, read_reply, record, result_of, send)

INVALID = ErrorStatus.INVALID_ARGUMENT
EXHAUSTED = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
POOL_BYTES = 4096


@pytest.fixture
def driver():
    with AttackedDriver() as attacked:
        yield attacked


def _shared_request(pool) -> Request:
    """ADD of two [4] float32 inputs at bytes 0 and 16 of ``pool``, output at byte 32."""
    arg = lambda offset: RequestArgument(pool_index=0, offset=offset, length=16)  # noqa: E731
    return Request((arg(0), arg(16)), (arg(32),), (pool,))


def _execute_payload(model_id: int, fd: int, cache: PoolCache):
    """(payload, fds) of an execute whose one pool is ``fd`` (a pool id once ``cache`` sent it)."""
    pools = cache.__dict__.setdefault("attack_pools", {})
    pool = pools.setdefault(fd, SimpleNamespace(fd=fd, offset=0, size=POOL_BYTES, sealed=True))
    payload, fds, _, _ = encode_execute(model_id, _shared_request(pool), False, None, cache, [])
    return payload, fds


def _execute_with_fd(sock, model_id: int, fd: int, cache: PoolCache | None = None,
                     renew: bool = False):
    """An execute with pool ``fd``; ``renew``: announce it as a new pool every time."""
    cache = cache or PoolCache()
    reply = exchange(sock, MsgType.EXECUTE_SYNC, *_execute_payload(model_id, fd, cache))
    if renew:
        cache.__dict__["attack_pools"].pop(fd)
    return reply


def _unsealed_memfd(size: int = POOL_BYTES, allow_sealing: bool = False) -> int:
    fd = os.memfd_create("attack", os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if allow_sealing else 0))
    os.ftruncate(fd, size)
    return fd


# ---------------------------------------------------------------- bug 1: pools that shrink
@pytest.mark.parametrize("kind", ["memfd", "sealable-memfd", "file"])
def test_pool_that_can_shrink_is_refused(driver, kind):
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        if kind == "file":
            fd = attacker.own(os.open(tempfile.mkdtemp(prefix="nnscope-attack-"), os.O_TMPFILE | os.O_RDWR))
            os.ftruncate(fd, POOL_BYTES)
        else:
            fd = attacker.own(_unsealed_memfd(allow_sealing=kind == "sealable-memfd"))
        cache = PoolCache()
        reply = _execute_with_fd(sock, model_id, fd, cache)
        with_pool_id, no_fds = _execute_payload(model_id, fd, cache)
        assert not no_fds
        try:
            os.ftruncate(fd, 0)  # the attack: shrink the pool under the driver
        except PermissionError:
            pass  # sealed by the driver: cannot shrink any more
        again = exchange(sock, MsgType.EXECUTE_SYNC, with_pool_id)  # touches the mapped pool
        assert reply.status == INVALID, reply
        assert again.status == INVALID, again  # the pool id was never mapped


def test_constant_values_that_can_shrink_are_refused(driver):
    model = add_model((2048,))  # zero-filled constants are small: make the values blob large
    model = type(model)(model.main, model.referenced, bytes(8192), model.pools,
                        model.relax_float32_to_float16)
    payload, fds, keep = prepare_payload(model)
    with driver.attack() as attacker:
        sock = attacker.connect()
        fd = attacker.own(_unsealed_memfd(8192))
        reply = exchange(sock, MsgType.PREPARE_MODEL, payload, [fd])
        os.ftruncate(fd, 0)
        ping(sock)
        assert reply.status == INVALID, reply
    for pool in keep:
        pool.close()


def test_bulk_payload_that_can_shrink_is_refused(driver):
    size = 32 << 20
    with driver.attack() as attacker:
        sock = attacker.connect()
        fd = attacker.own(_unsealed_memfd(size))
        stop = threading.Event()

        def flip():  # shrink and regrow while the driver copies
            while not stop.is_set():
                os.ftruncate(fd, 4096)
                os.ftruncate(fd, size)

        flipper = threading.Thread(target=flip)
        flipper.start()
        try:
            statuses = set()
            for i in range(5):
                send(sock, pack_header(MsgType.PING, i, size, FLAG_BULK), [fd])
                statuses.add(read_reply(sock, 10.0).status)
        finally:
            stop.set()
            flipper.join()
        assert statuses == {INVALID}


def test_our_own_pools_are_sealed_and_accepted(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        with SharedPool(POOL_BYTES) as pool:
            np.frombuffer(pool.view, np.float32)[:8] = 1.5
            result, _ = result_of(_execute_with_fd(sock, model_id, pool.fd))
            assert result.status == ErrorStatus.NONE
            assert np.frombuffer(pool.view, np.float32)[8:12].tolist() == [3.0] * 4
            with pytest.raises(PermissionError):
                os.ftruncate(pool.fd, 0)


# ---------------------------------------------------------------- bug 2: fds with an empty record
def test_fds_sent_with_an_empty_record_are_closed(driver):
    with driver.attack() as attacker:
        with SharedPool(64) as pool:
            for _ in range(10):
                sock = attacker.connect()
                socket.send_fds(sock, [b""], [pool.fd] * 10)
                with pytest.raises((EOFError, ConnectionError)):
                    read_reply(sock)


# ---------------------------------------------------------------- bug 3: fd table
def test_pool_flood_gets_resource_exhausted_and_accept_survives_a_full_fd_table():
    with AttackedDriver(max_fds=200) as driver:
        with driver.attack() as attacker:
            statuses = []
            flooder = attacker.connect()
            model_id = prepare_add(flooder)
            cache = PoolCache(capacity=1 << 20)  # never frees: announces new pools forever
            with SharedPool(POOL_BYTES) as pool:
                for _ in range(300):  # more pools than the fd table holds
                    status = _execute_with_fd(flooder, model_id, pool.fd, cache, renew=True).status
                    statuses.append(status)
                    if status == EXHAUSTED:
                        break
            assert statuses[-1] == EXHAUSTED and set(statuses) == {0, EXHAUSTED}
            for _ in range(250):  # then more connections than the fd table holds
                try:
                    attacker.connect(1.0)
                except OSError:
                    break
            ping(flooder)  # the flooder's own connection is still served
        # the flooder gone, its pools are unmapped: new clients are served again


def test_per_connection_pool_limit(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        cache = PoolCache(capacity=1 << 20)  # never frees: announces new pools forever
        statuses = []
        with SharedPool(POOL_BYTES) as pool:
            for _ in range(2000):
                statuses.append(_execute_with_fd(sock, model_id, pool.fd, cache, renew=True).status)
                if statuses[-1] != 0:
                    break
        assert statuses[-1] == EXHAUSTED and len(statuses) > 100


# ---------------------------------------------------------------- bug 4: NOTIFY after a rejected launch
def test_rejected_async_launch_sends_no_notify(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        for unknown in (model_id + 1000, model_id):
            if unknown == model_id:
                assert exchange(sock, MsgType.RELEASE_MODEL, struct.pack("<I", model_id)).status == 0
            launch = exchange(sock, MsgType.EXECUTE, _add_payload(unknown), request_id=77)
            assert (launch.type, launch.request_id, launch.status) == (REPLY | MsgType.EXECUTE, 77, INVALID)
            next_record = exchange(sock, MsgType.PING, b"x", request_id=78)
            assert (next_record.type, next_record.request_id) == (REPLY | MsgType.PING, 78)


def _add_payload(model_id: int) -> bytes:
    from tests.support.driver_attack import execute_add_payload

    return execute_add_payload(model_id)


# ---------------------------------------------------------------- bug 5: a client that never reads
def test_client_that_never_reads_does_not_stall_others(driver):
    with driver.attack() as attacker:
        stuck = attacker.connect()
        stuck.settimeout(0.5)
        big = record(MsgType.PING, 1, bytes(30000))
        for _ in range(10_000):  # flood requests, never read a reply, until the driver takes no more
            try:
                stuck.send(big)
            except socket.timeout:
                break
        else:
            raise AssertionError("the driver kept reading a client that reads nothing")
        other = attacker.connect()
        model_id = prepare_add(other)
        hangup = select.poll()
        hangup.register(stuck, select.POLLRDHUP)
        for i in range(5):
            result, _ = result_of(execute_add(other, model_id, float(i)))
            assert result.status == ErrorStatus.NONE
        # served while the stuck peer was still held, not once it was dropped (after STUCK_S):
        # the driver has not hung up on it yet
        assert hangup.poll(0) == [], "the others were served only once the stuck client was dropped"
        # the stuck peer is dropped after STUCK_S (seen as a hang-up, its replies still unread;
        # the wait is only a bound); draining its socket then ends in end-of-stream
        assert hangup.poll(6 * STUCK_S * 1000), "the stuck client was never dropped"
        stuck.setblocking(True)
        stuck.settimeout(6 * STUCK_S)
        try:
            while stuck.recv(1 << 17):
                pass
        except ConnectionResetError:
            pass  # dropped with requests it sent still unread


# ---------------------------------------------------------------- smaller points
def test_same_pool_id_twice_in_one_request_is_invalid(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        with SharedPool(POOL_BYTES) as pool:
            entry = NEW_KIND.pack(KIND_NEW_SHM, 5, 0, POOL_BYTES)
            args = struct.pack("<H", 2) + b"".join(struct.pack("<BHIII", 0, 0, o, 16, 0) for o in (0, 16)) \
                + struct.pack("<H", 1) + struct.pack("<BHIII", 0, 1, 32, 16, 0)
            payload = HEAD_FREE.pack(model_id, 0, 0, -1, 0) + struct.pack("<H", 2) + entry + entry + args
            reply = exchange(sock, MsgType.EXECUTE_SYNC, payload, [pool.fd, pool.fd])
        assert reply.status == INVALID, reply


def test_burst_of_connects_is_accepted(driver):
    with driver.attack() as attacker:
        socks = []
        for _ in range(60):  # a burst from one process (a quarter of the connection slots)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            attacker.sockets.append(sock)
            sock.setblocking(False)
            sock.connect(driver.socket_path)  # refused (EAGAIN) when the backlog is full
            socks.append(sock)
        for sock in socks:
            sock.setblocking(True)
            ping(sock)


@pytest.mark.parametrize("shape", [(2**32 - 1, 3), (1,) * 65536, (2**31, 2**31)])
def test_prepare_with_overflowing_dimensions_is_invalid(driver, shape):
    with driver.attack() as attacker:
        sock = attacker.connect()
        payload, fds, keep = prepare_payload(add_model(shape))
        assert not fds
        reply = exchange(sock, MsgType.PREPARE_MODEL, payload, timeout=5.0)
        assert reply.status == INVALID, reply
        ping(sock)
