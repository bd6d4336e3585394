"""The driver's memory of verified cache files (``runtime.drivers.cache_files.MEMO``): a second
load of unchanged files is served from it, and any change to a file (a write, a truncation, a
timestamp, a replacement) makes the next load read and verify the file again, so a corrupted
cache is still refused. Oracle: the reference CPU device's outputs."""
from __future__ import annotations

import os

import numpy as np
import pytest

from nnscope.runtime.builtin_models import mobilenet, sample_input
from nnscope.runtime.drivers import cache_files
from nnscope.runtime.drivers.cache_files import HEADER_SIZE
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus

TOKEN = bytes(range(32))
MODEL = mobilenet(size=32, alpha=0.25, classes=10)


@pytest.fixture
def cache(tmp_path):
    """A sample driver, cache files written for MODEL, a loader and the reference output."""
    driver = SampleDriver(SAMPLES["sample-all"])
    hal = MODEL.to_hal()
    paths = [tmp_path / "model", tmp_path / "data"]
    fds = [os.open(path, os.O_RDWR | os.O_CREAT, 0o600) for path in paths]
    driver.write_cache(driver.prepare_model(hal), [fds[0]], [fds[1]], TOKEN)

    def load():
        return driver.prepare_model_from_cache_files([fds[0]], [fds[1]], TOKEN)

    yield load, paths, fds, _output(CpuDevice().prepare_model(hal))
    for fd in fds:
        os.close(fd)


def _output(prepared) -> np.ndarray:
    data = np.ascontiguousarray(sample_input(MODEL)[0])
    out = bytearray(4 * 10)
    request = Request((RequestArgument(False, 0, 0, data.nbytes),), (RequestArgument(False, 1, 0, len(out)),),
                      (bytearray(data.tobytes()), out))
    assert prepared.execute(request).status == ErrorStatus.NONE
    return np.frombuffer(out, np.float32).copy()


def _hits(load) -> int:
    before = cache_files.MEMO.hits
    load()
    return cache_files.MEMO.hits - before


def test_unchanged_files_are_not_read_again_and_compute_the_same(cache):
    load, _, _, expected = cache
    first = load()
    assert _hits(load) == 2  # the model file and the data file
    again = load()
    assert again is not first and again.executor is not first.executor
    for prepared in (first, again, load()):
        np.testing.assert_array_equal(_output(prepared), expected)


@pytest.mark.parametrize("change", ["write", "truncate", "touch"])
def test_a_changed_file_is_verified_again(cache, change):
    load, paths, fds, expected = cache
    load()
    assert _hits(load) == 2
    data_fd, size = fds[1], os.fstat(fds[1]).st_size
    if change == "write":  # one flipped payload byte: the checksum refuses it
        byte = os.pread(data_fd, 1, HEADER_SIZE + 100)
        os.pwrite(data_fd, bytes([byte[0] ^ 0xFF]), HEADER_SIZE + 100)
        with pytest.raises(HalError, match="cache not usable"):
            load()
        os.pwrite(data_fd, byte, HEADER_SIZE + 100)
    elif change == "truncate":
        os.ftruncate(data_fd, size - 1)
        with pytest.raises(HalError, match="cache not usable"):
            load()
        os.ftruncate(data_fd, size)  # the last byte is padding (zero): the file is whole again
    else:
        os.utime(paths[1])
    assert _hits(load) == 1  # the model file still vouched for, the data file read again
    np.testing.assert_array_equal(_output(load()), expected)


def test_a_replaced_file_is_another_file(cache, tmp_path):
    load, paths, fds, expected = cache
    load()
    copy = tmp_path / "copy"
    copy.write_bytes(paths[1].read_bytes())
    os.replace(copy, paths[1])  # unlinks the old inode (its link count changes: forgotten)
    assert _hits(load) == 1
    os.close(fds[1])
    fds[1] = os.open(paths[1], os.O_RDWR)
    assert _hits(load) == 1  # a new inode: read and verified
    assert _hits(load) == 2
    np.testing.assert_array_equal(_output(load()), expected)
