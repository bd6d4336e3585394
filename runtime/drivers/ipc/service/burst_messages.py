"""Driver side of the burst socket messages (AOSP ``IPreparedModel.configureExecutionBurst``,
``IBurstCallback.getMemories`` answers, ``IBurstContext.freeMemory`` and release), routed by
``DriverService``; the listener thread that serves the rings is :mod:`burst` (``service.burst``).

Each burst is charged :data:`~runtime.drivers.ipc.service.burst.BURST_FDS` fds to its client's share and counted
against the per-connection, per-client and driver-wide caps; beyond them the call gets
RESOURCE_EXHAUSTED_TRANSIENT.

Example::

    configure(service, connection, message)   # CONFIGURE_BURST -> burst id, thread started
    free_memory(service, connection, message) # BURST_FREE_MEMORY(burst id, slot)
"""
from __future__ import annotations

import os

from nnscope import vlog
from nnscope.runtime.drivers.ipc.service.burst import (_EXHAUSTED, _LABEL, _U32, BURST_FDS, MAX_BURSTS_PER_CLIENT,
                                               MAX_BURSTS_PER_CONNECTION, MAX_BURSTS_TOTAL, MAX_POLL_US,
                                               MAX_SLOTS, BurstServer)
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK
from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel
from nnscope.runtime.drivers.ipc.wire.fmq_datum import max_request_bytes
from nnscope.runtime.hal.shared_memory import map_fd
from nnscope.runtime.drivers.ipc.wire.transport import close_fds
from nnscope.runtime.drivers.ipc.wire.layouts import BURST_MEMORY as _MEMORY
from nnscope.runtime.hal.errors import HalError



def configure(service, connection, message) -> bytes:
    """configureExecutionBurst(model id, polling window in us) with six fds: the request and the
    result FMQ."""
    r = Reader(message.payload)
    model_id, poll_us = r.u32(), r.u32()
    r.end()
    if poll_us > MAX_POLL_US:
        raise CodecError(f"polling window of {poll_us} us exceeds {MAX_POLL_US} us")
    prepared = connection.client.models.get(model_id)
    if prepared is None:
        raise CodecError(f"unknown prepared model {model_id}")
    if len(message.fds) != 6:
        raise CodecError(f"configureExecutionBurst needs 6 fds (two FMQs), {len(message.fds)} were sent")
    client = connection.client
    if len(connection.bursts) >= MAX_BURSTS_PER_CONNECTION or client.bursts >= MAX_BURSTS_PER_CLIENT \
            or service.bursts_open >= MAX_BURSTS_TOTAL or not service.budget.take_for(client, BURST_FDS):
        raise HalError(_EXHAUSTED, f"burst limit reached: {len(connection.bursts)} on this connection, "
                       f"{client.bursts} for this client, {service.bursts_open} in all, {client.pools} "
                       f"fds held (release some first)")
    channels: tuple = ()
    try:
        channels = _attach(message.fds, max_request_bytes(prepared.model, MAX_SLOTS))
        burst = BurstServer(service, client, service.next_burst_id + 1, prepared, channels,
                            poll_us / 1e6)
    except BaseException:
        for channel in channels:
            channel.close()
        service.budget.give_for(client, BURST_FDS)
        raise
    service.next_burst_id += 1
    service.clients.hold(prepared)
    client.bursts += 1
    service.bursts_open += 1
    burst.start()
    connection.bursts[burst.burst_id] = burst
    vlog.log("driver", _LABEL, "configureExecutionBurst: burst %d of model %d", burst.burst_id, model_id)
    return _OK + _U32.pack(burst.burst_id)


def _attach(fds: list, max_request: int) -> tuple:
    """The request and result rings on copies of ``fds``; every copy is closed if one fails
    (a failing ``attach`` closes its own three)."""
    ring, other = os.fstat(fds[0]), os.fstat(fds[3])
    if (ring.st_dev, ring.st_ino) == (other.st_dev, other.st_ino):
        raise CodecError("the request and result FMQs are one file (the listener would feed itself)")
    copies: list = []
    try:
        copies.extend(os.dup(fd) for fd in fds)
        requests = FmqChannel.attach(*copies[:3], max_message=max_request)
    except BaseException:
        close_fds(copies[3:] if len(copies) == 6 else copies)
        raise
    try:
        return requests, FmqChannel.attach(*copies[3:])
    except BaseException:
        requests.close()
        raise


def memories(service, connection, message) -> bytes:
    """The runtime's answer to getMemories: (burst id, count, count x (slot, offset, size)) and
    one fd per slot; the slots must be exactly those asked for. Count 0: it has none of them."""
    r = Reader(message.payload)
    burst = _burst(connection, r.u32())
    entries = [r.take(_MEMORY) for _ in range(r.count(_MEMORY.size))]
    r.end()
    if burst.asked is None:
        raise CodecError(f"burst {burst.burst_id} asked for no memories")
    if entries and (tuple(slot for slot, _, _ in entries) != burst.asked or len(message.fds) != len(entries)):
        burst.deliver(None)
        raise CodecError(f"getMemories answer does not match the slots asked for {burst.asked}")
    try:
        burst.deliver(_map(service, connection.client, entries, message.fds) if entries else None)
    except BaseException:
        burst.deliver(None)
        raise
    return _OK


def _map(service, client, entries: list, fds: list) -> dict:
    if not service.budget.take_for(client, len(entries)):
        raise HalError(_EXHAUSTED, "too many pools mapped for this client")
    regions = {}
    try:
        for (slot, offset, size), fd in zip(entries, fds):
            regions[slot] = map_fd(fd, offset, size)
    except BaseException:
        for region in regions.values():
            region.close()
        service.budget.give_for(client, len(entries))
        raise
    return regions


def free_memory(service, connection, message) -> bytes:
    """IBurstContext.freeMemory(burst id, slot)."""
    r = Reader(message.payload)
    burst = _burst(connection, r.u32())
    slot = r.u32()
    r.end()
    with service.exec_lock:
        burst.free_slot(slot)
    return _OK


def release(service, connection, message) -> bytes:
    """The runtime dropped its burst (IBurstContext's last reference)."""
    r = Reader(message.payload)
    burst = _burst(connection, r.u32())
    r.end()
    del connection.bursts[burst.burst_id]
    burst.stop()
    return _OK


def _burst(connection, burst_id: int) -> BurstServer:
    burst = connection.bursts.get(burst_id)
    if burst is None:
        raise CodecError(f"unknown burst {burst_id}")
    return burst
