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

Decoding: :func:`decode_execute` turns an execute payload (format in
``runtime.drivers.ipc.wire.execution_codec``) into a ``Request``, with a per-connection
:class:`DecodeState` that maps new pools, names device buffers by token (``buffers``) and keeps
bounded caches (argument sections, inline buffers, memos of repeated requests).

Example:
    >>> from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
    >>> req = Request((RequestArgument(pool_index=0, offset=0, length=4),),
    ...               (RequestArgument(pool_index=0, offset=4, length=4),), (bytearray(8),))
    >>> payload, fds, inline, staged = encode_execute(7, req, True, None, PoolCache(), [])
    >>> decoded = decode_execute(Reader(payload), DecodeState(), fds)
    >>> decoded.model_id, decoded.measure, decoded.request.inputs[0].length, decoded.inline_outputs
    (7, True, 4, [0])

What ``DriverService`` does with the three messages::

    executions = ExecuteServer(service)
    payload = executions.sync(connection, message, start)   # bytes, or PARKED
"""
from __future__ import annotations

import contextlib
import functools
import struct
import time
from typing import NamedTuple

from nnscope.runtime.drivers.ipc.service import buffers as ibuffers
from nnscope.runtime.drivers.ipc.service._bytelru import ByteLru
from nnscope.runtime.drivers.ipc.service.scheduler import Job, Scheduler
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader
from nnscope.runtime.drivers.ipc.wire.execution_codec import (ARG, FORM_COMPACT, FORM_FULL, FORM_UNKNOWN,
                                                              HAS_LOOP_TIMEOUT, HEAD_FREE, I64, KIND_INLINE,
                                                              KIND_NEW_SHM, KIND_SHM, KIND_TOKEN,
                                                              MAX_INLINE_BYTES, MEMO_HEAD, NEW, SHM, U16,
                                                              encode_result)
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK, error_reply, mark_failure
from nnscope.runtime.hal.device_types import ExecutionResult, Request, RequestArgument
from nnscope.runtime.hal.shared_memory import MappingError, map_fd
from nnscope.runtime.hal.sync_fence import ExpectedWait
from nnscope.runtime.hal.types import ErrorStatus

#: Most dimensions one request argument may list.
MAX_ARGUMENT_RANK = 32
#: Bytes of decoded argument sections one connection keeps for reuse (each at most ARGS_ENTRY_BYTES).
ARGS_CACHE_BYTES = 64 * 1024
ARGS_ENTRY_BYTES = 8 * 1024
#: Bytes of reusable inline pool buffers one connection keeps (each at most INLINE_ENTRY_BYTES).
INLINE_CACHE_BYTES = 192 * 1024
INLINE_ENTRY_BYTES = 16 * 1024
#: Bytes of execute memos (their inline buffers and argument sections) one connection keeps.
MEMO_BYTES = 256 * 1024
_MEMO_OVERHEAD = 512  # bytes charged per memo besides its buffers


class DecodedExecute(NamedTuple):
    model_id: int
    measure: bool
    deadline_ns: int | None
    request: Request
    inline_outputs: list  # output positions whose pool is inline
    tokens: tuple = ()  # (pool position, buffers.DeviceBuffer) of pools named by token


class DecodeState:
    """Driver-side memory of one connection: mapped pools by id, decoded argument sections,
    reusable buffers for inline pools and the last Request. Repeated executions with the same
    regions therefore get the *same* Request object, so a prepared model's per-request binding
    (validation, numpy views) is reused. Every cache is bounded by bytes (:data:`ARGS_CACHE_BYTES`,
    :data:`INLINE_CACHE_BYTES`, :data:`MEMO_BYTES`), so a connection keeps well under a MiB
    whatever it sends; a request too large to cache is decoded afresh and not kept."""

    def __init__(self) -> None:
        self.pools: dict = {}    # pool id -> MappedRegion
        self.args = ByteLru(ARGS_CACHE_BYTES)      # encoded argument section -> (inputs, outputs)
        self.inline = ByteLru(INLINE_CACHE_BYTES)  # (pool position, size) -> bytearray refilled per execution
        self.last: tuple = (None, (), None)  # (args, buffers, Request); only of a fully cached request
        self.memos = ByteLru(MEMO_BYTES)     # memo id -> ExecuteMemo

    def cached_bytes(self) -> int:
        """Bytes the caches account for (argument sections, inline buffers, memos)."""
        return self.args.bytes + self.inline.bytes + self.memos.bytes

    def close(self) -> None:
        self.memos.clear()
        self.args.clear()
        self.inline.clear()
        self.last = (None, (), None)
        for region in self.pools.values():
            region.close()
        self.pools.clear()


def decode_execute(r: Reader, state: DecodeState, fds: list) -> DecodedExecute:
    """Driver side: decode an execute, mapping new pools into ``state.pools``.

    Received ``fds`` are consumed in order by NEW_SHM entries; the caller closes them all.

    Raises:
        CodecError: malformed payload, unknown pool id, fd/region that cannot be mapped.
    """
    try:
        model_id, memo_id, measure, deadline, free = HEAD_FREE.unpack_from(r.view, r.pos)
        r.pos += HEAD_FREE.size
        if free:
            r.pos -= 4
            _free(r.u32s(), state.pools)
            state.memos.clear()  # their buffers may be unmapped
        loop_timeout = _read_loop_timeout(r) if measure & HAS_LOOP_TIMEOUT else None
        buffers, inline_pools, cached, tokens = _decode_pools(r, state, fds)
    except struct.error:
        raise CodecError(f"truncated execute payload at byte {r.pos}") from None
    args_size = len(r.view) - r.pos
    key = bytes(r.view[r.pos:]) if args_size <= ARGS_ENTRY_BYTES else None
    args = state.args.get(key) if key is not None else None
    if args is None:
        args = (_read_args(r), _read_args(r))
        r.end()
        cached = key is not None and state.args.put(key, args, args_size) and cached
    last_args, last_buffers, request = state.last
    if args is not last_args or len(buffers) != len(last_buffers) or \
            any(a is not b for a, b in zip(buffers, last_buffers)) or request.loop_timeout_ns != loop_timeout:
        request = Request(args[0], args[1], tuple(buffers), loop_timeout)
        # only a request whose parts are all cached can come again as the same object
        state.last = (args, buffers, request) if cached else (None, (), None)
    outputs = args[1]
    inline = [i for i, a in enumerate(outputs) if a.pool_index in inline_pools] if inline_pools else []
    if memo_id and not tokens:  # a repeat would bypass the buffers' checks
        memo = ExecuteMemo(model_id, request, [buffers[p] for p in sorted(inline_pools)], inline)
        state.memos.put(memo_id, memo, memo.inline_size + args_size + _MEMO_OVERHEAD)
    return DecodedExecute(model_id, bool(measure & 1), optional_ns(deadline), request, inline, tokens)


def optional_ns(value: int, what: str = "deadline") -> int | None:
    """An optional time in ns from its wire value (a deadline, a fenced launch's
    timeout_after_fence): -1 is none, another negative value is malformed (CodecError)."""
    if value < -1:
        raise CodecError(f"negative {what} {value} (-1: none)")
    return None if value == -1 else value


def _read_loop_timeout(r: Reader) -> int:
    (value,) = I64.unpack_from(r.view, r.pos)
    r.pos += I64.size
    if value < 0:
        raise CodecError(f"negative loop timeout {value}")
    return value


class ExecuteMemo:
    """Driver side of one memo: the decoded Request of a full execute, its inline pool buffers
    (refilled by each repeat), the positions and regions of outputs in inline pools and the shapes
    of the last full answer (None: none yet, answer in full), and the prepared model's bound run
    of the request once an untimed run succeeded (outputs written in place, see ``bound_run``)."""

    __slots__ = ("model_id", "request", "inline", "inline_size", "outputs", "out_views", "shapes", "bound",
                 "bound_result", "fenced", "expected")

    def __init__(self, model_id: int, request: Request, inline: list, outputs: list) -> None:
        self.model_id = model_id
        self.request = request
        self.inline = [(buffer, len(buffer)) for buffer in inline]
        self.inline_size = sum(size for _, size in self.inline)
        self.outputs = outputs
        args, pools = request.outputs, request.pools
        self.out_views = [memoryview(pools[a.pool_index])[a.offset:a.offset + a.length]
                          for a in (args[i] for i in outputs)]
        self.shapes = None
        self.bound = None
        self.bound_result = None  # the result a successful bound run stands for
        self.fenced = False  # launched by an executeFenced that has not finished (service.fenced)
        self.expected = ExpectedWait()  # how long its fenced launches wait for their fences

    def rerun(self, prepared, deadline_ns: int | None, logging: bool) -> ExecutionResult:
        """Run the request again, untimed: through the prepared model's bound run while it holds
        (no deadline, no ``cpuexe`` vlog), else through ``execute``, whose untimed success binds
        it. The driver's one repeat path (memo repeats and fenced steps)."""
        bound = self.bound
        if bound is not None and deadline_ns is None and not logging:
            if bound():
                return self.bound_result
            self.bound = None  # not valid any more: the ordinary path reports, and binds again
        result = prepared.execute(self.request, False, deadline_ns)
        if deadline_ns is None and not result.status and result.timing is None:
            self.bound, self.bound_result = prepared.bound_run(self.request, result), result
        return result

    def refill(self, view, pos: int) -> None:
        """Copy a repeat's inline pool bytes (``view[pos:]``, size already checked) in."""
        for buffer, size in self.inline:
            end = pos + size
            buffer[:] = view[pos:end]
            pos = end


def _free(pool_ids, pools: dict) -> None:
    for pool_id in pool_ids:
        region = pools.pop(pool_id, None)
        if region is not None:
            region.close()


def _decode_pools(r: Reader, state: DecodeState, fds: list) -> tuple[list, set, bool, tuple]:
    """(pool buffers, inline pool positions, whether every inline buffer is a cached one,
    (position, DeviceBuffer) of token pools)."""
    view, pools = r.view, state.pools
    (count,) = U16.unpack_from(view, r.pos)
    pos = r.pos + 2
    buffers, inline_pools, next_fd, inline_bytes, cached, tokens = [], set(), 0, 0, True, ()
    for position in range(count):
        kind, value = SHM.unpack_from(view, pos)  # kind + pool id (or inline length)
        pos += 5
        if kind == KIND_SHM:
            region = pools.get(value)
            if region is None:
                raise CodecError(f"pool {position} refers to an unknown pool id")
            buffers.append(region.view)
        elif kind == KIND_INLINE:
            if pos + value > len(view):
                raise CodecError(f"inline pool {position} of {value} bytes exceeds the payload")
            inline_bytes += value
            if inline_bytes > MAX_INLINE_BYTES:
                raise CodecError(f"inline pools carry more than {MAX_INLINE_BYTES} bytes; "
                                 f"send larger buffers as shared memory")
            buffer, fresh = _inline_buffer(state.inline, position, value)
            cached = cached and not fresh
            buffer[:] = view[pos:pos + value]
            buffers.append(buffer)
            inline_pools.add(position)
            pos += value
        elif kind == KIND_NEW_SHM:
            r.pos = pos - 4
            buffers.append(_map_new(r, pools, fds[next_fd] if next_fd < len(fds) else None, position,
                                   state.memos))
            next_fd += 1
            pos = r.pos
        elif kind == KIND_TOKEN:  # the buffer's owner is the connection's client
            buffer = ibuffers.lookup(value, getattr(pools, "client", None))
            buffers.append(buffer.data)
            tokens += ((position, buffer),)
        else:
            raise CodecError(f"pool {position} has unknown kind {kind}")
    if next_fd != len(fds):
        raise CodecError(f"{len(fds)} file descriptors for {next_fd} new pools")
    r.pos = pos
    return buffers, inline_pools, cached, tokens


def _inline_buffer(cache: ByteLru, position: int, size: int) -> tuple[bytearray, bool]:
    """(buffer for an inline pool, True when it is not one the cache held already)."""
    buffer = cache.get((position, size))
    if buffer is not None:
        return buffer, False
    buffer = bytearray(size)
    if size <= INLINE_ENTRY_BYTES and cache.put((position, size), buffer, size):
        return buffer, False  # cached from now on: a repeat gets this very buffer
    return buffer, True


def _map_new(r: Reader, pools: dict, fd: int | None, position: int, memos: dict):
    pool_id, offset, size = r.take(NEW)
    if fd is None:
        raise CodecError(f"pool {position} announces an fd that was not sent")
    try:
        region = map_fd(fd, offset, size)
    except MappingError as error:
        raise CodecError(f"pool {position}: {error}") from None
    old = pools.pop(pool_id, None)
    if old is not None:
        memos.clear()  # they may reference the old mapping
        old.close()
    pools[pool_id] = region
    return region.view


def _read_args(r: Reader) -> tuple[RequestArgument, ...]:
    args = []
    for position in range(r.u16()):
        no_value, pool, offset, length = r.take(ARG)
        rank = r.count(4)
        if rank > MAX_ARGUMENT_RANK:
            raise CodecError(f"argument {position} lists {rank} dimensions, "
                             f"at most {MAX_ARGUMENT_RANK} are allowed")
        dims = struct.unpack_from(f"<{rank}I", r.view, r.pos)
        r.pos += 4 * rank
        args.append(RequestArgument(bool(no_value), pool, offset, length, dims))
    return tuple(args)


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
        models, deadline_ns = connection.client.models, optional_ns(deadline)
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
            ibuffers.check_request(prepared, decoded.request, tokens)
        result = prepared.execute(decoded.request, decoded.measure, decoded.deadline_ns)
        if tokens:
            ibuffers.mark_outputs(decoded.request, tokens, result.status == ErrorStatus.NONE)
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
            return _trace.flush_due()
        models = connection.client.models
        prepared = models[decoded.model_id]
        run = functools.partial(self._answer, models, decoded, start)
        if self.queues(prepared):
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
    def queues(self, prepared) -> bool:
        """Queued while the scheduler is busy, and a long run unless its client is alone with
        the driver: one connection, no burst (nothing it could keep waiting or that could
        outrank it; the hand-off to the worker thread costs two wake-ups). The client's own
        fenced runs that wait meanwhile are the later steps of its plans: they wait for this run."""
        return self.scheduler.busy() or (prepared.mean_ns > INLINE_NS and not self.alone())

    def alone(self) -> bool:
        service = self.service
        loop = service.loop
        return loop is not None and len(loop.connections) == 1 and not service.bursts_open

    def _now_or_queued(self, connection, message, model_id: int, run, method: str, deadline_ns):
        prepared = connection.client.models.get(model_id)
        if prepared is None:
            raise CodecError(f"unknown prepared model {model_id}")
        if not self.queues(prepared):
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
                _trace.flush_due()
            connection.unpark()

        connection.parked = True
        self.scheduler.submit(Job(connection.client, priority, traced_run, done, label,
                                  prepared.mean_ns))
        return PARKED


def _notify(connection, request_id: int, payload: bytes) -> None:
    with _trace.hidl("IExecutionCallback", "notify", "client"):
        connection.send(MsgType.NOTIFY, request_id, payload)
    _trace.flush_due()


def with_driver_time(result: ExecutionResult, start_ns: int) -> ExecutionResult:
    """``result`` with its time in driver counted from ``start_ns`` (decoding included)."""
    in_driver = max((time.monotonic_ns() - start_ns) // 1000, result.timing.time_in_driver)
    return ExecutionResult(result.status, result.output_shapes,
                           type(result.timing)(result.timing.time_on_device, in_driver))
