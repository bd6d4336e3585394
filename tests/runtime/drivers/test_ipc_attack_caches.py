"""Attacks on a real driver process through cache files and IBuffers (issue 24, bugs 8-10):
files that claim large payloads, files and fds that would pile up inotify watches, and small
ALLOCATE messages for large tensors."""
import os
import struct
import tempfile

import pytest

from nnscope.runtime.drivers import cache_files
from nnscope.runtime.drivers.cache_files import MEMO_MAX_ENTRIES
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.types import ErrorStatus
from tests.support.driver_attack import AttackedDriver, exchange, peak_rss_kb, prepare_add
from tests.support.driver_attack_rings import inotify_watches

FAILURE = ErrorStatus.GENERAL_FAILURE
EXHAUSTED = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
TOKEN = bytes(range(32))
DRIVER, VERSION = "sample-all", "nnscope-sample-1.3"
#: What reading a cache may add to the driver's peak RSS here (the real payloads are tiny).
READ_SLACK_KB = 64 << 10


@pytest.fixture(scope="module")
def driver():
    """One driver process for the module's attacks (the promises are checked after each)."""
    with AttackedDriver() as attacked:
        yield attacked


def _from_cache(token: bytes = TOKEN) -> bytes:
    return struct.pack("<qIIB", -1, 1, 1, 100) + struct.pack("<I", len(token)) + token


def _file(attacker) -> int:
    return attacker.own(os.open(tempfile.mkdtemp(prefix="nnscope-cache-attack-"), os.O_TMPFILE | os.O_RDWR))


def _record(attacker, kind: int, payload: bytes, token: bytes = TOKEN) -> int:
    fd = _file(attacker)
    cache_files.write(fd, kind, DRIVER, VERSION, token, bytes(32), payload)
    return fd


def _sparse(attacker, kind: int, length: int) -> int:
    """A file whose header checks out for a ``length``-byte payload that is one big hole."""
    fd = _file(attacker)
    os.pwrite(fd, cache_files.header(kind, DRIVER, VERSION, TOKEN, bytes(32), length, (0, 0, 0)), 0)
    os.ftruncate(fd, cache_files.HEADER_SIZE + cache_files.padded_size(length))
    return fd


def _prepare_from_cache(sock, model_fd: int, data_fd: int, token: bytes = TOKEN):
    return exchange(sock, MsgType.PREPARE_MODEL_FROM_CACHE, _from_cache(token), [model_fd, data_fd],
                    timeout=10.0)


# ---------------------------------------------------------------- bug 8: payloads read before checks
@pytest.mark.parametrize("kind,length", [(cache_files.KIND_MODEL, (1 << 30) - 4096),
                                         (cache_files.KIND_DATA, (1 << 30) - 4096),
                                         (cache_files.KIND_DATA, 250 << 20)])
def test_sparse_cache_file_is_refused_before_it_is_read(driver, kind, length):
    before = peak_rss_kb(driver.pid)
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_fd = _sparse(attacker, kind, length) if kind == cache_files.KIND_MODEL else \
            _record(attacker, cache_files.KIND_MODEL, b"a model record that checks out")
        data_fd = _sparse(attacker, kind, length) if kind == cache_files.KIND_DATA else _file(attacker)
        assert _prepare_from_cache(sock, model_fd, data_fd).status == FAILURE
    assert peak_rss_kb(driver.pid) < before + READ_SLACK_KB


# ---------------------------------------------------------------- bug 9: inotify watches
def test_cache_reads_leave_no_inotify_watch_behind(driver):
    before = inotify_watches(driver.pid)
    with driver.attack() as attacker:
        sock = attacker.connect()
        for number in range(40):  # files whose payload checksum fails: watched, then dropped
            bad = _record(attacker, cache_files.KIND_MODEL, b"model")
            os.pwrite(bad, b"X", cache_files.HEADER_SIZE)
            assert _prepare_from_cache(sock, bad, _file(attacker)).status == FAILURE
        for number in range(40):  # pipes and sockets are no cache files
            read_end, write_end = (attacker.own(fd) for fd in os.pipe())
            assert _prepare_from_cache(sock, read_end, write_end).status == FAILURE
        assert inotify_watches(driver.pid) == before
        for number in range(40):  # records that verify, of files that do not belong together
            token = bytes([number]) * 32
            model_fd = _record(attacker, cache_files.KIND_MODEL, b"model %d" % number, token)
            data_fd = _record(attacker, cache_files.KIND_DATA, b"data %d" % number, token)
            assert _prepare_from_cache(sock, model_fd, data_fd, token).status == FAILURE
        assert inotify_watches(driver.pid) <= before + MEMO_MAX_ENTRIES  # one per remembered file


# ---------------------------------------------------------------- bug 10: IBuffers
def _allocate(sock, model_id: int, dims=()) -> tuple:
    """ALLOCATE for input 0 of ``model_id`` with ``dims``; (status, token)."""
    payload = struct.pack(f"<I{len(dims)}I", len(dims), *dims) + struct.pack("<II", 1, model_id) + \
        struct.pack("<IIId", 1, 0, 0, 1.0) + struct.pack("<I", 0)
    reply = exchange(sock, MsgType.ALLOCATE, payload)
    return reply.status, (struct.unpack_from("<I", reply.body)[0] if reply.status == 0 else None)


def test_allocations_cost_no_memory_until_written(driver):
    before = peak_rss_kb(driver.pid)
    with driver.attack() as attacker:
        sock = attacker.connect()
        model_id = prepare_add(sock, shape=((256 << 20) // 4,))  # 256 MiB float32 tensors
        for _ in range(3):
            assert _allocate(sock, model_id)[0] == 0
    assert peak_rss_kb(driver.pid) < before + READ_SLACK_KB


def test_allocations_are_charged_to_the_memory_budget():
    with AttackedDriver(extra_args=["--driver-memory-budget", str(256 << 20)]) as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            model_id = prepare_add(sock, shape=((32 << 20) // 4,))  # 32 MiB tensors
            statuses = [_allocate(sock, model_id)[0] for _ in range(12)]
            assert statuses[0] == 0 and statuses[-1] == EXHAUSTED, statuses
            token = struct.pack("<I", 1)
            assert exchange(sock, MsgType.BUFFER_FREE, token).status == 0
            assert _allocate(sock, model_id)[0] == 0  # freeing gave the bytes back

