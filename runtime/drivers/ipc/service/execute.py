"""Driver side of ``executeSynchronously`` (EXECUTE_SYNC; EXECUTE_SYNC_MEMO repeats a memoized
request) and ``execute`` (EXECUTE, then a NOTIFY callback): decoded on the serve loop, then run
right there or queued by priority.

An execution runs on the serve loop itself (no thread hand-off, the fastest path) when the
scheduler is idle and its prepared model's runs are expected to be short (:data:`INLINE_NS`,
from the sample driver's running estimate) or its client is alone with the driver (one
connection, no burst, no fenced run). Otherwise it goes to the
:class:`~runtime.drivers.ipc.service.scheduler.Scheduler` with its prepared model's priority (from
``prepareModel_1_3``), and its connection is *parked*: the loop reads nothing more from it until
the reply is sent, so nothing the client sends meanwhile (FREE_POOLS, ...) can unmap what the
queued execution reads. An execution with a deadline is declined before it is queued when its
expected run plus the work that would go first (``Scheduler.backlog_ns``) cannot make it
(MISSED_DEADLINE_TRANSIENT; _PERSISTENT when even an idle run cannot). A queued run is traced
on the worker thread, one span per attempt: ``HIDL::IPreparedModel::executeSynchronously::server``
around ``[NN_LD_PE]SampleDriver::<method>``
(the server side of a synchronous call lasts until its reply), or for ``execute``
``[NN_LD_PE]SampleDriver::asyncExecute`` then the ``IExecutionCallback::notify`` client mark, as
on the loop.

Example (``DriverService`` routes the three messages here)::

    executions = ExecuteServer(service)
    payload = executions.sync(connection, message, start)   # bytes, or PARKED
"""
from __future__ import annotations

import contextlib
import functools
import struct
import time
from typing import NamedTuple

from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.service import buffers
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader
from nnscope.runtime.drivers.ipc.wire.execution_codec import (MEMO_HEAD, FORM_COMPACT, FORM_FULL, FORM_UNKNOWN,
                                                      encode_result)
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType
from nnscope.runtime.drivers.ipc.service.execute_decode import decode_execute
from nnscope.runtime.drivers.ipc.service.scheduler import Job, Scheduler
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK, error_reply, mark_failure
from nnscope.runtime.hal.device_types import ExecutionResult
from nnscope.runtime.hal.types import ErrorStatus

#: Expected run time (ns) up to which an execution runs on the serve loop when nothing is queued.
INLINE_NS = 2_000_000
#: Returned by a handler whose reply the scheduler sends later.
PARKED = object()
#: The answer of a repeat that succeeded with known shapes (its inline outputs follow).
OK_COMPACT = struct.pack("<IB", 0, FORM_COMPACT)
_OK_FULL = struct.pack("<IB", 0, FORM_FULL)
_OK_UNKNOWN = struct.pack("<IB", 0, FORM_UNKNOWN)
_MEMO_HEAD_SIZE = MEMO_HEAD.size
_unpack_memo_head = MEMO_HEAD.unpack_from
_NO_MARK = contextlib.nullcontext()


class Decoded(NamedTuple):
    """What a run needs of a decoded execute (the memo path builds one)."""

    model_id: int
    measure: bool
    deadline_ns: int | None
    request: object


class ExecuteServer:
    """The service's execute handlers and its scheduler."""

    def __init__(self, service):
        self.service = service
        self.scheduler = Scheduler(service.exec_lock)
        self.label = service.label

    # ------------------------------------------------------------------ executeSynchronously
    def sync(self, connection, message, start: int):
        if message.fds:
            connection.pools.begin()
        decoded = decode_execute(Reader(message.payload), connection.state, message.fds)
        run = functools.partial(self._answer, connection.client.models, decoded, start)
        return self._now_or_queued(connection, message, decoded.model_id, run, "executeSynchronously",
                                   decoded.deadline_ns)

    def memo(self, connection, message, start: int):
        """A repeat of a memoized request: refill its inline pools, run the same Request object
        (validated when the prepared model first bound it), answer compactly when nothing but
        the output bytes changed."""
        view = message.payload
        if message.fds or len(view) < _MEMO_HEAD_SIZE:
            raise CodecError("malformed execute repeat")
        model_id, memo_id, measure, deadline = _unpack_memo_head(view)
        memo = connection.state.memos.get(memo_id)
        if memo is None or memo.model_id != model_id:
            return _OK_UNKNOWN
        if memo.fenced:
            raise CodecError(f"execute repeat of memo {memo_id} while an executeFenced of it runs")
        if len(view) != _MEMO_HEAD_SIZE + memo.inline_size:
            raise CodecError(f"execute repeat carries {len(view) - _MEMO_HEAD_SIZE} inline bytes, "
                             f"its request has {memo.inline_size}")
        memo.refill(view, _MEMO_HEAD_SIZE)
        models, deadline_ns = connection.client.models, None if deadline < 0 else deadline
        return self._now_or_queued(connection, message, model_id, lambda: self._repeat(
            models, model_id, memo, measure, deadline_ns, start), "executeSynchronously", deadline_ns)

    def _repeat(self, models: dict, model_id: int, memo, measure: int, deadline_ns, start: int) -> bytes:
        prepared = models.get(model_id)
        if prepared is None:
            raise CodecError(f"unknown prepared model {model_id}")
        if measure & 1:  # timed: the ordinary path, answered in full
            result = self.run(models, Decoded(model_id, True, deadline_ns, memo.request), start)
        else:
            result = memo.rerun(prepared, deadline_ns, self.service.vlog_cpuexe)
            shapes = memo.shapes
            if measure & 2 and not result.status and result.timing is None and shapes is not None \
                    and (result.output_shapes is shapes or result.output_shapes == shapes):
                return b"".join([OK_COMPACT, *memo.out_views])
        memo.shapes = result.output_shapes
        return _OK_FULL + encode_result(result, memo.request, memo.outputs)

    def _answer(self, models: dict, decoded, start: int) -> bytes:
        """The reply payload of a decoded execute: status, then the encoded result."""
        return _OK + encode_result(self.run(models, decoded, start), decoded.request, decoded.inline_outputs)

    def run(self, models: dict, decoded, start: int) -> ExecutionResult:
        prepared = models.get(decoded.model_id)
        if prepared is None:
            raise CodecError(f"unknown prepared model {decoded.model_id}")
        tokens = getattr(decoded, "tokens", None)  # device memories (driver-side IBuffers)
        if tokens:
            buffers.check_request(prepared, decoded.request, tokens)
        result = prepared.execute(decoded.request, decoded.measure, decoded.deadline_ns)
        if tokens:
            buffers.mark_outputs(decoded.request, tokens, result.status == ErrorStatus.NONE)
        if result.timing is not None:  # time in driver covers decoding (and queueing) too
            result = with_driver_time(result, start)
        return result

    # ------------------------------------------------------------------ execute + NOTIFY
    def execute_async(self, connection, message, start: int) -> None:
        """Launch reply first (status only), then, only after a successful launch, the result as
        a NOTIFY callback."""
        with _trace.adopt(message.context):
            self._execute_async(connection, message, start)

    def _execute_async(self, connection, message, start: int) -> None:
        service = self.service
        with _trace.hidl("IPreparedModel", "execute", "server"):
            with _trace.driver(Phase.EXECUTION, f"{self.label}::execute"):
                decoded = None
                launch = service.guarded(self._launch, connection, message)
                if launch is _OK:
                    decoded = connection.launched
            mark_failure(launch)
        connection.launched = None
        connection.send(REPLY | MsgType.EXECUTE, message.request_id, launch)
        if decoded is None:
            return _trace.flush()
        models = connection.client.models
        prepared = models[decoded.model_id]
        run = functools.partial(self._answer, models, decoded, start)
        if self._queues(prepared):
            declined = self._queue(connection, MsgType.NOTIFY, message.request_id, prepared, run,
                                   "asyncExecute", decoded.deadline_ns, message.context)
            return None if declined is PARKED else _notify(connection, message.request_id, declined)
        with _trace.driver(Phase.EXECUTION, f"{self.label}::asyncExecute"), service.exec_lock:
            payload = service.guarded(run)
        _notify(connection, message.request_id, payload)

    def _launch(self, connection, message) -> bytes:
        if message.fds:
            connection.pools.begin()
        decoded = decode_execute(Reader(message.payload), connection.state, message.fds)
        if decoded.model_id not in connection.client.models:
            raise CodecError(f"unknown prepared model {decoded.model_id}")
        connection.launched = decoded
        return _OK

    # ------------------------------------------------------------------ scheduling
    def _queues(self, prepared) -> bool:
        """Queued while the scheduler is busy, and a long run unless its client is alone with
        the driver: one connection, no burst, no fenced run (nothing it could keep waiting or
        that could outrank it; the hand-off to the worker thread costs two wake-ups)."""
        return self.scheduler.busy() or (prepared.mean_ns > INLINE_NS and not self.alone())

    def alone(self) -> bool:
        service = self.service
        loop = service.loop
        return loop is not None and len(loop.connections) == 1 and not service.bursts_open \
            and not service.fenced.busy()

    def _now_or_queued(self, connection, message, model_id: int, run, method: str, deadline_ns):
        prepared = connection.client.models.get(model_id)
        if prepared is None:
            raise CodecError(f"unknown prepared model {model_id}")
        if not self._queues(prepared):
            with self.service.exec_lock:
                return run()
        return self._queue(connection, message.type, message.request_id, prepared, run, method,
                           deadline_ns, message.context)

    def _queue(self, connection, reply_type: int, request_id: int, prepared, run, method: str,
               deadline_ns: int | None, context: bytes | None = None):
        """Park ``connection`` and queue ``run`` with ``prepared``'s priority (PARKED), or
        answer at once when the deadline cannot be met (its MISSED_DEADLINE payload)."""
        priority = prepared.priority
        if deadline_ns is not None:
            declined = prepared.decline_queued(deadline_ns, self.scheduler.backlog_ns(
                connection.client, priority, time.monotonic_ns()))
            if declined is not None:
                return error_reply(declined.status, prepared.last_error or declined.status.name)
        guarded, label = self.service.guarded, f"{self.label}::{method}"

        def traced_run() -> bytes:  # a sync call's server side lasts until its reply: trace it here too
            with _trace.adopt(context), \
                    _trace.hidl("IPreparedModel", method, "server") if reply_type != MsgType.NOTIFY else _NO_MARK:
                with _trace.driver(Phase.EXECUTION, label):
                    payload = guarded(run)
                mark_failure(payload)
                return payload

        def done(payload) -> None:
            if isinstance(payload, Exception):
                payload = error_reply(ErrorStatus.GENERAL_FAILURE, f"{type(payload).__name__}: {payload}")
            if reply_type == MsgType.NOTIFY:
                _notify(connection, request_id, payload)
            else:
                connection.send(REPLY | reply_type, request_id, payload)
                _trace.flush()
            connection.unpark()

        connection.parked = True
        self.scheduler.submit(Job(connection.client, priority, traced_run, done, label,
                                  prepared.mean_ns))
        return PARKED


def _notify(connection, request_id: int, payload: bytes) -> None:
    with _trace.hidl("IExecutionCallback", "notify", "client"):
        connection.send(MsgType.NOTIFY, request_id, payload)
    _trace.flush()


def with_driver_time(result: ExecutionResult, start_ns: int) -> ExecutionResult:
    """``result`` with its time in driver counted from ``start_ns`` (decoding included)."""
    in_driver = max((time.monotonic_ns() - start_ns) // 1000, result.timing.time_in_driver)
    return ExecutionResult(result.status, result.output_shapes,
                           type(result.timing)(result.timing.time_on_device, in_driver))
