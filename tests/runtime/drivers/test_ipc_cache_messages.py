"""Hostile cache requests against a real driver process: malformed ``PREPARE_MODEL_FROM_CACHE``
records, cache fds that are no regular files, forged headers, and ``PREPARE_MODEL`` with cache
fds the driver cannot write. Each is answered with a status (never a crash); the harness then
checks the driver's promises (alive, answering, bounded RSS, no leaked fds, no traceback)."""
import os
import socket
import struct
import tempfile

import pytest

from nnscope.runtime.drivers import cache_files
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.drivers._hal import add_model
from tests.support.driver_attack import AttackedDriver, exchange, prepare_payload

INVALID = ErrorStatus.INVALID_ARGUMENT
FAILURE = ErrorStatus.GENERAL_FAILURE
TOKEN = bytes(range(32))


@pytest.fixture(scope="module")
def driver():
    with AttackedDriver() as attacked:
        yield attacked


def _from_cache(n_model: int, n_data: int, token: bytes = TOKEN, deadline: int = -1) -> bytes:
    return struct.pack("<qIIB", deadline, n_model, n_data, 100) + struct.pack("<I", len(token)) + token


def _file(attacker, content: bytes = b"", mode=os.O_RDWR) -> int:
    fd = attacker.own(os.open(tempfile.mkdtemp(prefix="nnscope-cache-attack-"), os.O_TMPFILE | mode))
    if content:
        os.pwrite(fd, content, 0)
    return fd


@pytest.mark.parametrize("payload,fds,status", [
    (b"", 0, INVALID),
    (_from_cache(1, 1), 0, INVALID),            # two files announced, none sent
    (_from_cache(1, 1), 1, INVALID),
    (_from_cache(1, 1), 3, INVALID),            # one fd too many
    (_from_cache(1, 1, b"short"), 2, INVALID),
    (_from_cache(0, 0), 0, INVALID),
    (_from_cache(1 << 31, 1 << 31), 2, INVALID),
    (_from_cache(1, 1) + b"tail", 2, INVALID),
    (_from_cache(1, 1), 2, FAILURE),            # empty files
    (_from_cache(2, 1), 3, FAILURE),            # the sample driver uses one file of each
])
def test_malformed_prepare_from_cache_is_answered(driver, payload, fds, status):
    with driver.attack() as attacker:
        sock = attacker.connect()
        reply = exchange(sock, MsgType.PREPARE_MODEL_FROM_CACHE, payload,
                         [_file(attacker) for _ in range(fds)])
        assert reply.status == status, reply


def test_cache_fds_that_are_no_files(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        left, right = socket.socketpair()
        read_end, write_end = (attacker.own(fd) for fd in os.pipe())
        dev_zero = attacker.own(os.open("/dev/zero", os.O_RDONLY))
        directory = attacker.own(os.open(tempfile.mkdtemp(), os.O_RDONLY | os.O_DIRECTORY))
        for model_fd, data_fd in ((left.fileno(), right.fileno()), (read_end, write_end),
                                  (dev_zero, dev_zero), (directory, directory)):
            reply = exchange(sock, MsgType.PREPARE_MODEL_FROM_CACHE, _from_cache(1, 1),
                             [model_fd, data_fd], timeout=5.0)
            assert reply.status == FAILURE, reply
        left.close()
        right.close()


def _forged(length: int, token: bytes = TOKEN) -> bytes:
    return cache_files.header(cache_files.KIND_MODEL, "sample-all", "nnscope-sample-1.3", token,
                              bytes(32), length, (0, 0, 0))


def test_forged_headers_do_not_make_the_driver_allocate(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        huge = _file(attacker, _forged(cache_files.MAX_PAYLOAD + 1))
        os.ftruncate(huge, cache_files.HEADER_SIZE + cache_files.padded_size(cache_files.MAX_PAYLOAD + 1))
        big = _file(attacker, _forged(400 << 20))  # claims 400 MiB, holds a header only
        for model_fd in (huge, big):
            reply = exchange(sock, MsgType.PREPARE_MODEL_FROM_CACHE, _from_cache(1, 1),
                             [model_fd, _file(attacker)], timeout=5.0)
            assert reply.status == FAILURE, reply
    assert driver.check_promises()["peak_rss_kb"] < 400 << 10


def test_prepare_with_unwritable_cache_fds_still_prepares(driver):
    with driver.attack() as attacker:
        sock = attacker.connect()
        body, fds, keep = prepare_payload(add_model((4,)))
        head, model = body[:18], body[18:]
        cache = [_file(attacker, mode=os.O_RDWR) for _ in range(2)]
        read_only = [attacker.own(os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)) for fd in cache]
        payload = head[:10] + struct.pack("<II", 1, 1) + TOKEN + model
        try:
            reply = exchange(sock, MsgType.PREPARE_MODEL, payload, [*read_only, *fds])
            assert reply.status == 0, reply
            bad = exchange(sock, MsgType.PREPARE_MODEL, head[:10] + struct.pack("<II", 1, 1) + model,
                           [*read_only, *fds])  # counts without the token
            assert bad.status == INVALID, bad
        finally:
            for pool in keep:
                pool.close()
        assert all(os.fstat(fd).st_size == 0 for fd in cache)  # nothing written through O_RDONLY
