"""Driver side of memory domains (HAL 1.3 ``IDevice::allocate`` and ``IBuffer``).

``ALLOCATE`` names prepared models of the calling client and the roles (input or output index
of each, with a frequency) one memory will play; the driver checks them as AOSP's
``validateMemoryDesc`` does (known models of this client, indexes in range, frequency in
(0, 1], no role twice, one operand type, compatible and fully known dimensions), allocates the
tensor in its own memory and answers a token. Executions then name the buffer by token (pool
kind ``KIND_TOKEN`` of ``execution_codec``): the prepared model reads and writes it in place,
nothing travels. :func:`check_request` refuses a buffer used by a model or argument outside
its roles (INVALID_ARGUMENT) and reading one never written (GENERAL_FAILURE, as VTS expects);
:func:`mark_outputs` makes the outputs initialised after a success and uninitialised after a
failure. ``copyTo``/``copyFrom`` move the bytes through a sealed memfd the runtime sends.
Every token is checked against its owner: another client's token is INVALID_ARGUMENT.

Each copy runs in the driver span ``[NN_LD_PE]SampleDriver::copyTo`` / ``::copyFrom`` and,
with ``NN_VLOG=driver``, logs ``IBuffer::copyTo(token 3): 64 bytes`` under ``SampleDriver``.

Wire formats (after the 16-byte header)::

    ALLOCATE     dims u32s | model ids u32s | input roles | output roles
                 (roles: count u32, then per role model position u32, io index u32, frequency f64)
      reply      status u32 | token u32 | size u64
    COPY_TO      token u32 | offset u64 | size u64               + the destination memfd
    COPY_FROM    token u32 | offset u64 | size u64 | dims u32s   + the source memfd
    FREE         token u32
"""
from __future__ import annotations

import math
import mmap
import struct

from nnscope import vlog
from nnscope.runtime.drivers.ipc.service import _guard
from nnscope.runtime.drivers.memory_budget import Activity
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.shared_memory import map_fd
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK
from nnscope.runtime.drivers.ipc.wire.layouts import BUFFER_REGION as _REGION, BUFFER_ROLE as _ROLE
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, Operand, is_scalar
from nnscope.runtime.hal.validate import merge_dimensions

#: Buffers one client may hold, and the bytes of one buffer and of all of a client's buffers.
MAX_BUFFERS_PER_CLIENT = 256
MAX_BUFFER_BYTES = 256 * 1024 * 1024
MAX_CLIENT_BYTES = 1024 * 1024 * 1024
MAX_ROLES = 256
_INPUT, _OUTPUT = "input", "output"
_LABEL = "SampleDriver"
#: What an IBuffer's charge in the driver's memory budget is named after (refusals, spans).
ALLOCATE = Activity("allocate", Phase.COMPILATION)
PHASES = {MsgType.ALLOCATE: Phase.COMPILATION, MsgType.BUFFER_COPY_TO: Phase.EXECUTION,
          MsgType.BUFFER_COPY_FROM: Phase.EXECUTION, MsgType.BUFFER_FREE: Phase.TERMINATION}
#: Messages that are no HAL method (no ``HIDL::...::server`` mark; see ``driver_service``).
LIFECYCLE = frozenset({MsgType.BUFFER_FREE})


def _invalid(message: str) -> HalError:
    return HalError(ErrorStatus.INVALID_ARGUMENT, message)


class DeviceBuffer:
    """One IBuffer: the tensor's bytes in this process (anonymous pages that cost nothing until
    written), its owner, operand, roles and charge in the driver's memory budget."""

    __slots__ = ("token", "owner", "data", "operand", "roles", "initialized", "charge")

    def __init__(self, token: int, owner, operand: Operand, roles: frozenset, charge=None):
        self.token = token
        self.owner = owner
        self.operand = operand
        self.data = mmap.mmap(-1, operand.byte_size(), mmap.MAP_PRIVATE)  # zero until written
        self.roles = roles  # {(prepared model, "input"|"output", index)}
        self.initialized = False
        self.charge = charge  # memory_budget.Charge, released when the buffer goes

    def release(self) -> None:
        if self.charge is not None:
            self.charge.release()


class BufferTracker:
    """The driver's buffers by token (AOSP ``BufferTracker``); tokens are never reused."""

    def __init__(self) -> None:
        self.buffers: dict[int, DeviceBuffer] = {}
        self._next = 1

    def add(self, owner, operand: Operand, roles: frozenset, memory=None) -> DeviceBuffer:
        """A new buffer of ``owner``, charged to ``memory`` (the device's ``MemoryBudget``)."""
        mine = [b for b in self.buffers.values() if b.owner is owner]
        size = operand.byte_size()
        if len(mine) >= MAX_BUFFERS_PER_CLIENT or \
                sum(len(b.data) for b in mine) + size > MAX_CLIENT_BYTES:
            raise HalError(ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
                           "allocate: this client holds too many buffers (free some first)")
        charge = None if memory is None else memory.reserve(size, ALLOCATE)
        token, self._next = self._next, self._next + 1
        try:
            buffer = self.buffers[token] = DeviceBuffer(token, owner, operand, roles, charge)
        except BaseException:
            if charge is not None:
                charge.release()
            raise
        return buffer

    def remove(self, token: int, let_go=lambda prepared: None) -> None:
        """Drop buffer ``token``: its charge, and (``let_go``) its hold on its roles' models."""
        buffer = self.buffers.pop(token)
        buffer.release()
        for prepared in {role[0] for role in buffer.roles}:
            let_go(prepared)

    def get(self, token: int, owner) -> DeviceBuffer:
        """The buffer ``token`` of ``owner``; CodecError (INVALID_ARGUMENT) otherwise."""
        buffer = self.buffers.get(token)
        if buffer is None or buffer.owner is not owner:
            raise CodecError(f"unknown buffer token {token}")
        return buffer

    def sweep(self, let_go=lambda prepared: None) -> None:
        """Drop the buffers of client processes that have exited."""
        for token, buffer in list(self.buffers.items()):
            client = buffer.owner
            if client.connections <= 0 and (not client.id.start_time or
                                            _guard.start_time(client.id.pid) != client.id.start_time):
                self.remove(token, let_go)


TRACKER = BufferTracker()


def lookup(token: int, owner) -> DeviceBuffer:
    """For ``execution_codec``: the buffer a request pool names by token."""
    return TRACKER.get(token, owner)


def routes(service) -> dict:
    """Socket handlers for ``DriverService``, keyed by message type."""
    return {MsgType.ALLOCATE: lambda c, m, s: allocate(service, c, m),
            MsgType.BUFFER_COPY_TO: lambda c, m, s: copy_to(service, c, m),
            MsgType.BUFFER_COPY_FROM: lambda c, m, s: copy_from(service, c, m),
            MsgType.BUFFER_FREE: lambda c, m, s: free(service, c, m)}


# ---------------------------------------------------------------------- IDevice.allocate
def allocate(service, connection, message) -> bytes:
    if message.fds:
        raise CodecError("allocate carries no file descriptors")
    r = Reader(message.payload)
    dims = r.u32s()
    model_ids = r.u32s()
    roles = [_read_roles(r, _INPUT), _read_roles(r, _OUTPUT)]
    r.end()
    if len(dims) > _guard.MAX_RANK or len(model_ids) > MAX_ROLES:
        raise CodecError(f"allocate: rank {len(dims)} or {len(model_ids)} models over the limits "
                         f"({_guard.MAX_RANK}, {MAX_ROLES})")
    models = [_model(connection.client, model_id) for model_id in model_ids]
    operand, role_set = _check_roles(models, roles[0] + roles[1])
    merged = _merge(operand, dims, "the given dimensions")
    operand = Operand(operand.type, merged, operand.scale, operand.zero_point,
                      channel_quant=operand.channel_quant)
    size = operand.byte_size()
    if not size:
        raise _invalid(f"allocate: dimensions {list(merged)} are not fully specified")
    if size > MAX_BUFFER_BYTES:
        raise _invalid(f"allocate: {size} bytes exceed the {MAX_BUFFER_BYTES}-byte limit")
    TRACKER.sweep(service.clients.let_go)
    buffer = TRACKER.add(connection.client, operand, role_set, service.device.memory)
    for prepared in {role[0] for role in role_set}:  # a model outlives its release while used
        service.clients.hold(prepared)
    if service.vlog_driver:
        vlog.log("driver", _LABEL, "allocate(%s): token %d, %s %s, %d bytes, %d role(s)",
                 service.device.name, buffer.token, operand.type.name, list(merged), size, len(role_set))
    return _OK + struct.pack("<IQ", buffer.token, size)


def _read_roles(r: Reader, kind: str) -> list:
    count = r.count(_ROLE.size)
    if count > MAX_ROLES:
        raise CodecError(f"{count} {kind} roles, at most {MAX_ROLES}")
    return [(kind, *r.take(_ROLE)) for _ in range(count)]


def _model(client, model_id: int):
    prepared = client.models.get(model_id)
    if prepared is None or prepared.model is None:
        raise CodecError(f"allocate: unknown prepared model {model_id}")
    return prepared


def _check_roles(models: list, roles: list) -> tuple[Operand, frozenset]:
    """The operand all roles share and the role set; INVALID_ARGUMENT for a bad role."""
    if not roles:
        raise _invalid("allocate: no roles")
    seen, operand = set(), None
    for kind, position, index, frequency in roles:
        if position >= len(models):
            raise _invalid(f"allocate: {kind} role names model {position} of {len(models)}")
        prepared = models[position]
        graph = prepared.model.main
        indexes = graph.input_indexes if kind == _INPUT else graph.output_indexes
        if index >= len(indexes):
            raise _invalid(f"allocate: {kind} index {index} out of range ({len(indexes)})")
        if not (math.isfinite(frequency) and 0.0 < frequency <= 1.0):
            raise _invalid(f"allocate: frequency {frequency} outside (0, 1]")
        key = (prepared, kind, index)
        if key in seen:
            raise _invalid(f"allocate: {kind} {index} of model {position} given twice")
        seen.add(key)
        role_operand = graph.operands[indexes[index]]
        operand = role_operand if operand is None else _compatible(operand, role_operand)
    return operand, frozenset(seen)


def _compatible(have: Operand, other: Operand) -> Operand:
    if (have.type, have.scale, have.zero_point, have.channel_quant) != \
            (other.type, other.scale, other.zero_point, other.channel_quant):
        raise _invalid("allocate: roles of incompatible operand types")
    merged = _merge(have, other.dimensions, "the roles' dimensions")
    return Operand(have.type, merged, have.scale, have.zero_point, channel_quant=have.channel_quant)


def _merge(operand: Operand, dims, what: str) -> tuple:
    if is_scalar(operand.type) and dims:
        raise _invalid(f"allocate: a scalar takes no dimensions, got {list(dims)}")
    merged = merge_dimensions(operand.dimensions, dims)
    if merged is None:
        raise _invalid(f"allocate: {what} {list(dims)} do not match {list(operand.dimensions)}")
    return merged


# ---------------------------------------------------------------------- IBuffer
def copy_to(service, connection, message) -> bytes:
    """IBuffer::copyTo: the buffer's bytes into the runtime's shared memory."""
    r = Reader(message.payload)
    buffer, region = _region(r, connection, message.fds)
    r.end()
    try:
        if not buffer.initialized:
            raise HalError(ErrorStatus.GENERAL_FAILURE, f"copyTo: buffer {buffer.token} is uninitialised")
        region.view[:] = buffer.data
    finally:
        region.close()
    _log(service, "copyTo", buffer)
    return _OK


def copy_from(service, connection, message) -> bytes:
    """IBuffer::copyFrom: the runtime's shared memory into the buffer; a failed copy leaves it
    uninitialised."""
    r = Reader(message.payload)
    buffer, region = _region(r, connection, message.fds)
    try:
        dims = r.u32s()
        r.end()
        buffer.initialized = False
        if merge_dimensions(buffer.operand.dimensions, dims) != buffer.operand.dimensions:
            raise _invalid(f"copyFrom: dimensions {list(dims)} do not match "
                           f"{list(buffer.operand.dimensions)}")
        buffer.data[:] = region.view
        buffer.initialized = True
    finally:
        region.close()
    _log(service, "copyFrom", buffer)
    return _OK


def _region(r: Reader, connection, fds: list):
    token, offset, size = r.take(_REGION)
    if len(fds) != 1:
        raise CodecError(f"an IBuffer copy carries one memfd, {len(fds)} were sent")
    buffer = TRACKER.get(token, connection.client)
    if size != len(buffer.data):
        raise CodecError(f"memory of {size} bytes for buffer {token} of {len(buffer.data)} bytes")
    return buffer, map_fd(fds[0], offset, size)


def free(service, connection, message) -> bytes:
    r = Reader(message.payload)
    token = r.u32()
    r.end()
    TRACKER.get(token, connection.client)
    with service.exec_lock:  # no model runs (and reads its binding) meanwhile
        for holder in {connection, *service.connections_of(connection.client)}:
            holder.forget_requests()  # their cached requests would keep the freed memory alive
        _unbind_models(connection.client, TRACKER.buffers[token].data)
    TRACKER.remove(token, service.clients.let_go)
    return _OK


def _unbind_models(client, data) -> None:
    """Make the client's models forget the requests that name ``data`` (as ``Connection._unbind``)."""
    for prepared in client.models.values():
        prepared.forget(lambda request: any(pool is data for pool in request.pools))


def _log(service, method: str, buffer: DeviceBuffer) -> None:
    if service.vlog_driver:
        vlog.log("driver", _LABEL, "IBuffer::%s(token %d): %d bytes", method, buffer.token, len(buffer.data))


# ---------------------------------------------------------------------- executions
def check_request(prepared, request, tokens) -> None:
    """Every argument on a buffer pool is one of the buffer's roles for ``prepared``, covers the
    whole buffer with compatible dimensions, and reads only initialised buffers. A refused
    request is a failed execution: its output buffers become uninitialised."""
    try:
        _check_arguments(prepared, request, dict(tokens))
    except HalError:
        mark_outputs(request, tokens, False)
        raise


def _check_arguments(prepared, request, by_pool: dict) -> None:
    for kind, args in ((_INPUT, request.inputs), (_OUTPUT, request.outputs)):
        for index, arg in enumerate(args):
            buffer = by_pool.get(arg.pool_index)
            if buffer is None or arg.has_no_value:
                continue
            if (prepared, kind, index) not in buffer.roles:
                raise _invalid(f"{kind} {index}: buffer {buffer.token} has no such role for this model")
            if arg.offset or arg.length != len(buffer.data) or \
                    merge_dimensions(buffer.operand.dimensions, arg.dimensions) is None:
                raise _invalid(f"{kind} {index}: the argument does not match buffer {buffer.token}")
            if kind == _INPUT and not buffer.initialized:
                raise HalError(ErrorStatus.GENERAL_FAILURE,
                               f"input {index}: buffer {buffer.token} is uninitialised")


def mark_outputs(request, tokens, ok: bool) -> None:
    """Outputs on buffers are initialised after a success, uninitialised after a failure."""
    by_pool = dict(tokens)
    for arg in request.outputs:
        buffer = by_pool.get(arg.pool_index)
        if buffer is not None:
            buffer.initialized = ok
