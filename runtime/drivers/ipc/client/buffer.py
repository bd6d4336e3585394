"""Runtime side of memory domains: ``IDevice::allocate`` and the ``IBuffer`` proxy.

:func:`allocate` asks a driver process for a buffer playing the given roles of its prepared
models and returns a :class:`RemoteBuffer` naming it by token. Executions pass only that token
(``encoder`` sends pools with an ``ibuffer_token`` as ``KIND_TOKEN``); :meth:`RemoteBuffer.copy_to`
and :meth:`RemoteBuffer.copy_from` move its bytes through real shared memory: the caller's own
memfd when the driver may map it, else a sealed staging memfd. Wire formats: ``service.buffers`` and ``wire.layouts``.

Example::

    buffer = allocate(device, (2, 4), [(prepared, "output", 0, 1.0)])
    buffer.copy_from(memory, (2, 4)); buffer.copy_to(other_memory); buffer.release()
"""
from __future__ import annotations


from nnscope.runtime.drivers.ipc.client._reply import release_on_driver
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.codec import Writer
from nnscope.runtime.hal.shared_memory import is_shared, pool_bytes
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.shared_memory import SharedPool
from nnscope.runtime.drivers.ipc.wire.layouts import BUFFER_REGION as _REGION, BUFFER_ROLE as _ROLE



def allocate(device, dimensions, roles) -> RemoteBuffer:
    """IDevice::allocate on ``device`` (a ``RemoteDevice``). ``roles`` are
    ``(prepared model, "input"|"output", io index, frequency)`` with prepared models of this
    device. Raises HalError with the driver's status."""
    models: list = []
    for prepared, *_ in roles:
        if prepared not in models:
            models.append(prepared)
    w = Writer()
    w.u32s(dimensions)
    w.u32s([prepared.model_id for prepared in models])
    for kind in ("input", "output"):
        mine = [role for role in roles if role[1] == kind]
        w.u32(len(mine))
        for prepared, _, index, frequency in mine:
            w.parts.append(_ROLE.pack(models.index(prepared), index, frequency))
    r = device.call(MsgType.ALLOCATE, Phase.COMPILATION, w.getvalue())
    token, size = r.u32(), r.u64()
    return RemoteBuffer(device, token, size)


class RemoteBuffer:
    """IBuffer: ``size`` bytes in the driver process ``device``, named by ``token``."""

    def __init__(self, device, token: int, size: int):
        self.device = device
        self.token = token
        self.size = size
        self.released = False

    def copy_to(self, pool) -> None:
        """IBuffer::copyTo: the buffer's bytes into ``pool`` (``size`` bytes; a Memory or any
        writable buffer). Raises HalError (GENERAL_FAILURE for an uninitialised buffer)."""
        shared, staging = _shared(pool, self.size)
        try:
            self._send(MsgType.BUFFER_COPY_TO, shared, b"")
            if staging is not None:
                pool_bytes(pool)[:] = staging.view
        finally:
            if staging is not None:
                staging.close()

    def copy_from(self, pool, dimensions) -> None:
        """IBuffer::copyFrom: ``pool``'s bytes (and their ``dimensions``) into the buffer."""
        shared, staging = _shared(pool, self.size)
        try:
            if staging is not None:
                staging.view[:] = pool_bytes(pool)
            w = Writer()
            w.u32s(dimensions)
            self._send(MsgType.BUFFER_COPY_FROM, shared, w.getvalue())
        finally:
            if staging is not None:
                staging.close()

    def _send(self, msg_type: MsgType, shared, tail: bytes) -> None:
        head = _REGION.pack(self.token, shared.offset, self.size)
        self.device.call(msg_type, Phase.EXECUTION, head + tail, [shared.fd])

    def release(self) -> None:
        """Drop the driver's buffer (idempotent; a dead driver took it with it)."""
        if self.released:
            return
        self.released = True
        release_on_driver(self.device, MsgType.BUFFER_FREE, self.token)


def _shared(pool, size: int):
    """(what the driver maps, the staging pool to close or None)."""
    if is_shared(pool) and pool.size == size:
        return pool, None
    staging = SharedPool(size, "nnscope-ibuffer-copy")
    return staging, staging

