"""``Memory``: shared memory regions for constants, inputs and outputs (ANeuralNetworksMemory).

A Memory is an ``mmap`` of a file descriptor. :meth:`Memory.create_shared` makes real shared
memory (``memfd_create`` + ``mmap``) that another process (a driver) can map from the same fd;
:meth:`Memory.from_fd` maps a caller's fd (duplicated, as NNAPI does). Drivers map only memory
that cannot shrink under them (a memfd sealed with ``F_SEAL_SHRINK``, see :attr:`Memory.sealed`):
``create_shared`` memory is sealed; any other fd's bytes are copied for the driver per call. Models reference memory
with ``Model.set_operand_value_from_memory`` and executions with ``set_input_from_memory`` /
``set_output_from_memory``.

Memory domains: memories made from a ``MemoryDesc`` (ANeuralNetworksMemory_createFromDesc) and
``Memory.copy`` (ANeuralNetworksMemory_copy).

:func:`from_desc` asks the descriptor's allocator (the one driver process every role runs on)
for an IBuffer (``IDevice::allocate``) and wraps it as a :class:`DeviceMemory`: the tensor
lives in the driver, executions on that driver pass only its token, and its bytes are reached
only through :func:`copy`. Without an allocator, or when the driver refuses, the memory is
runtime-side shared memory of the operand's size (AOSP's ashmem fallback). Either memory
carries a ``desc`` (``memory_desc.DescValidator``) that checks its roles and dimensions and
tracks whether it holds data. The tensor's dimensions must be fully known (else OP_FAILED).

:func:`copy` moves bytes between any two memories of the same size: ``IBuffer::copyTo`` /
``copyFrom`` across the process boundary (through shared memory), both for a device memory
pair (through a staging memfd, as AOSP), a plain copy otherwise. An uninitialised source or
incompatible memories are BAD_DATA (AOSP ``copyInternal``); a failed copy leaves the
destination uninitialised.

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

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime import _checks as checks
from nnscope.runtime.api import NnError, ResultCode, from_hal_error
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import Operand
from nnscope.runtime.memory_desc import MemoryDesc
from nnscope.tracing import Phase

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
        size = checks.integer(size, call, "size", 1, _INT64_MAX)
        prot = checks.integer(prot, call, "prot")
        fd = checks.integer(fd, call, "fd", 0, _INT32_MAX)
        offset = checks.integer(offset, call, "offset", 0, _INT64_MAX - size)
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
            size = checks.integer(size, "Memory.create_shared", "size", 1, _INT64_MAX)
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
        :func:`from_desc`."""
        return from_desc(desc)

    @staticmethod
    def copy(src: Memory, dst: Memory) -> None:
        """Copy ``src``'s bytes to ``dst`` (ANeuralNetworksMemory_copy); see :func:`copy`."""
        copy(src, dst)

    @classmethod
    def checked(cls, value, call: str, access: int = 0) -> Memory:
        """``value`` as a live Memory mapped with at least ``access`` (PROT_* bits); NNAPI's
        UNEXPECTED_NULL for None, BAD_DATA otherwise."""
        checks.not_null(value, call, "memory")
        if not isinstance(value, cls):
            raise checks.bad(call, f"expected a Memory, got {type(value).__name__}")
        if value.freed:
            raise checks.bad(call, "the Memory was freed")
        if access & ~value.prot:
            raise checks.bad(call, f"the Memory is mapped with prot {value.prot:#x}, "
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

class DeviceMemory(Memory):
    """A memory that lives in a driver process as an IBuffer (no mapping in this process)."""

    def __init__(self, ibuffer, size: int):  # noqa: D107 - no mapping: Memory.__init__ does not apply
        self.ibuffer = ibuffer
        self.ibuffer_token = ibuffer.token  # what execute messages carry (``encoder``)
        self.device = ibuffer.device
        self.size, self.fd, self.offset, self.prot = size, -1, 0, PROT_READ_WRITE
        self._view = None
        self._free_listeners = []

    @property
    def sealed(self) -> bool:
        return False

    @property
    def freed(self) -> bool:
        return self.ibuffer is None

    @property
    def pool(self):
        raise self._no_mapping()

    def buffer(self) -> memoryview:
        if self.ibuffer is None:
            raise NnError(ResultCode.BAD_STATE, "Memory: used after free()")
        raise self._no_mapping()

    def _no_mapping(self) -> NnError:
        return NnError(ResultCode.OP_FAILED, f"Memory: the tensor lives in driver {self.device.name} "
                       "(an IBuffer): it cannot be mapped here nor read on another device (use Memory.copy)")

    def free(self) -> None:
        """Release the driver's IBuffer (ANeuralNetworksMemory_free)."""
        with tracing.runtime(Phase.TERMINATION, "ANeuralNetworksMemory_free"):
            if self.ibuffer is not None:
                self.ibuffer.release()
                self.ibuffer = None

    close = free

    def __repr__(self) -> str:
        state = "freed" if self.freed else f"token={self.ibuffer_token}"
        return f"DeviceMemory(size={self.size}, device={self.device.name}, {state})"


def from_desc(desc: MemoryDesc) -> Memory:
    """See the module docstring. Raises NnError: UNEXPECTED_NULL, BAD_DATA for a non-descriptor,
    BAD_STATE for an unfinished one, OP_FAILED when its dimensions are not fully known."""
    with tracing.runtime(Phase.COMPILATION, "ANeuralNetworksMemory_createFromDesc"):
        call = "createFromDesc"
        checks.not_null(desc, call, "desc")
        if not isinstance(desc, MemoryDesc):
            raise checks.bad(call, f"expected a MemoryDesc, got {type(desc).__name__}")
        if not desc.finished:
            raise NnError(ResultCode.BAD_STATE, f"{call}: the descriptor is not finished")
        size = Operand(desc.operand.type, desc.dimensions).byte_size()
        if not size:
            raise NnError(ResultCode.OP_FAILED, f"{call}: dimensions {list(desc.dimensions)} are not "
                          "fully specified")
        memory = _on_device(desc, size) if desc.allocator is not None else None
        if memory is None:
            memory = Memory._create_shared(size, "nnscope-memory-desc")
        memory.desc = desc.validator()
        return memory


def _on_device(desc: MemoryDesc, size: int) -> DeviceMemory | None:
    roles = [(prepared, kind, index, frequency)
             for prepared, _, kind, index, frequency in desc.step_roles]
    try:
        ibuffer = desc.allocator.allocate(desc.dimensions, roles)
    except HalError as error:
        vlog.log("compilation", "MemoryBuilder", "allocate on %s failed (%s): runtime memory instead",
                 desc.allocator.name, error)
        return None
    if ibuffer.size != size:
        ibuffer.release()
        return None
    vlog.log("compilation", "MemoryBuilder", "createFromDesc: IBuffer token %d of %d bytes on %s",
             ibuffer.token, size, desc.allocator.name)
    return DeviceMemory(ibuffer, size)


def copy(src: Memory, dst: Memory) -> None:
    """See the module docstring (ANeuralNetworksMemory_copy)."""
    with tracing.runtime(Phase.EXECUTION, "ANeuralNetworksMemory_copy"):
        call = "Memory_copy"
        checks.not_null(src, call, "src")
        checks.not_null(dst, call, "dst")
        src = Memory.checked(src, f"{call}: src")
        dst = Memory.checked(dst, f"{call}: dst")
        if src is dst:
            return
        if src.desc is not None and not src.desc.initialized:
            raise checks.bad(call, "the source memory is uninitialised")
        target = dst.desc if dst.desc is not None else src.desc
        other = src.desc if dst.desc is not None else None
        if target is not None and not target.compatible(other, dst.size, src.size) or \
                target is None and dst.size != src.size:
            raise checks.bad(call, f"incompatible memories ({src.size} and {dst.size} bytes)")
        ok = False
        try:
            _copy_bytes(src, dst)
            ok = True
        finally:
            if dst.desc is not None:
                dst.desc.initialized = ok


def _copy_bytes(src: Memory, dst: Memory) -> None:
    try:
        if isinstance(src, DeviceMemory) and isinstance(dst, DeviceMemory):
            from nnscope.runtime.hal.shared_memory import SharedPool  # noqa: PLC0415

            with SharedPool(src.size, "nnscope-memory-copy") as staging:
                src.ibuffer.copy_to(staging)
                dst.ibuffer.copy_from(staging, dst.desc.dimensions)
        elif isinstance(src, DeviceMemory):
            src.ibuffer.copy_to(dst)
        elif isinstance(dst, DeviceMemory):
            dst.ibuffer.copy_from(src, dst.desc.dimensions)
        else:
            dst.buffer()[:] = src.buffer()
    except HalError as error:
        raise from_hal_error(error) from None
