"""Driver side of ``IPreparedModel.executeFenced`` and ``IFencedExecutionCallback``.

``EXECUTE_FENCED`` payload: ``wait count u32 | timeout_after_fence i64 (-1: none)`` followed by an
execute payload (``wire.execution_codec``); its fds are the ``wait_for`` fences first, then the execute's
pools. The launch is checked on the serve loop: fence count against the fds sent, every fence an
eventfd (:func:`sync_fence.is_eventfd`), no negative duration, the request decoded into a private
``DecodeState`` (nothing the connection frees later can unmap it) for a model of this client. Any
problem is INVALID_ARGUMENT, and the loop serves on. The work runs on a worker thread: wait for
every fence (bounded by the deadline), execute with the deadline cut to ``timeout_after_fence``
after the fences signalled, keep the status and both timings, then signal the sync fence (1 ok,
2 error). The reply, ``status u32 | callback id u32``, carries the sync fence fd (SCM_RIGHTS).

``FENCED_INFO`` (``getExecutionInfo``) payload ``callback id u32``; reply ``status u32 |
execution status u32 | launched on device, in driver u64 | fenced on device, in driver u64``
(microseconds, UINT64_MAX unknown) ``| message``. Asked before the fence signalled, it is
GENERAL_FAILURE: a client waits for the fence first.

Example (``DriverService`` does this)::

    fenced = FencedServer(service)
    fenced.execute(connection, message, start)        # EXECUTE_FENCED
    payload = fenced.info(connection, message, start)  # FENCED_INFO
"""
from __future__ import annotations

import collections
import os
import struct
import threading
import time

from nnscope import vlog
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.service._guard import PoolTable
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader, Writer
from nnscope.runtime.drivers.ipc.service.execute_decode import DecodeState, decode_execute
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType, pack_header
from nnscope.runtime.hal.sync_fence import ACTIVE, ERROR, is_eventfd, new_fence, signal, wait
from nnscope.runtime.drivers.ipc.wire.transport import PeerClosed, close_fds
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK, mark_failure
from nnscope.runtime.drivers.ipc.wire.layouts import FENCED_INFO, FENCED_LAUNCH
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.timing import UINT64_MAX, Timing

#: Most ``wait_for`` fences one executeFenced may carry.
MAX_WAIT_FENCES = 16
#: Fenced executions one connection may have running at once (RESOURCE_EXHAUSTED beyond).
MAX_RUNNING = 8
#: Fenced executions the whole driver may have running at once, and one client process.
MAX_RUNNING_TOTAL = 64
MAX_RUNNING_PER_CLIENT = MAX_RUNNING_TOTAL // 4
#: Finished callbacks kept per connection for getExecutionInfo (the oldest is forgotten).
MAX_KEPT = 64
#: How often (seconds) a worker waiting for fences checks that its client is still connected.
CLIENT_CHECK_S = 0.25
_NONE = ErrorStatus.NONE


class FencedJob:
    """One fenced execution: its wait fences, decoded request, sync fence and outcome."""

    def __init__(self, prepared, decoded, state: DecodeState, waits: list, duration_ns: int | None,
                 launched_ns: int, label: str, connection, scheduler, budget):
        self.prepared, self.decoded, self.state = prepared, decoded, state
        self.connection = connection  # a job whose client is gone stops waiting for its fences
        self.scheduler = scheduler  # its exclusive(): the execution lock, ranked by priority
        self.waits, self.duration_ns, self.launched_ns = waits, duration_ns, launched_ns
        self.label = label
        self.client, self.budget = connection.client, budget  # the waits and fence are charged
        self.fence = new_fence()  # signalled, then closed, by the worker (the client has a dup)
        try:
            self.reply_fd = os.dup(self.fence)  # the reply's copy, closed once sent
        except OSError:
            os.close(self.fence)
            raise
        self.done = False
        self.status, self.message = ErrorStatus.GENERAL_FAILURE, ""
        self.launched = self.fenced = None  # Timing when measured
        self.context: bytes | None = None  # the trace context of the executeFenced call

    def start(self) -> None:
        try:
            threading.Thread(target=self._run, name="nn-fenced", daemon=True).start()
        except RuntimeError as error:  # no thread to be had: the run fails, and its fence says so
            self.message = f"cannot start the fenced run: {error}"
            self._finish()

    def _run(self) -> None:
        try:
            with _trace.adopt(self.context):
                self.status, self.message = self._work()
        except Exception as error:  # noqa: BLE001 - a driver reports, it does not raise
            self.status, self.message = ErrorStatus.GENERAL_FAILURE, f"{type(error).__name__}: {error}"
        finally:
            self._finish()

    def _finish(self) -> None:
        """Give back what the run held, then signal and close the sync fence."""
        close_fds(self.waits)
        self._unbind()
        self.decoded = None  # a kept job must not keep its request's IBuffers alive
        self.state.close()  # its PoolTable gives the pools' fds back
        self.budget.give_for(self.client, len(self.waits) + 1)
        _trace.flush()  # before the fence: a client that saw it finds the spans written
        self.done = True
        signal(self.fence, self.status == _NONE)
        os.close(self.fence)

    def _unbind(self) -> None:
        """Make the model forget this job's request (as ``Connection._unbind``), so that closing
        the job's pools unmaps them now rather than at the model's next execution."""
        request = self.decoded.request
        self.prepared.forget(lambda cached: cached is request)

    def _work(self) -> tuple[ErrorStatus, str]:
        deadline = self.decoded.deadline_ns
        for position, fd in enumerate(self.waits):
            state = self._wait(fd, deadline)
            if state == ACTIVE:
                return (ErrorStatus.MISSED_DEADLINE_TRANSIENT,
                        f"deadline passed waiting for wait_for[{position}]")
            if state == ERROR:
                return ErrorStatus.GENERAL_FAILURE, f"wait_for[{position}] signalled an error"
            if state is None:
                return ErrorStatus.GENERAL_FAILURE, "the client disconnected before the fences signalled"
        fenced_ns = time.monotonic_ns()
        if self.duration_ns is not None:
            after = fenced_ns + self.duration_ns
            deadline = after if deadline is None else min(deadline, after)
        priority = self.prepared.priority
        with _trace.driver(Phase.EXECUTION, self.label), \
                self.scheduler.exclusive(self.connection.client, priority):
            result = self.prepared.execute(self.decoded.request, self.decoded.measure, deadline)
        if result.status != _NONE:
            return result.status, self.prepared.last_error or result.status.name
        if self.decoded.measure:
            self._time(result.timing, fenced_ns, time.monotonic_ns())
        return _NONE, ""

    def _wait(self, fd: int, deadline: int | None) -> str | None:
        """The fence's state: ACTIVE once the deadline passed, None once the client is gone."""
        while True:
            left = None if deadline is None else max(0.0, (deadline - time.monotonic_ns()) / 1e9)
            state = wait(fd, CLIENT_CHECK_S if left is None else min(left, CLIENT_CHECK_S))
            if state != ACTIVE or (deadline is not None and time.monotonic_ns() >= deadline):
                return state
            connection = self.connection
            if connection.dead or connection.channel.sock.fileno() < 0:
                return None

    def _time(self, timing, fenced_ns: int, end_ns: int) -> None:
        on_device = None if timing is None else timing.on_device
        floor = on_device or 0
        self.launched = Timing.from_us(on_device, max(floor, (end_ns - self.launched_ns) // 1000))
        self.fenced = Timing.from_us(on_device, max(floor, (end_ns - fenced_ns) // 1000))

    def info(self) -> bytes:
        launched, fenced = self.launched, self.fenced
        values = [UINT64_MAX] * 4
        if launched is not None:
            values = [launched.time_on_device, launched.time_in_driver,
                      fenced.time_on_device, fenced.time_in_driver]
        w = Writer()
        w.text(self.message[:2000])
        return _OK + FENCED_INFO.pack(int(self.status), *values) + w.getvalue()


class FencedServer:
    """The fenced executions of one ``DriverService``, per connection."""

    def __init__(self, service):
        self.service = service
        self.label = f"{service.label}::executeFenced"
        self._jobs: dict = {}  # Connection -> OrderedDict[callback id, FencedJob]
        self._running: list = []  # jobs launched and not yet done
        self._next_id = 0

    def execute(self, connection, message, start: int) -> None:
        """Launch one executeFenced and reply with its callback id and sync fence (or an error)."""
        with _trace.adopt(message.context), _trace.hidl("IPreparedModel", "executeFenced", "server"):
            with _trace.driver(Phase.EXECUTION, self.label):
                launched = self.service.guarded(self._launch, connection, message, start)
            mark_failure(launched)
        if isinstance(launched, FencedJob):
            launched.context = message.context  # its worker's spans belong to the same call
            callback_id = self._keep(connection, launched)
            if self.service.vlog_driver:
                vlog.log("driver", self.service.label, "executeFenced(%s): %d wait fences, callback %d",
                         self.service.device.name, len(launched.waits), callback_id)
            launched.start()
            send_with_fds(connection, REPLY | MsgType.EXECUTE_FENCED, message.request_id,
                          _OK + struct.pack("<I", callback_id), [launched.reply_fd])
        else:
            connection.send(REPLY | MsgType.EXECUTE_FENCED, message.request_id, launched)
        _trace.flush()

    def _launch(self, connection, message, start: int) -> FencedJob:
        r = Reader(message.payload)
        wait_count, duration = r.take(FENCED_LAUNCH)
        fds = message.fds
        if wait_count > MAX_WAIT_FENCES:
            raise CodecError(f"{wait_count} wait_for fences; at most {MAX_WAIT_FENCES}")
        if wait_count > len(fds):
            raise CodecError(f"{wait_count} wait_for fences declared, {len(fds)} fds sent")
        if duration < -1:
            raise CodecError(f"negative timeout_after_fence {duration}")
        for position, fd in enumerate(fds[:wait_count]):
            if not is_eventfd(fd):
                raise CodecError(f"wait_for[{position}] is not a sync fence (an eventfd)")
        self._check_room(connection)
        budget, client = self.service.budget, connection.client
        if not budget.take_for(client, wait_count + 1):
            raise HalError(ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
                           f"this client holds {client.pools} fds (release some first)")
        state, waits = DecodeState(), []
        state.pools = PoolTable(budget, client)  # the job's pools are charged as the connection's
        try:
            decoded = decode_execute(r, state, fds[wait_count:])
            prepared = client.models.get(decoded.model_id)
            if prepared is None:
                raise CodecError(f"unknown prepared model {decoded.model_id}")
            for fd in fds[:wait_count]:
                waits.append(os.dup(fd))
            job = FencedJob(prepared, decoded, state, waits, None if duration < 0 else duration, start,
                            self.label, connection, self.service.executions.scheduler, budget)
        except BaseException:
            state.close()
            close_fds(waits)
            budget.give_for(client, wait_count + 1)
            raise
        self._running.append(job)
        return job

    def busy(self) -> bool:
        """Whether a fenced run is launched and not done yet."""
        return any(not job.done for job in self._running)

    def _check_room(self, connection) -> None:
        """RESOURCE_EXHAUSTED beyond the running runs of one connection, of its client process
        (a fair share) or of the driver."""
        self._running = running = [job for job in self._running if not job.done]
        on_connection = sum(job.connection is connection for job in running)
        of_client = sum(job.client is connection.client for job in running)
        if on_connection >= MAX_RUNNING or of_client >= MAX_RUNNING_PER_CLIENT or \
                len(running) >= MAX_RUNNING_TOTAL:
            raise HalError(ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
                           f"fenced executions running: {on_connection} on this connection (at most "
                           f"{MAX_RUNNING}), {of_client} of this client ({MAX_RUNNING_PER_CLIENT}), "
                           f"{len(running)} in all ({MAX_RUNNING_TOTAL})")

    def info(self, connection, message, start: int) -> bytes:
        """getExecutionInfo of a callback this connection launched."""
        r = Reader(message.payload)
        callback_id = r.u32()
        r.end()
        job = self._jobs_of(connection).get(callback_id)
        if job is None:
            raise CodecError(f"unknown fenced execution callback {callback_id}")
        if not job.done:
            raise HalError(ErrorStatus.GENERAL_FAILURE,
                           "the fenced execution is still running: wait for its sync fence first")
        return job.info()

    def _jobs_of(self, connection) -> collections.OrderedDict:
        jobs = self._jobs.get(connection)
        if jobs is None:
            for gone in [c for c in self._jobs if c.dead or c.channel.sock.fileno() < 0]:
                del self._jobs[gone]
            jobs = self._jobs[connection] = collections.OrderedDict()
        return jobs

    def _keep(self, connection, job: FencedJob) -> int:
        jobs = self._jobs_of(connection)
        self._next_id = callback_id = (self._next_id + 1) & 0xFFFFFFFF or 1
        jobs[callback_id] = job
        for old_id in [i for i, old in jobs.items() if old.done][:max(0, len(jobs) - MAX_KEPT)]:
            del jobs[old_id]
        return callback_id


def send_with_fds(connection, msg_type: int, request_id: int, payload: bytes, fds: list) -> None:
    """Send a small reply carrying ``fds`` (closed once sent or dropped) without blocking, queued
    behind what the peer has not taken yet (the serve loop's output queue)."""
    pending = (pack_header(msg_type, request_id, len(payload)) + payload, fds)
    if connection.dead:
        close_fds(fds)
        return
    if connection.outbox:
        connection.outbox.append(pending)
        return
    try:
        sent = connection.channel.send_pending(pending)
    except (PeerClosed, OSError):
        connection.dead = True
        close_fds(fds)
        return
    if not sent:
        connection.outbox = collections.deque([pending])
        connection.stuck_since = time.monotonic()
