"""Driver side of ``IPreparedModel.executeFenced`` and ``IFencedExecutionCallback``.

``EXECUTE_FENCED`` payload: ``wait count u32 | timeout_after_fence i64 (-1: none)`` followed by an
execute payload (``wire.execution_codec``); its fds are the ``wait_for`` fences first, then the execute's
pools. The launch is checked on the serve loop: fence count against the fds sent, every fence an
eventfd (:func:`sync_fence.is_eventfd`), no negative duration, the request decoded into a private
``DecodeState`` (nothing the connection frees later can unmap it) for a model of this client. Any
problem is INVALID_ARGUMENT, and the loop serves on. The reply, ``status u32 | callback id
u32``, carries the sync fence fd (SCM_RIGHTS).

``EXECUTE_FENCED_MEMO`` launches a memoized request (the partitioned plan's steps: their requests
name the step memory by pool id, so a launch carries no pool fds): ``wait count u32 |
timeout_after_fence i64 | watch us u32`` (``wire.layouts.FENCED_MEMO``), then an
``EXECUTE_SYNC_MEMO`` repeat; its fds are the ``wait_for`` fences, then the sync fence to signal:
the runtime's own eventfd, so that it can launch the next step, waiting for this one's fence,
without waiting for a reply. An untimed one is *quiet*: its fence is its answer, and it is
answered on the socket only when it fails (the error, as any refusal; a run that fails as it
launches, too); a timed one is answered ``status u32 | callback id u32`` (no fd) for
``getExecutionInfo``. A refused launch also fails
that fence. The memo must be this connection's and its model's, and not already launched
and pending.

A launched job is an event of the serve loop, never a thread: the fence it waits for is in this
server's epoll (:meth:`FencedServer.fileno`), which the loop polls with its connections (a
fence the epoll refuses, e.g. an epoll nested too deep, ends the job with INVALID_ARGUMENT). When
the fence signals, the job waits for the next one, or runs as an execution does: on the loop
when it is short or its client alone, else queued by priority (``service.scheduler``). Its
deadline cuts to ``timeout_after_fence`` after the fences; a job whose deadline passes while it
waits, or whose connection closes, ends with that error. The job keeps its status and both
timings, then signals its sync fence (1 ok, ``sync_fence.FAILED`` error). The serve loop never
waits on a fence: after an event it may look at the epoll without sleeping for the longest
``watch us`` of the waiting jobs (at most :data:`MAX_WATCH_S`; never on one CPU,
``sync_fence.usable_cpus``), then it sleeps until a little before a job's fence is expected
(its memo's ``sync_fence.ExpectedWait``: launches of a plan's steps come back to back, so the
wait of each repeats from one execution to the next) and looks through that window; a pass
that waited is a ``SampleDriver::syncWait`` span when traced.

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
import select
import struct
import threading
import time

from nnscope import vlog
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.service._guard import PoolTable
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader, Writer
from nnscope.runtime.drivers.ipc.service.execute import DecodeState, decode_execute, optional_ns
from nnscope.runtime.drivers.ipc.service.scheduler import Job
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType, pack_header
from nnscope.runtime.drivers.ipc.wire.transport import PeerClosed
from nnscope.runtime.hal.sync_fence import (ERROR, ExpectedWait, close_fds, fail, is_eventfd, is_fence, new_fence,
                                            signal, usable_cpus, wait)
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK, error_reply, mark_failure
from nnscope.runtime.drivers.ipc.wire.execution_codec import KNOWS_SHAPES, MEMO_HEAD
from nnscope.runtime.drivers.ipc.wire.layouts import FENCED_INFO, FENCED_LAUNCH, FENCED_MEMO
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.timing import UINT64_MAX, Timing

#: Most ``wait_for`` fences one executeFenced may carry.
MAX_WAIT_FENCES = 16
#: Fenced executions one connection may have launched and not done (RESOURCE_EXHAUSTED beyond).
MAX_RUNNING = 64
#: Fenced executions the whole driver may have launched and not done, and one client process.
MAX_RUNNING_TOTAL = 256
MAX_RUNNING_PER_CLIENT = MAX_RUNNING_TOTAL // 4
#: Finished callbacks kept per connection for getExecutionInfo (the oldest is forgotten).
MAX_KEPT = 64
#: Longest look at the fences before the serve loop sleeps in ``epoll`` (seconds).
MAX_WATCH_S = 0.002
_NONE = ErrorStatus.NONE
_ALL = "all"  # the live-job count of the whole driver
_U32 = struct.Struct("<I")
_MEMO_ID = _U32  # an execute payload's memo id, after its model id
_FENCED_MEMO = int(MsgType.EXECUTE_FENCED_MEMO)
_MEMO_LAUNCH_SIZE = FENCED_MEMO.size + MEMO_HEAD.size
_MEASURE_FLAGS = 1 | KNOWS_SHAPES


class FencedJob:
    """One fenced execution: its wait fences, request, sync fence and outcome. ``state``: the
    private decode state of a full launch (closed with the job), None for a memo's request
    (the connection's)."""

    def __init__(self, prepared, request, measure: bool, deadline_ns: int | None, waits: list,
                 duration_ns: int | None, launched_ns: int, label: str, connection, service,
                 state: DecodeState | None = None, watch_s: float = 0.0, memo=None,
                 fence: int | None = None):
        self.prepared, self.request, self.measure, self.deadline_ns = prepared, request, measure, deadline_ns
        self.state, self.memo, self.watch_s = state, memo, watch_s
        self.logging = service.vlog_cpuexe  # cpuexe vlog: the ordinary path logs each operation
        self.connection = connection  # a job whose connection closes stops waiting for its fences
        self.waits, self.duration_ns, self.launched_ns = waits, duration_ns, launched_ns
        self.position = 0  # waits[position] is the fence it waits for now
        self.look = None  # (from ns, until ns) the loop may look for its fences without sleeping
        self.fenced_ns = launched_ns  # when its last fence signalled
        self.label = label
        self.client, self.budget = connection.client, service.budget  # the waits and fence are charged
        self.done = False
        self.quiet = memo is not None and fence is not None and not measure  # answers by its fence
        self.reply_to: int | None = None  # the request id a quiet launch answers if it fails
        self.on_end = _nothing  # what the server counts when it ends
        self.status, self.message = ErrorStatus.GENERAL_FAILURE, ""
        self.launched = self.fenced = None  # Timing when measured
        self.context: bytes | None = None  # the trace context of the executeFenced call
        # signalled, then closed, as the job ends: the client's own (the reply carries none), or a
        # new one whose copy the reply carries (closed once sent)
        self.fence = os.dup(fence) if fence is not None else new_fence()
        try:
            self.reply_fd = None if fence is not None else os.dup(self.fence)
        except OSError:
            os.close(self.fence)
            raise

    def waiting_for(self) -> int | None:
        """The fence fd it waits for now (None: all signalled)."""
        return self.waits[self.position] if self.position < len(self.waits) else None

    def run(self) -> None:
        """Execute and report, once every fence signalled (the caller holds the execution lock)."""
        self.conclude(self.compute())

    def compute(self) -> tuple[ErrorStatus, str]:
        """Execute; ``(status, message)``. What the scheduler runs for a queued job."""
        try:
            with _trace.adopt(self.context):
                return self._work()
        except Exception as error:  # noqa: BLE001 - a driver reports, it does not raise
            return ErrorStatus.GENERAL_FAILURE, f"{type(error).__name__}: {error}"

    def conclude(self, outcome) -> None:
        """Record ``(status, message)`` (an Exception: GENERAL_FAILURE), then :meth:`finish`."""
        if isinstance(outcome, Exception):
            outcome = ErrorStatus.GENERAL_FAILURE, f"{type(outcome).__name__}: {outcome}"
        self.status, self.message = outcome
        if self.status != _NONE and self.reply_to is not None:  # a quiet launch that failed
            self.connection.send(REPLY | _FENCED_MEMO, self.reply_to,
                                 error_reply(self.status, self.message[:2000]))
        self.finish()

    def finish(self) -> None:
        """Signal and close the sync fence (the next step waits for it: first), then give back
        what the run held. The memo is free and the job done before the signal: a client that
        saw the fence may launch the memo again or ask for the job's info at once."""
        if self.memo is not None:
            self.memo.fenced = False
        self.done = True
        try:
            signal(self.fence, self.status == _NONE)
        except OSError:  # the client already failed the fence (it gave up on this run)
            pass
        os.close(self.fence)
        close_fds(self.waits)
        if self.state is not None:
            self._unbind()
            self.state.close()  # its PoolTable gives the pools' fds back
        self.request = self.memo = None  # a kept job must not keep its request's IBuffers alive
        self.budget.give_for(self.client, len(self.waits) + 1)
        self.on_end()
        _trace.flush_due()

    def _unbind(self) -> None:
        """Make the model forget this job's request (as ``Connection._unbind``), so that closing
        the job's pools unmaps them now rather than at the model's next execution."""
        request = self.request
        self.prepared.forget(lambda cached: cached is request)

    def _work(self) -> tuple[ErrorStatus, str]:
        deadline, fenced_ns = self.deadline_ns, self.fenced_ns
        if self.duration_ns is not None:
            after = fenced_ns + self.duration_ns
            deadline = after if deadline is None else min(deadline, after)
        if deadline is not None and time.monotonic_ns() >= deadline:
            return ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed before the run started"
        with _trace.driver(Phase.EXECUTION, self.label):
            if self.memo is not None and not self.measure:  # the driver's one repeat path
                result = self.memo.rerun(self.prepared, deadline, self.logging)
            else:
                result = self.prepared.execute(self.request, self.measure, deadline)
        if result.status != _NONE:
            return result.status, self.prepared.last_error or result.status.name
        if self.measure:
            self._time(result.timing, fenced_ns, time.monotonic_ns())
        return _NONE, ""

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
        self.poller = select.epoll()  # the fences the waiting jobs wait for (the loop polls it)
        self._waiting: dict = {}  # fence fd -> the job waiting for it
        self._timed: dict = {}  # the same, of the jobs with a deadline
        self._live = collections.Counter()  # jobs launched and not done: by connection, client, ALL
        self._live_lock = threading.Lock()  # a queued job ends on the scheduler's thread
        self._next_id = 0
        self._may_watch = usable_cpus() > 1

    def execute(self, connection, message, start: int) -> None:
        """Launch one executeFenced and reply with its callback id (and the sync fence it made),
        or an error (a client's sync fence is then failed: whoever waits for it learns at once)."""
        launch = self._launch_memo if message.type == _FENCED_MEMO else self._launch
        with _trace.adopt(message.context), _trace.hidl("IPreparedModel", "executeFenced", "server"):
            with _trace.driver(Phase.EXECUTION, self.label):
                launched = self.service.guarded(launch, connection, message, start)
            mark_failure(launched)
        if isinstance(launched, FencedJob):
            launched.context = message.context  # its run's spans belong to the same call
            callback_id = 0 if launched.quiet else self._keep(connection, launched)  # none asks a quiet one
            if self.service.vlog_driver:
                vlog.log("driver", self.service.label, "executeFenced(%s): %d wait fences, callback %d",
                         self.service.device.name, len(launched.waits), callback_id)
            if launched.quiet:  # its fence answers; a failure (at once, too) gets a reply from conclude()
                launched.reply_to = message.request_id
            self._arm(launched)
            payload = _OK + _U32.pack(callback_id)
            if launched.reply_fd is not None:
                send_with_fds(connection, REPLY | message.type, message.request_id, payload,
                              [launched.reply_fd])
            elif not launched.quiet:
                connection.send(REPLY | message.type, message.request_id, payload)
        else:
            if message.type == _FENCED_MEMO and message.fds and is_eventfd(message.fds[-1]):
                fail(message.fds[-1])
            connection.send(REPLY | message.type, message.request_id, launched)
        _trace.flush_due()

    # ------------------------------------------------------------------ the serve loop's events
    def fileno(self) -> int:
        """The epoll fd of the awaited fences: readable once one of them signalled."""
        return self.poller.fileno()

    def waiting(self) -> bool:
        return bool(self._waiting)

    def watch_s(self) -> float:
        """How long the loop may look for a fence before it sleeps: the longest watch window of
        the waiting jobs (0 without one)."""
        return max((job.watch_s for job in self._waiting.values()), default=0.0)

    def look_window(self, now_ns: int) -> tuple[int, int] | None:
        """``(from, until)`` in monotonic ns: when the loop should look for the fences without
        sleeping, the union of the windows of the waiting jobs not past yet (None: sleep)."""
        windows = [job.look for job in self._waiting.values() if job.look is not None and job.look[1] > now_ns]
        if not windows:
            return None
        return min(w[0] for w in windows), max(w[1] for w in windows)

    def due_s(self) -> float | None:
        """Seconds until the earliest deadline of a waiting job (None: no deadline)."""
        if not self._timed:
            return None
        deadline = min(job.deadline_ns for job in self._timed.values())
        return max(0.0, (deadline - time.monotonic_ns()) / 1e9)

    def ready(self) -> None:
        """Advance the jobs whose fence signalled: the next fence, or the run."""
        for fd, _ in self.poller.poll(0):
            if wait(fd, 0, True) == ERROR:
                self._end(fd, ErrorStatus.GENERAL_FAILURE, "wait_for[{}] signalled an error")
            else:
                job = self._disarm(fd)
                job.position += 1
                self._arm(job)

    def expire(self) -> None:
        """Fail the waiting jobs whose deadline passed."""
        if not self._timed:
            return
        now = time.monotonic_ns()
        for fd, job in list(self._timed.items()):
            if now >= job.deadline_ns:
                self._end(fd, ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed waiting for wait_for[{}]")

    def drop(self, connection) -> None:
        """``connection`` closed: its waiting jobs end (their fences say so)."""
        for fd, job in list(self._waiting.items()):
            if job.connection is connection:
                self._end(fd, ErrorStatus.GENERAL_FAILURE, "the client disconnected before the fences signalled")
        self._jobs.pop(connection, None)

    def _arm(self, job: FencedJob) -> None:
        """Wait for the job's next fence, or run it once none is left."""
        fd = job.waiting_for()
        if fd is not None:
            if job.position == 0 and job.watch_s > 0:
                expected = job.memo.expected if job.memo is not None else ExpectedWait()
                job.look = expected.window(job.launched_ns, int(job.watch_s * 1e9))
            return self._watch(fd, job)
        job.fenced_ns = time.monotonic_ns()
        if job.waits and job.memo is not None:
            job.memo.expected.learn(job.fenced_ns - job.launched_ns)
        executions = self.service.executions
        if not executions.queues(job.prepared):
            with self.service.exec_lock:
                return job.run()
        executions.scheduler.submit(Job(job.client, job.prepared.priority, job.compute, job.conclude,
                                        job.label, job.prepared.mean_ns))

    def _watch(self, fd: int, job: FencedJob) -> None:
        """Add the job's fence to the epoll; a fence it cannot take (an epoll nested too deep,
        an anonymous inode without poll) ends the job with INVALID_ARGUMENT."""
        try:
            self.poller.register(fd, select.EPOLLIN)
        except OSError as error:
            job.conclude((ErrorStatus.INVALID_ARGUMENT, f"wait_for[{job.position}] cannot be waited for: {error}"))
            return
        self._waiting[fd] = job
        if job.deadline_ns is not None:
            self._timed[fd] = job

    def _end(self, fd: int, status: ErrorStatus, why: str) -> None:
        """End the job waiting for ``fd`` with ``status``; ``why`` may name its fence (``{}``)."""
        job = self._disarm(fd)
        job.conclude((status, why.format(job.position)))

    def _disarm(self, fd: int) -> FencedJob:
        self.poller.unregister(fd)
        self._timed.pop(fd, None)
        return self._waiting.pop(fd)

    def _waits(self, connection, fds, wait_count: int, duration: int) -> int | None:
        """The launch's timeout_after_fence in ns (None: none). CodecError for a bad fence list
        or duration; HalError when there is no room."""
        if wait_count > MAX_WAIT_FENCES:
            raise CodecError(f"{wait_count} wait_for fences; at most {MAX_WAIT_FENCES}")
        if wait_count > len(fds):
            raise CodecError(f"{wait_count} wait_for fences declared, {len(fds)} fds sent")
        duration_ns = optional_ns(duration, "timeout_after_fence")
        for position, fd in enumerate(fds[:wait_count]):
            if not is_fence(fd):
                raise CodecError(f"wait_for[{position}] is not a sync fence (an eventfd)")
        self._check_room(connection)
        return duration_ns

    def _take(self, connection, count: int) -> None:
        client = connection.client
        if not self.service.budget.take_for(client, count):
            raise HalError(ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
                           f"this client holds {client.pools} fds (release some first)")

    def _launch(self, connection, message, start: int) -> FencedJob:
        """A launch in full: decoded into the connection's own state when it names a memo and
        sends no new pool (as EXECUTE_SYNC: the memo stays for later launches), else into the
        job's own (its pools go with it)."""
        r = Reader(message.payload)
        wait_count, duration = r.take(FENCED_LAUNCH)
        fds = message.fds
        duration_ns = self._waits(connection, fds, wait_count, duration)
        # the client keeps a memo of a request that sends no new pool: so does the connection
        memo_id = _MEMO_ID.unpack_from(r.view, r.pos + 4)[0] \
            if len(r.view) >= r.pos + 8 and len(fds) == wait_count else 0
        self._take(connection, wait_count + 1)
        budget, client = self.service.budget, connection.client
        state, waits = connection.state, []
        if memo_id:
            connection.pools.begin()
        else:
            state = DecodeState()
            state.pools = PoolTable(budget, client)  # the job's pools are charged as the connection's
        try:
            decoded = decode_execute(r, state, fds[wait_count:])
            prepared = self._model(connection, decoded.model_id)
            memo = state.memos.get(memo_id) if memo_id else None
            waits = [os.dup(fd) for fd in fds[:wait_count]]
            job = FencedJob(prepared, decoded.request, decoded.measure, decoded.deadline_ns, waits,
                            duration_ns, start, self.label, connection,
                            self.service, state=None if memo_id else state, memo=memo)
        except BaseException:
            if not memo_id:
                state.close()
            close_fds(waits)
            budget.give_for(client, wait_count + 1)
            raise
        if memo is not None:
            memo.fenced = True
        self._count(job, 1)
        return job

    def _launch_memo(self, connection, message, start: int) -> FencedJob:
        """A launch of a memo: its fds are the wait fences, then the sync fence to signal (the
        client's, so that it can launch the next step before this reply comes)."""
        view, fds = message.payload, message.fds
        if len(view) < _MEMO_LAUNCH_SIZE:
            raise CodecError("malformed fenced execute repeat")
        wait_count, duration, watch_us = FENCED_MEMO.unpack_from(view)
        model_id, memo_id, measure, deadline = MEMO_HEAD.unpack_from(view, FENCED_MEMO.size)
        if wait_count + 1 != len(fds):
            raise CodecError(f"{wait_count} wait_for fences and a sync fence declared, {len(fds)} fds sent")
        duration_ns = self._waits(connection, fds, wait_count + 1, duration)  # the sync fence too
        memo = connection.state.memos.get(memo_id)
        if memo is None or memo.model_id != model_id:
            raise CodecError(f"fenced execute: no memo {memo_id} of prepared model {model_id}")
        if memo.fenced:
            raise CodecError(f"fenced execute: memo {memo_id} is launched already")
        if len(view) != _MEMO_LAUNCH_SIZE + memo.inline_size:
            raise CodecError(f"fenced execute repeat carries {len(view) - _MEMO_LAUNCH_SIZE} inline "
                             f"bytes, its request has {memo.inline_size}")
        if measure & ~_MEASURE_FLAGS:
            raise CodecError(f"fenced execute repeat: bad flags {measure}")
        deadline_ns = optional_ns(deadline)
        prepared = self._model(connection, model_id)
        self._take(connection, wait_count + 1)
        waits = []
        try:
            waits = [os.dup(fd) for fd in fds[:wait_count]]
            memo.refill(view, _MEMO_LAUNCH_SIZE)
            watch_s = min(watch_us / 1e6, MAX_WATCH_S) if self._may_watch else 0.0
            job = FencedJob(prepared, memo.request, bool(measure & 1), deadline_ns,
                            waits, duration_ns, start, self.label, connection,
                            self.service, watch_s=watch_s, memo=memo, fence=fds[wait_count])
        except BaseException:
            close_fds(waits)
            self.service.budget.give_for(connection.client, wait_count + 1)
            raise
        memo.fenced = True
        self._count(job, 1)
        return job

    @staticmethod
    def _model(connection, model_id: int):
        prepared = connection.client.models.get(model_id)
        if prepared is None:
            raise CodecError(f"unknown prepared model {model_id}")
        return prepared

    def busy(self) -> bool:
        """Whether a fenced run is launched and not done yet."""
        return self._live[_ALL] > 0

    def close(self) -> None:
        """The service ends: every waiting job ends too."""
        for fd in list(self._waiting):
            self._end(fd, ErrorStatus.GENERAL_FAILURE, "the driver is shutting down")
        self.poller.close()

    def _check_room(self, connection) -> None:
        """RESOURCE_EXHAUSTED beyond the running runs of one connection, of its client process
        (a fair share) or of the driver."""
        live = self._live
        on_connection, of_client, in_all = live[connection], live[connection.client], live[_ALL]
        if on_connection >= MAX_RUNNING or of_client >= MAX_RUNNING_PER_CLIENT or \
                in_all >= MAX_RUNNING_TOTAL:
            raise HalError(ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
                           f"fenced executions running: {on_connection} on this connection (at most "
                           f"{MAX_RUNNING}), {of_client} of this client ({MAX_RUNNING_PER_CLIENT}), "
                           f"{in_all} in all ({MAX_RUNNING_TOTAL})")

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

    def _count(self, job: FencedJob, step: int) -> None:
        """Count ``job`` in (1) or out (-1) of the live jobs; it counts itself out as it ends."""
        with self._live_lock:
            for key in (job.connection, job.client, _ALL):
                self._live[key] += step
                if not self._live[key]:
                    del self._live[key]
        if step > 0:
            job.on_end = lambda: self._count(job, -1)

    def _keep(self, connection, job: FencedJob) -> int:
        jobs = self._jobs_of(connection)
        self._next_id = callback_id = (self._next_id + 1) & 0xFFFFFFFF or 1
        jobs[callback_id] = job
        if len(jobs) > MAX_KEPT:
            for old_id in [i for i, old in jobs.items() if old.done][:len(jobs) - MAX_KEPT]:
                del jobs[old_id]
        return callback_id


def _nothing() -> None:
    """What a job that no server counts does as it ends."""


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
