"""``Memory``: shared memory regions for constants, inputs and outputs (ANeuralNetworksMemory).

A Memory is an ``mmap`` of a file descriptor. :meth:`Memory.create_shared` makes real shared
memory (``memfd_create`` + ``mmap``) that another process (a driver) can map from the same fd;
:meth:`Memory.from_fd` maps a caller's fd (duplicated, as NNAPI does). Drivers map only memory
that cannot shrink under them (a memfd sealed with ``F_SEAL_SHRINK``, see :attr:`Memory.sealed`):
``create_shared`` memory is sealed; any other fd's bytes are copied for the driver per call. Models reference memory
with ``Model.set_operand_value_from_memory`` and executions with ``set_input_from_memory`` /
``set_output_from_memory``. :meth:`Memory.from_desc` and :meth:`Memory.copy` are memory domains
(``runtime.device_memory``).

Example:
    >>> import numpy as np
    >>> with Memory.create_shared(16) as memory:
    ...     memory.array(np.float32)[:] = [1, 2, 3, 4]
    ...     bytes(memory.buffer()[:4]) == np.float32(1).tobytes()
    True
"""
from __future__ import annotations

import fcntl
import mmap
import os

import numpy as np

import tracing
from runtime import _checks
from runtime.api import NnError, ResultCode
from tracing import Phase

#: ``PROT_READ | PROT_WRITE``, the usual ``prot`` for :meth:`Memory.from_fd`.
PROT_READ_WRITE = mmap.PROT_READ | mmap.PROT_WRITE
#: ``PROT_NONE`` (the ``mmap`` module has no name for it): accepted by :meth:`Memory.from_fd`.
PROT_NONE = 0
_INT32_MAX, _INT64_MAX = (1 << 31) - 1, (1 << 63) - 1
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW


class Memory:
    """A mapped region of ``size`` bytes; also a model pool (``buffer()``, ``fd``, ``size``).

    Attributes:
        size: Size of the region in bytes.
        fd: The (duplicated, owned) file descriptor backing the region.
        offset: Offset of the region in that file.
    """

    #: The ``memory_desc.DescValidator`` of a memory made by :meth:`from_desc` (else None).
    desc = None

    def __init__(self, mapping: mmap.mmap, fd: int, offset: int, size: int, delta: int,
                 prot: int = PROT_READ_WRITE):
        self._mapping = mapping
        self._delta = delta  # region start inside the page-aligned mapping
        self.fd = fd
        self.offset = offset
        self.size = size
        self.prot = prot
        self._view = memoryview(mapping)[delta:delta + size]
        self._sealed = False
        self._free_listeners: list = []

    @property
    def sealed(self) -> bool:
        """True when the fd is a memfd sealed against shrinking: a driver process may map it.
        Otherwise the runtime copies the bytes a driver needs (a file that shrank under a
        driver's mapping would crash it)."""
        if not self._sealed and self._view is not None:
            try:
                self._sealed = bool(fcntl.fcntl(self.fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK)
            except OSError:
                pass  # not a memfd
        return self._sealed

    @classmethod
    def from_fd(cls, size: int, prot: int, fd: int, offset: int = 0) -> Memory:
        """Map ``size`` bytes of ``fd`` at ``offset`` (ANeuralNetworksMemory_createFromFd).

        Args:
            size: Bytes to map (> 0).
            prot: ``mmap.PROT_READ`` and/or ``mmap.PROT_WRITE``, or 0 (``PROT_NONE``, as the
                NNAPI header allows: such a memory cannot be read or written through the API).
            fd: An open file descriptor; it is duplicated, the caller keeps its own.
            offset: Byte offset in the file; need not be page aligned.

        Raises:
            NnError: BAD_DATA for a bad size/offset/prot/fd, UNMAPPABLE when mmap fails.
        """
        with tracing.runtime(Phase.PREPARATION, "ANeuralNetworksMemory_createFromFd"):
            return cls._map(size, prot, fd, offset)

    @classmethod
    def _map(cls, size: int, prot: int, fd: int, offset: int) -> Memory:
        call = "Memory.from_fd"
        size = _checks.integer(size, call, "size", 1, _INT64_MAX)
        prot = _checks.integer(prot, call, "prot")
        fd = _checks.integer(fd, call, "fd", 0, _INT32_MAX)
        offset = _checks.integer(offset, call, "offset", 0, _INT64_MAX - size)
        if prot & ~PROT_READ_WRITE:
            raise NnError(ResultCode.BAD_DATA, f"Memory: invalid prot {prot:#x}")
        delta = offset % mmap.ALLOCATIONGRANULARITY
        try:
            owned = os.dup(fd)
        except OSError as error:
            raise NnError(ResultCode.BAD_DATA, f"Memory: bad file descriptor {fd}: {error}") from None
        try:
            mapping = mmap.mmap(owned, size + delta, flags=mmap.MAP_SHARED, prot=prot,
                                offset=offset - delta)
        except (OSError, ValueError) as error:
            os.close(owned)
            raise NnError(ResultCode.UNMAPPABLE, f"Memory: cannot map fd {fd} "
                          f"[{offset}, {offset + size}): {error}") from None
        return cls(mapping, owned, offset, size, delta, prot)

    @classmethod
    def create_shared(cls, size: int, name: str = "nnscope") -> Memory:
        """Allocate ``size`` bytes of shared memory (memfd), mappable by other processes via ``fd``.

        Raises:
            NnError: BAD_DATA for size <= 0, OUT_OF_MEMORY when the allocation fails.
        """
        with tracing.runtime(Phase.PREPARATION, "ANeuralNetworksMemory_createFromFd"):
            size = _checks.integer(size, "Memory.create_shared", "size", 1, _INT64_MAX)
            if not isinstance(name, str):
                raise NnError(ResultCode.BAD_DATA, f"Memory: name must be a string, got {name!r}")
            return cls._create_shared(size, name)

    @classmethod
    def _create_shared(cls, size: int, name: str) -> Memory:
        """``create_shared`` without its span and argument checks."""
        try:
            fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except OSError as error:
            raise NnError(ResultCode.OUT_OF_MEMORY, f"Memory: memfd_create failed: {error}") from None
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)  # fixed size: drivers may map it
        except OSError as error:
            os.close(fd)
            raise NnError(ResultCode.OUT_OF_MEMORY, f"Memory: memfd_create failed: {error}") from None
        try:
            return cls._map(size, PROT_READ_WRITE, fd, 0)
        finally:
            os.close(fd)

    @staticmethod
    def from_desc(desc) -> Memory:
        """A memory playing the roles of a finished ``MemoryDesc`` (createFromDesc); see
        ``runtime.device_memory.from_desc``."""
        from runtime import device_memory  # noqa: PLC0415 - device_memory imports this module

        return device_memory.from_desc(desc)

    @staticmethod
    def copy(src: Memory, dst: Memory) -> None:
        """Copy ``src``'s bytes to ``dst`` (ANeuralNetworksMemory_copy); see
        ``runtime.device_memory.copy``."""
        from runtime import device_memory  # noqa: PLC0415

        device_memory.copy(src, dst)

    @classmethod
    def checked(cls, value, call: str, access: int = 0) -> Memory:
        """``value`` as a live Memory mapped with at least ``access`` (PROT_* bits); NNAPI's
        UNEXPECTED_NULL for None, BAD_DATA otherwise."""
        _checks.not_null(value, call, "memory")
        if not isinstance(value, cls):
            raise _checks.bad(call, f"expected a Memory, got {type(value).__name__}")
        if value.freed:
            raise _checks.bad(call, "the Memory was freed")
        if access & ~value.prot:
            raise _checks.bad(call, f"the Memory is mapped with prot {value.prot:#x}, "
                                    f"this use needs {access:#x}")
        return value

    def buffer(self) -> memoryview:
        """A writable (if mapped writable) memoryview of the region."""
        if self._view is None:
            raise NnError(ResultCode.BAD_STATE, "Memory: used after free()")
        if not self.prot:
            raise NnError(ResultCode.BAD_DATA, "Memory: mapped with PROT_NONE; it cannot be accessed")
        return self._view

    @property
    def pool(self) -> mmap.mmap:
        """The underlying page-aligned mapping (what requests carry as a pool)."""
        return self._mapping

    def array(self, dtype, shape=None, offset: int = 0) -> np.ndarray:
        """A numpy view of the region (or of part of it starting at ``offset`` bytes)."""
        dtype = np.dtype(dtype)
        count = (self.size - offset) // dtype.itemsize if shape is None else int(np.prod(shape))
        view = np.frombuffer(self.buffer(), dtype, count, offset)
        return view if shape is None else view.reshape(shape)

    @property
    def freed(self) -> bool:
        return self._view is None

    def add_free_listener(self, listener) -> None:
        """Call ``listener()`` (a ``weakref.WeakMethod`` taking this Memory) at :meth:`free`:
        a burst that cached this memory in a slot frees the slot in the driver."""
        self._free_listeners.append(listener)

    def free(self) -> None:
        """Unmap and close (ANeuralNetworksMemory_free); views still alive keep the map open."""
        with tracing.runtime(Phase.TERMINATION, "ANeuralNetworksMemory_free"):
            if self._view is None:
                return
            listeners, self._free_listeners = self._free_listeners, []
            for listener in listeners:
                method = listener()
                if method is not None:
                    method(self)
            try:
                self._view.release()
            except BufferError:
                pass  # numpy views of the region are still alive
            self._view = None
            try:
                self._mapping.close()
            except BufferError:
                pass  # numpy views still export it; the map goes away with them
            os.close(self.fd)

    close = free

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __repr__(self) -> str:
        state = "freed" if self.freed else f"fd={self.fd}"
        return f"Memory(size={self.size}, offset={self.offset}, {state})"
