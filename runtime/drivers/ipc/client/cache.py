"""Runtime side of compilation caching with a driver process (AOSP ``Manager.cpp``, DriverDevice).

The runtime owns the cache directory; the driver only ever sees open files. From the (already
hashed, see ``runtime._caching``) 32-byte token, :func:`cache_paths` derives the file names as
AOSP's ``getCacheHandles`` does: each token byte as two letters ``'A' + low nibble``,
``'A' + high nibble``, then ``1`` (model cache) or ``2`` (data cache), then the file index.
The files are opened read-write (created, mode 0600, only for ``prepareModel_1_3``; never
through a symbolic link, and only regular files are used) and their fds travel with the request as ``SCM_RIGHTS`` (AOSP passes ``hidl_handle`` fds the same way),
after which the runtime closes its copies.

The wire format is in ``wire.cache_args``.

Example:
    >>> cache_paths("/c", bytes([0x21]) + bytes(31), (1, 1))[0]
    ['/c/BCAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA10']
"""
from __future__ import annotations

import os
import stat

from nnscope import vlog
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.cache_args import MAX_NUMBER_OF_CACHE_FILES, TOKEN_SIZE, from_cache_args
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.sync_fence import close_fds
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, Priority


def cache_paths(cache_dir: str, token: bytes, counts: tuple[int, int]) -> tuple[list[str], list[str]]:
    """Model-cache and data-cache file paths for ``token`` in ``cache_dir``."""
    name = "".join(chr(ord("A") + (b & 0x0F)) + chr(ord("A") + (b >> 4)) for b in token)
    base = os.path.join(cache_dir, name)
    return ([f"{base}1{i}" for i in range(counts[0])], [f"{base}2{i}" for i in range(counts[1])])


def usable_counts(name: str, counts: tuple[int, int]) -> tuple[int, int]:
    """A driver's ``getNumberOfCacheFilesNeeded`` answer, or (0, 0) when it cannot be used
    (more than NNAPI's maximum)."""
    if max(counts) > MAX_NUMBER_OF_CACHE_FILES:
        vlog.log("compilation", "Manager", "%s asks for %s cache files; caching disabled", name, counts)
        return (0, 0)
    return counts


def open_cache(device, cache_dir: str | None, token: bytes | None, create: bool):
    """``(fds, counts)`` of the device's cache files for ``token``; ``([], (0, 0))`` when there
    is no caching (no token, a device without cache files, or files that cannot be opened)."""
    if not cache_dir or token is None or len(token) != TOKEN_SIZE:
        return [], (0, 0)
    counts = device.number_of_cache_files_needed()
    if counts == (0, 0):
        return [], counts
    model_paths, data_paths = cache_paths(cache_dir, token, counts)
    fds = []
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_CREAT if create else 0)
    for index, path in enumerate((*model_paths, *data_paths)):
        vlog.log("compilation", "Manager", "Cache %d: %s", index, path)
        try:
            fds.append(os.open(path, flags, 0o600))
            if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
                raise OSError(0, "not a regular file")
        except OSError as error:
            close_fds(fds)
            vlog.log("compilation", "Manager", "cannot open cache file %s: %s", path, error.strerror)
            return [], (0, 0)
    return fds, counts


def prepare_from_cache(device, model, deadline_ns: int | None, cache_dir: str | None,
                       token: bytes | None, preference=None, priority=None):
    """``prepareModelFromCache_1_3`` on a driver process: the ``RemotePreparedModel`` (its
    ``prepare_args`` hold what a restarted driver prepares it again with).

    Raises:
        HalError: GENERAL_FAILURE when there is no usable cache (also when the driver rejects
            it); the driver's status otherwise.
    """
    from nnscope.runtime.drivers.ipc.client.prepared import RemotePreparedModel  # noqa: PLC0415

    fds, counts = open_cache(device, cache_dir, token, create=False)
    if not fds:
        raise HalError(ErrorStatus.GENERAL_FAILURE, "no cache files to prepare from")
    try:
        payload = from_cache_args(deadline_ns, counts, Priority.MEDIUM if priority is None else priority, token)
        r = device.call(MsgType.PREPARE_MODEL_FROM_CACHE, Phase.COMPILATION, payload, fds, deadline_ns)
    finally:
        close_fds(fds)
    prepared = RemotePreparedModel(device, r.u32(), model)
    if preference is not None:
        prepared.prepare_args = (preference, priority, cache_dir, token)
    return prepared
