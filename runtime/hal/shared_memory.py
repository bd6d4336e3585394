"""Shared-memory pools: ``memfd_create`` + ``mmap`` regions whose fds cross the socket.

The runtime side creates a :class:`SharedPool` (or passes any object with ``fd``, ``offset`` and
``size`` attributes, e.g. ``runtime.memory.Memory``); the fd travels once with ``SCM_RIGHTS`` and
the driver maps it with :func:`map_fd`, which checks the region against the file's real size so
no access can fall outside it. A mapping of a file that later shrinks faults (SIGBUS) on access,
so :func:`map_fd` accepts only memfds sealed against shrinking (``F_SEAL_SHRINK``, checked with
``F_GET_SEALS`` on receipt, like ashmem that cannot shrink); pools made here carry
``F_SEAL_SHRINK | F_SEAL_GROW``.

Example:
    >>> pool = SharedPool(8)
    >>> pool.view[:3] = b"abc"
    >>> mapped = map_fd(pool.fd, 0, 8)
    >>> bytes(mapped.view[:3])
    b'abc'
    >>> mapped.close(); pool.close()
"""
from __future__ import annotations

import fcntl
import mmap
import os

from nnscope.runtime.hal.validate import pool_buffer

SEAL_SHRINK = getattr(fcntl, "F_SEAL_SHRINK", 0x0002)
#: The seals of every pool made here: its size is fixed for good.
POOL_SEALS = SEAL_SHRINK | getattr(fcntl, "F_SEAL_GROW", 0x0004)
_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
_GET_SEALS = getattr(fcntl, "F_GET_SEALS", 1034)


class MappingError(ValueError):
    """An fd/region that cannot be mapped (reported as INVALID_ARGUMENT)."""


class SharedPool:
    """An anonymous shared-memory region of ``size`` bytes (``size`` may be 0).

    Attributes:
        fd: The memfd (owned; closed by :meth:`close`).
        offset: Always 0.
        size: Size in bytes.
        view: A writable memoryview of the region (also returned by :meth:`buffer`, the
            ``runtime.memory.Memory`` pool interface).
    """

    offset = 0
    sealed = True  # cannot shrink: a driver may map it (see map_fd)

    def __init__(self, size: int, name: str = "nnscope-pool"):
        self.size = size
        self.fd = sealed_memfd(name, size)
        try:
            self._map = mmap.mmap(self.fd, size) if size else None
        except OSError:
            os.close(self.fd)
            raise
        self.view = memoryview(self._map) if self._map is not None else memoryview(bytearray())

    def buffer(self) -> memoryview:
        """The region as a writable memoryview (pool interface shared with ``Memory``)."""
        return self.view

    @classmethod
    def from_bytes(cls, data, name: str = "nnscope-pool") -> SharedPool:
        pool = cls(len(data), name)
        pool.view[:] = data
        return pool

    def close(self) -> None:
        if self.fd < 0:
            return
        _release(self.view, self._map)
        os.close(self.fd)
        self.fd = -1

    def __enter__(self) -> SharedPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MappedRegion:
    """A region of a received fd mapped into this process; ``view`` is a memoryview."""

    def __init__(self, mapping: mmap.mmap | None, delta: int, size: int):
        self._map = mapping
        self.size = size
        if mapping is None:
            self.view = memoryview(bytearray())
        else:
            self.view = memoryview(mapping)[delta:delta + size]

    def close(self) -> None:
        _release(self.view, self._map)


def map_fd(fd: int, offset: int, size: int, writable: bool = True) -> MappedRegion:
    """Map ``[offset, offset+size)`` of ``fd``; the caller keeps (and closes) ``fd``.

    Raises:
        MappingError: negative values, a region past the end of the file, or mmap failure.
    """
    if offset < 0 or size < 0:
        raise MappingError(f"bad region offset={offset} size={size}")
    if not can_not_shrink(fd):
        raise MappingError("pool fd is not a memfd sealed against shrinking (F_SEAL_SHRINK)")
    try:
        file_size = os.fstat(fd).st_size
    except OSError as error:
        raise MappingError(f"cannot stat fd: {error}") from None
    if offset + size > file_size:
        raise MappingError(f"region [{offset}, {offset + size}) outside a file of {file_size} bytes")
    if size == 0:
        return MappedRegion(None, 0, 0)
    start = offset - offset % mmap.ALLOCATIONGRANULARITY
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    try:
        mapping = mmap.mmap(fd, offset + size - start, mmap.MAP_SHARED, prot, offset=start)
    except (OSError, ValueError) as error:
        raise MappingError(f"mmap failed: {error}") from None
    return MappedRegion(mapping, offset - start, size)


def _release(view: memoryview, mapping) -> None:
    """Unmap now if nothing else uses the memory; otherwise it goes with its last numpy view."""
    try:
        view.release()
        if mapping is not None:
            mapping.close()
    except BufferError:
        pass


def sealed_memfd(name: str, size: int) -> int:
    """A new memfd of ``size`` bytes sealed with :data:`POOL_SEALS` (the caller owns the fd)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, _ADD_SEALS, POOL_SEALS)
    except OSError:
        os.close(fd)
        raise
    return fd


def can_not_shrink(fd: int) -> bool:
    """True when ``fd`` is a memfd sealed against shrinking (seals can never be removed)."""
    try:
        return bool(fcntl.fcntl(fd, _GET_SEALS) & SEAL_SHRINK)
    except OSError:
        return False  # not a memfd (a plain file, a pipe, ...)


def pool_bytes(pool) -> memoryview:
    """A request pool (bytes-like, numpy array, Memory, SharedPool) as flat unsigned bytes."""
    return flat_bytes(memoryview(pool_buffer(pool)))


def flat_bytes(view: memoryview) -> memoryview:
    """``view`` as one dimension of unsigned bytes (a C-contiguous view)."""
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def is_shared(pool) -> bool:
    """True for a pool the driver may map by fd: one that says it is ``sealed`` (cannot shrink,
    see ``shared_memory.map_fd``). Any other pool's bytes travel inline or staged."""
    return isinstance(getattr(pool, "fd", None), int) and getattr(pool, "fd") >= 0 \
        and hasattr(pool, "size") and getattr(pool, "sealed", False)


def ibuffer_token(pool) -> int | None:
    """The token of a device memory (a driver-side IBuffer), None for any other pool."""
    return getattr(pool, "ibuffer_token", None)
