"""Attacks on a real driver process through bursts and large replies (issue 24, bugs 1-5).

Each test speaks the wire protocol directly, as a hostile client would; the harness then checks
the five promises (alive, a new client answered within 5 s, peak RSS under 500 MB, no more fds
than before, no traceback).
"""
import os
import select
import socket
import struct
import tempfile

import pytest

from nnscope.runtime.drivers.ipc.client import encoder
from nnscope.runtime.drivers.ipc.service._guard import FD_RESERVE, FdBudget
from nnscope.runtime.drivers.ipc.service._serve import MAX_UNREAD_BULK
from nnscope.runtime.drivers.ipc.wire.protocol import MAX_INLINE_PAYLOAD, MsgType
from nnscope.runtime.drivers.ipc.service.burst import BURST_FDS, MAX_BURSTS_PER_CLIENT
from nnscope.runtime.hal.types import ErrorStatus
from tests.support.driver_attack import (AttackedDriver, exchange, execute_add_payload, prepare_add,
                                         record, send)
from tests.support.driver_attack_rings import (announce_length, burst_id, configure_burst, ring,
                                               ring_fds, threads)

INVALID = ErrorStatus.INVALID_ARGUMENT
EXHAUSTED = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT


@pytest.fixture(scope="module")
def driver():
    """One driver process for the module's attacks (the promises are checked after each)."""
    with AttackedDriver() as attacked:
        yield attacked


# ---------------------------------------------------------------- bug 1: large replies to a gone peer
def test_large_reply_to_a_client_that_left_leaks_nothing(driver):
    with driver.attack() as attacker:
        for request_id in range(20):
            sock = attacker.connect()
            # a PING's echo longer than the inline limit goes back in a sealed memfd
            send(sock, record(MsgType.PING, request_id, b"x" * (4 * MAX_INLINE_PAYLOAD)))
            sock.close()  # gone before the driver answers: its send fails


def test_ping_echo_is_never_a_memfd(driver):
    """A long PING echo would come back as a fresh memfd per request, for one reused memfd of
    the client's: pinned in a queue the client never reads, at no cost to it."""
    with driver.attack() as attacker:
        sock = attacker.connect()
        for request_id in range(20):
            send(sock, record(MsgType.PING, request_id, b"x" * (4 * MAX_INLINE_PAYLOAD)))
        for request_id in range(20):
            data, fds, _, _ = socket.recv_fds(sock, 1 << 17, 8)
            assert not fds and struct.unpack_from("<I", data, 16)[0] == INVALID


def test_a_peer_that_leaves_large_replies_unread_is_dropped(driver, monkeypatch):
    """Execute replies with 40 KB of inline outputs travel as memfds: after MAX_UNREAD_BULK of
    them unread, the driver sends no more (it drops the connection; the replies it had sent are
    then unreadable: the kernel reports the reset first)."""
    monkeypatch.setattr(encoder, "INLINE_DATA_LIMIT", 128 << 10)  # an attacker inlines its pool
    shape = (10_000,)
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock, shape=shape)
        payload = execute_add_payload(model_id, 1.0, shape)
        for request_id in range(MAX_UNREAD_BULK + 8):
            try:
                send(sock, record(MsgType.EXECUTE_SYNC, request_id, payload))
            except (ConnectionResetError, BrokenPipeError):
                break  # already dropped while we were still sending: checked below all the same
        hung_up = select.poll()  # nothing read yet: the driver closes its end once it refuses
        hung_up.register(sock, select.POLLRDHUP)
        assert hung_up.poll(60_000), "the driver went on sending large replies nobody reads"


# ---------------------------------------------------------------- bug 2: refused bursts
def test_refused_burst_closes_the_result_rings_fds(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        unsealed = attacker.own(os.memfd_create("attack", os.MFD_CLOEXEC))
        os.ftruncate(unsealed, 4096 + 192)
        good = ring(attacker)
        for _ in range(30):
            requests = [unsealed, *good.fds[1:]]  # the request ring is refused
            assert configure_burst(sock, requests + ring_fds(attacker), model_id).status == INVALID


def test_one_file_for_both_rings_is_refused(driver):
    """Request and result rings on one memfd: the listener would read its own answers as
    requests forever, never noticing its release (a busy thread and 7 fds for good)."""
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        shared = ring(attacker)
        for fds in ([*shared.fds, *shared.fds], [shared.fd, *ring_fds(attacker)[1:], shared.fd,
                                                 *ring_fds(attacker)[1:]]):
            reply = configure_burst(sock, fds, model_id)
            assert reply.status == INVALID and b"one file" in reply.body, reply


# ---------------------------------------------------------------- bug 3: wake-up fds of any kind
def _not_an_eventfd(kind: str, attacker) -> int:
    if kind == "dev-zero":
        return attacker.own(os.open("/dev/zero", os.O_RDONLY))
    if kind == "file":
        return attacker.own(os.open(tempfile.mkdtemp(prefix="nnscope-attack-"), os.O_TMPFILE | os.O_RDWR))
    read_end, write_end = (attacker.own(fd) for fd in os.pipe())
    if kind == "pipe-at-eof":
        os.close(write_end)
        return read_end
    if kind == "pipe-write-end":
        return write_end
    os.set_blocking(write_end, False)  # "full-pipe": a blocking pipe nobody reads, full
    try:
        while True:
            os.write(write_end, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    return write_end


@pytest.mark.parametrize("kind", ["dev-zero", "file", "pipe-at-eof", "pipe-write-end", "full-pipe"])
@pytest.mark.parametrize("position", [1, 2, 4, 5])
def test_burst_wakeup_that_is_no_eventfd_is_refused(driver, kind, position):
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        fds = ring_fds(attacker) + ring_fds(attacker)
        fds[position] = _not_an_eventfd(kind, attacker)
        reply = configure_burst(sock, fds, model_id)
        assert reply.status == INVALID, reply
        assert b"eventfd" in reply.body
        assert exchange(sock, MsgType.BURST_RELEASE, struct.pack("<I", 1)).status == INVALID


def test_a_burst_wakeup_made_blocking_by_its_owner_is_made_non_blocking(driver):
    """An eventfd whose counter the attacker saturates and sets blocking: the listener's
    signal on it would block forever; the driver makes its copy non-blocking."""
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        results = ring(attacker)
        os.set_blocking(results.fds[1], True)
        os.eventfd_write(results.fds[1], 0xFFFFFFFFFFFFFFFE)  # saturated: a blocking write waits
        requests = ring(attacker)
        ident = burst_id(configure_burst(sock, [*requests.fds, *results.fds], model_id))
        assert os.get_blocking(results.fds[1]) is False  # one open file: the driver's flag shows
        from nnscope.runtime.drivers.ipc.wire.fmq_datum import encode_echo  # noqa: PLC0415

        requests.write(encode_echo(1))
        assert results.read(timeout=5.0) == encode_echo(1)  # answered, not blocked in the signal
        assert exchange(sock, MsgType.BURST_RELEASE, struct.pack("<I", ident)).status == 0


# ---------------------------------------------------------------- bug 4: bursts and the fd budget
def test_bursts_beyond_a_clients_share_get_resource_exhausted():
    with AttackedDriver(max_fds=400) as driver:
        share, idle_threads = FdBudget(400 - FD_RESERVE).max_client_pools, threads(driver.pid)
        with driver.attack() as attacker:
            socks = [attacker.connect() for _ in range(8)]
            model_ids = [prepare_add(sock) for sock in socks]
            statuses = []
            for sock, model_id in zip(socks, model_ids):
                while True:
                    status = configure_burst(sock, ring_fds(attacker) + ring_fds(attacker), model_id).status
                    statuses.append(status)
                    if status != 0:
                        break
            assert set(statuses) == {0, EXHAUSTED}, statuses
            held = statuses.count(0)
            assert 0 < held <= min(MAX_BURSTS_PER_CLIENT, share // BURST_FDS)
            assert threads(driver.pid) <= idle_threads + held
            # another client still connects and gets answers (checked by the harness)


# ---------------------------------------------------------------- bug 5: a length prefix allocates nothing
def test_ring_length_prefix_allocates_nothing(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock)
        idents = []
        for _ in range(8):
            requests = ring(attacker)
            idents.append(burst_id(configure_burst(sock, [*requests.fds, *ring_fds(attacker)], model_id)))
            announce_length(requests, (64 << 20) - 1)  # then no data ever comes
        for ident in idents:  # the driver ended or waits; either way it answers the release
            assert exchange(sock, MsgType.BURST_RELEASE, struct.pack("<I", ident)).status == 0


def test_a_model_released_while_a_burst_runs_it_stays_charged():
    """RELEASE_MODEL while a burst still holds the model: the model lives on (AOSP's strong
    reference), so its memory budget charge must too, until the burst ends."""
    from tests.runtime.drivers._hal import add_model  # noqa: PLC0415
    from tests.support.driver_attack import prepare_payload  # noqa: PLC0415

    shape = ((16 << 20) // 4,)  # 16 MiB operands: a footprint of 48 MiB

    def prepare(sock):
        payload, fds, keep = prepare_payload(add_model(shape))
        try:
            return exchange(sock, MsgType.PREPARE_MODEL, payload, fds)
        finally:
            for pool in keep:
                pool.close()

    with AttackedDriver(extra_args=["--driver-memory-budget", str(64 << 20)]) as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            model_id = prepare_add(sock, shape=shape)
            ident = burst_id(configure_burst(sock, ring_fds(attacker) + ring_fds(attacker), model_id))
            assert exchange(sock, MsgType.RELEASE_MODEL, struct.pack("<I", model_id)).status == 0
            assert prepare(sock).status == EXHAUSTED  # the burst's model still holds its bytes
            assert exchange(sock, MsgType.BURST_RELEASE, struct.pack("<I", ident)).status == 0
            assert prepare(sock).status == 0
