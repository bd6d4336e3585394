import mmap
import os
import subprocess
import sys

import numpy as np
import pytest

from nnscope.runtime import Memory, NnError, ResultCode
from nnscope.runtime.memory import PROT_READ_WRITE


def test_create_shared_is_visible_to_another_process_by_fd():
    with Memory.create_shared(4096) as memory:
        code = ("import mmap, os, sys; fd = int(sys.argv[1]); "
                "m = mmap.mmap(fd, 4096); m[0:5] = b'hello'; m.flush()")
        subprocess.run([sys.executable, "-c", code, str(memory.fd)], pass_fds=(memory.fd,), check=True)
        assert bytes(memory.buffer()[:5]) == b"hello"


def test_from_fd_maps_an_unaligned_region(tmp_path):
    path = tmp_path / "data.bin"
    values = np.arange(2048, dtype=np.float32)
    path.write_bytes(values.tobytes())
    with open(path, "r+b") as handle:
        offset = 4100  # not page aligned
        memory = Memory.from_fd(64, PROT_READ_WRITE, handle.fileno(), offset)
    assert memory.array(np.float32).tolist() == values[offset // 4:offset // 4 + 16].tolist()
    memory.array(np.float32)[0] = -1  # shared mapping writes through to the file
    memory.free()
    assert np.frombuffer(path.read_bytes(), np.float32)[offset // 4] == -1
    assert memory.freed


def test_bad_arguments():
    with pytest.raises(NnError) as info:
        Memory.create_shared(0)
    assert info.value.code == ResultCode.BAD_DATA
    with pytest.raises(NnError, match="bad file descriptor"):
        Memory.from_fd(16, PROT_READ_WRITE, 9999, 0)
    r, w = os.pipe()
    try:
        with pytest.raises(NnError) as info:
            Memory.from_fd(16, mmap.PROT_READ, r, 0)
        assert info.value.code == ResultCode.UNMAPPABLE
    finally:
        os.close(r)
        os.close(w)


def test_use_after_free_is_bad_state():
    memory = Memory.create_shared(16)
    memory.free()
    memory.free()  # idempotent
    with pytest.raises(NnError) as info:
        memory.buffer()
    assert info.value.code == ResultCode.BAD_STATE
