"""Memories made from a ``MemoryDesc`` (ANeuralNetworksMemory_createFromDesc) and
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
    >>> memory = Memory.from_desc(desc)        # doctest: +SKIP
    >>> Memory.copy(host_memory, memory)       # doctest: +SKIP
"""
from __future__ import annotations

import tracing
import vlog
from runtime import _checks as checks
from runtime.api import NnError, ResultCode, from_hal_error
from runtime.hal.errors import HalError
from runtime.hal.types import Operand
from runtime.memory import PROT_READ_WRITE, Memory
from runtime.memory_desc import MemoryDesc
from tracing import Phase


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
    from runtime.drivers.ipc import buffer_client  # noqa: PLC0415 - only with a driver allocator

    roles = [(prepared, kind, index, frequency)
             for prepared, _, kind, index, frequency in desc.step_roles]
    try:
        ibuffer = buffer_client.allocate(desc.allocator, desc.dimensions, roles)
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
            from runtime.drivers.ipc.shm import SharedPool  # noqa: PLC0415

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
