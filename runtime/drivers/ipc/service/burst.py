"""Driver side of bursts (AOSP ``ExecutionBurstServer``): one listener thread per burst.

``IPreparedModel.configureExecutionBurst`` arrives over the socket with the six fds of two FMQs
(:mod:`runtime.drivers.ipc.wire.fmq`): requests from the runtime, results back to it. The listener
thread reads each request (an ``FmqRequestDatum`` sequence, validated by
:func:`~runtime.drivers.ipc.wire.fmq_datum.decode_request`), maps the pools of slots it has not cached
by asking the runtime (``IBurstCallback.getMemories``: a message on the result channel, answered
over the socket with the fds), runs the prepared model on the cached pools and writes the
``FmqResultDatum`` sequence; between requests it watches the ring for the polling window the
runtime asked for (AOSP's burst server polls too; 0 for low power), then sleeps on the wake-up.
A request whose bytes repeat the previous one (its slots not freed since) runs the same HAL
``Request`` object, so the prepared model's binding (validation, numpy views) is reused; with
``cpuexe`` vlog off, it runs the model's *bound run* (``CpuPreparedModel.bound_run``, the driver's
one repeat path, with the accounting and, traced, the spans of ``execute``) and answers the
result datum of the same success, decoding nothing. Traced or not, a frame runs the same way. Pools stay mapped per slot until
``IBurstContext.freeMemory(slot)``, the burst's release, or its connection closing. An echo
message (:data:`~runtime.drivers.ipc.wire.fmq_datum.ECHO`, not AOSP's) is written back unchanged: its
round trip is the channel's floor, timed on the burst's own rings and thread.

A malformed message gets an INVALID_ARGUMENT result and the thread goes on; a ring whose shared
indices are broken ends the burst. Each frame takes the execution lock through the scheduler
(``Scheduler.exclusive``), ranked by its model's priority among its client's executions.

The socket messages that configure, feed and release a burst (``configureExecutionBurst``,
``IBurstCallback.getMemories`` answers, ``IBurstContext.freeMemory`` and release) are
handled here too, routed by ``DriverService``. Each burst is charged :data:`BURST_FDS` fds to its
client's share and counted against the per-connection, per-client and driver-wide caps; beyond
them the call gets RESOURCE_EXHAUSTED_TRANSIENT.

Example (``DriverService`` routes the messages here)::

    configure(service, connection, message)   # CONFIGURE_BURST -> burst id, listener started
    free_memory(service, connection, message) # BURST_FREE_MEMORY(burst id, slot)
"""
from __future__ import annotations

import logging
import os
import queue
import struct
import threading
import time

from nnscope import vlog
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.service.execute import with_driver_time
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK
from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel, FmqCorrupt, FmqError
from nnscope.runtime.drivers.ipc.wire.fmq_datum import (ECHO, decode_request, encode_memory_request,
                                                encode_result, is_echo, max_request_bytes, split_trace)
from nnscope.runtime.drivers.ipc.wire.layouts import BURST_MEMORY as _MEMORY
from nnscope.runtime.hal.shared_memory import map_fd
from nnscope.runtime.hal.sync_fence import close_fds
from nnscope.runtime.hal.device_types import ExecutionResult, Request
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus

#: Bursts one connection and one client process may hold at once, and pool slots one burst
#: may keep mapped.
MAX_BURSTS_PER_CONNECTION = 64
MAX_BURSTS_TOTAL = 256  # each one a listener thread
MAX_BURSTS_PER_CLIENT = MAX_BURSTS_TOTAL // 4
MAX_SLOTS = 1024
#: fds one burst holds (two rings of three, its stop eventfd), charged to its client's fd share.
BURST_FDS = 7
#: Seconds the serve loop waits for a stopped listener; a later pass reaps it (``reap``).
STOP_JOIN_S = 0.2
#: Longest polling window a runtime may ask the listener for (microseconds).
MAX_POLL_US = 1000
#: Seconds the listener waits for the runtime's getMemories answer, or to write a result.
CALLBACK_TIMEOUT_S = 30.0
_U32 = struct.Struct("<I")
_LABEL = "ExecutionBurstServer"
_INVALID = encode_result(ExecutionResult(ErrorStatus.INVALID_ARGUMENT))
_EXHAUSTED = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
_NO_FAST = (None, None, None)
_warn = logging.getLogger("nn.SampleDriver").warning


class BurstServer:
    """One burst of one prepared model on one connection; see the module docstring."""

    def __init__(self, service, client, burst_id: int, prepared, channels: tuple, poll_s: float = 0.0):
        self.service = service
        self.poll_s = poll_s  # how long the listener watches the ring before it sleeps
        self.client = client
        self.burst_id = burst_id
        self.prepared = prepared
        self.priority = prepared.priority
        self.requests, self.results = channels
        self.slots: dict[int, object] = {}  # slot -> MappedRegion
        self.maps = 0  # pools mapped over the burst's life (each slot once until freed)
        self.asked: tuple | None = None  # slots of the getMemories call awaiting its answer
        self._answers: queue.SimpleQueue = queue.SimpleQueue()
        self._last: tuple = (None, None, False)  # (message, HAL Request, measure) of the last run
        self._encoded: tuple = (None, None)  # (ExecutionResult, its bytes)
        self._fast: tuple = _NO_FAST  # (message, the prepared model's bound run, reply): see _serve
        self._stop = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        self.stopping = False
        for channel in channels:
            channel.watch(self._stop)
        self.thread = threading.Thread(target=self._run, name=f"{_LABEL}-{burst_id}", daemon=True)

    # ------------------------------------------------------------------ listener thread
    def _run(self) -> None:
        try:
            self._listen()
        except Exception as error:  # noqa: BLE001 - a listener logs and ends, it never raises
            _warn("burst %d: listener ended: %s: %s", self.burst_id, type(error).__name__, error)

    def _listen(self) -> None:
        read, write, poll_s, serve = self.requests.read, self.results.write, self.poll_s, self._serve
        while not self.stopping:  # a peer that never lets the ring run dry still gets stopped
            try:
                message = read(poll_s=poll_s)
            except FmqCorrupt as error:
                self._log("burst %d: request ring broken (%s); burst ends", self.burst_id, error)
                return
            except FmqError:
                return  # stopped: released, or the connection closed
            if message.startswith(ECHO):
                reply = message if is_echo(message) else _INVALID
            else:
                reply = serve(message)
            try:
                write(reply, timeout=CALLBACK_TIMEOUT_S)
            except FmqError:
                return

    def _repeat(self, message: bytes) -> bytes | None:
        """The reply to a repeat of the last bound request (see :meth:`_answer`), run through
        its bound run; None for another message, with ``cpuexe`` vlog on (its lines come from
        the ordinary path), or when the run declined (it is dropped: the ordinary path reports,
        and binds again). ``_fast`` is only read and set under the execution lock, which
        freeMemory holds to drop it: a bound run never outlives a slot."""
        if vlog.is_on("cpuexe"):
            return None
        with self._exclusive():
            fast_message, run, reply = self._fast
            if message != fast_message:
                return None
            if run():
                return reply
            self._fast = _NO_FAST
        return None

    def _exclusive(self):
        """The execution lock for one frame, ranked by the model's priority among the client's
        executions (``Scheduler.exclusive``)."""
        return self.service.executions.scheduler.exclusive(self.client, self.priority)

    def _serve(self, message: bytes) -> bytes:
        """The reply to one request frame: its repeat, else the ordinary path; traced, inside
        the burst's server spans either way."""
        try:
            context, message = split_trace(message)
        except CodecError as error:
            self._log("burst %d: request rejected: %s", self.burst_id, error)
            return _INVALID
        if not _trace.enabled():
            return self._repeat(message) or self._answer(message)
        with _trace.adopt(context), _trace.hidl("IBurstContext", "executeBurst", "server"):
            with _trace.driver(Phase.EXECUTION, f"{_LABEL}::execute"):
                reply = self._repeat(message) or self._answer(message)
        _trace.flush_due()
        return reply

    def _answer(self, message: bytes) -> bytes:
        start = time.monotonic_ns()
        try:
            with self._exclusive():
                request, measure = self._request_for(message)
                result = self.prepared.execute(request, measure, None)
                if result.timing is not None:  # time in driver covers decoding too
                    result = with_driver_time(result, start)
                encoded = self._encode(result)
                if not measure and message != self._fast[0]:
                    run = self._bound_run(request, result)
                    self._fast = (message, run, encoded) if run is not None else _NO_FAST
        except (CodecError, HalError) as error:
            self._log("burst %d: request rejected: %s", self.burst_id, error)
            status = getattr(error, "status", ErrorStatus.INVALID_ARGUMENT)
            return _INVALID if status == ErrorStatus.INVALID_ARGUMENT else \
                encode_result(ExecutionResult(status))
        return encoded

    def _encode(self, result: ExecutionResult) -> bytes:
        """The result datums of ``result`` (the last ones again for the same object)."""
        last_result, encoded = self._encoded
        if result is not last_result:
            encoded = encode_result(result)
            self._encoded = (result, encoded)
        return encoded

    def _bound_run(self, request: Request, result: ExecutionResult):
        """What repeats this validated request (its slots mapped) while its message repeats
        (see :meth:`_repeat`): the prepared model's bound run after an untimed success, else
        None."""
        return self.prepared.bound_run(request, result)

    def _request_for(self, message: bytes) -> tuple[Request, bool]:
        """The HAL Request of a message (the previous one's object when the bytes repeat)."""
        last_message, request, measure = self._last
        if message == last_message:
            return request, measure
        burst = decode_request(message)
        missing = [slot for slot in burst.slots if slot not in self.slots]
        if missing:
            self._fetch(missing)
        pools = tuple(self.slots[slot].view for slot in burst.slots)
        request = Request(burst.inputs, burst.outputs, pools)
        self._last = (message, request, burst.measure_timing)
        return request, burst.measure_timing

    def _fetch(self, missing: list) -> None:
        """IBurstCallback.getMemories: ask the runtime for the pools of ``missing`` slots (the
        execution lock is released while waiting: the socket loop maps the answer)."""
        if len(self.slots) + len(missing) > MAX_SLOTS:
            raise HalError(_EXHAUSTED, f"burst would map more than {MAX_SLOTS} pools")
        self.asked = tuple(missing)
        self.service.exec_lock.release()
        try:
            self.results.write(encode_memory_request(missing), timeout=CALLBACK_TIMEOUT_S)
            regions = self._answers.get(timeout=CALLBACK_TIMEOUT_S)
        except (FmqError, queue.Empty):
            regions = None
        finally:
            self.service.exec_lock.acquire()
            self.asked = None
        if not regions:
            raise CodecError(f"getMemories({missing}) was not answered with their pools")
        self.slots.update(regions)
        self.maps += len(regions)
        self._log("burst %d: mapped slots %s", self.burst_id, sorted(regions))

    # ------------------------------------------------------------------ from the socket loop
    def deliver(self, regions: dict | None) -> None:
        self._answers.put(regions)

    def free_slot(self, slot: int) -> None:
        """IBurstContext.freeMemory: unmap ``slot`` (the caller holds the execution lock)."""
        region = self.slots.pop(slot, None)
        if region is None:
            raise CodecError(f"burst {self.burst_id} has no memory in slot {slot}")
        self._forget_binding()
        region.close()
        self.service.budget.give_for(self.client, 1)

    def start(self) -> None:
        try:
            self.thread.start()
        except RuntimeError as error:  # no thread to be had
            self._close()
            raise HalError(_EXHAUSTED, f"cannot start the burst's listener: {error}") from None

    def signal_stop(self) -> None:
        """Wake the listener to end (it ends at its next frame boundary)."""
        self.stopping = True
        os.eventfd_write(self._stop, 1)
        self._answers.put(None)

    def stop(self, wait_s: float = STOP_JOIN_S) -> None:
        """End the burst: wake the thread and join it for at most ``wait_s``, then unmap every
        slot and close the rings; a thread still running is left to :func:`reap`, which frees
        them once it ended (until then they stay charged to the client)."""
        self.signal_stop()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(wait_s)
        if self.thread.is_alive():
            self.service.ending_bursts.append(self)
            return
        self._close()

    def _close(self) -> None:
        self._forget_binding()
        for region in self.slots.values():
            region.close()
        self.service.budget.give_for(self.client, len(self.slots))
        self.slots.clear()
        for channel in (self.requests, self.results):
            channel.close()
        os.close(self._stop)
        self.service.budget.give_for(self.client, BURST_FDS)
        self.service.clients.let_go(self.prepared)
        self.client.bursts -= 1
        self.service.bursts_open -= 1

    def _forget_binding(self) -> None:
        """Drop the cached Request (and the prepared model's binding of it): its numpy views
        would keep freed pools mapped."""
        request = self._last[1]
        self._last = (None, None, False)
        self._fast = _NO_FAST
        if request is not None:
            self.prepared.forget(lambda cached: cached is request)

    def _log(self, fmt: str, *args) -> None:
        vlog.log("driver", _LABEL, fmt, *args)


def reap(service) -> None:
    """(The serve loop) close the stopped bursts whose listener has ended since."""
    ending = service.ending_bursts
    for burst in [b for b in ending if not b.thread.is_alive()]:
        ending.remove(burst)
        burst._close()


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
