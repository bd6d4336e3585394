"""Runtime-side ``IPreparedModel`` proxy and the asynchronous execution callback.

:meth:`RemotePreparedModel.execute` is ``executeSynchronously``: one small record out (model id,
pool ids, argument regions; inline bytes only for small non-shared pools), one record back.
:meth:`RemotePreparedModel.execute_async` is ``execute`` with an ``IExecutionCallback``: the
driver acknowledges the launch, computes, then sends NOTIFY; :meth:`ExecutionCallback.wait`
receives it under ``HIDL::IExecutionCallback::notify::server``. Large non-shared pools are staged
through shared memory kept per prepared model, so repeated executions send no fds.

Example::

    prepared = device.prepare_model(model)
    result = prepared.execute(request, measure_timing=True)
    callback = prepared.execute_async(request)
    result = callback.wait()
"""
from __future__ import annotations

import functools
import struct
import time

from nnscope import vlog
from nnscope.runtime.drivers.base import PreparedModel
from nnscope.runtime.drivers.ipc.client import fenced as fenced_client
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.client._reply import DeadlineExpired, check_status, release_on_driver
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.client.burst import BurstController
from nnscope.runtime.drivers.ipc.wire.codec import Reader
from nnscope.runtime.drivers.ipc.client.encoder import EncodeMemo, encode_execute
from nnscope.runtime.hal.shared_memory import is_shared, pool_bytes
from nnscope.runtime.drivers.ipc.wire.execution_codec import (MEMO_HEAD, FORM_COMPACT, FORM_FULL, KNOWS_SHAPES,
                                                 decode_result)
from nnscope.runtime.drivers.ipc.wire.layouts import FENCED_LAUNCH, FENCED_MEMO
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.device_types import ExecutionResult, Request
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, HalModel

_MISSED = ExecutionResult(ErrorStatus.MISSED_DEADLINE_TRANSIENT)
_U32 = struct.Struct("<I")
_STATUS_FORM = struct.Struct("<IB")
_MEMO_HEAD_PACK = MEMO_HEAD.pack
_EXECUTE_SYNC_MEMO = int(MsgType.EXECUTE_SYNC_MEMO)
_EXECUTE_FENCED = int(MsgType.EXECUTE_FENCED)
_trace_enabled = _trace.enabled


class RemotePreparedModel(PreparedModel):
    """A model prepared in a driver process; ``model_id`` names it there."""

    def __init__(self, device, model_id: int, model: HalModel, prepare_args: tuple = ()):
        self.device = device
        self.model_id = model_id
        self.model = model
        self.prepare_args = prepare_args  # (preference, priority, cache dir, token)
        self.generation = device.generation
        self.staging: list = []  # per pool position: SharedPool standing in for a large buffer
        self._memo = EncodeMemo()  # the last request's encoding, for repeated executions
        self.fenced_success = None  # (request, untimed success) of its last fenced run (client.fenced)
        self._released = False
        self._reply_s = 0.0  # moving average of a repeat's round trip (with a polling window)

    def execute(self, request: Request, measure_timing: bool = False,
                deadline_ns: int | None = None) -> ExecutionResult:
        """executeSynchronously; raises HalError(DEAD_OBJECT) when the driver is gone."""
        device = self.device
        if device.outdated(self.generation):
            self._recover()
        lane = None
        if not device.lock.acquire(blocking=False):  # another thread's call is in flight
            lane = device.lanes.borrow()
            if lane is None:  # every lane busy too: wait for the main connection
                device.lock.acquire()
        run = self._execute if lane is None else functools.partial(self._execute_on_lane, lane)
        try:
            if not _trace_enabled():  # one check per call: no scopes to open
                return run(request, measure_timing, deadline_ns)
            with _trace.ipc(Phase.EXECUTION, "executeSynchronously"):
                with _trace.hidl("IPreparedModel", "executeSynchronously", "client"):
                    return run(request, measure_timing, deadline_ns)
        finally:
            if lane is None:
                device.lock.release()
            else:
                device.lanes.give_back(lane)

    def _execute(self, request: Request, measure_timing: bool, deadline_ns: int | None) -> ExecutionResult:
        memo = self._memo
        if memo.request is request:  # a repeat: only the inline input bytes travel
            payload = memo.repeat(request, _MEMO_HEAD_PACK(
                self.model_id, memo.memo_id,
                measure_timing | (KNOWS_SHAPES if memo.ok_result is not None else 0),
                -1 if deadline_ns is None else deadline_ns), self.device.pools)
            if payload is not None:
                if memo.staged:
                    self._stage_inputs(request, memo.staged)
                try:
                    message = self._transact_repeat(payload, deadline_ns)
                except DeadlineExpired:
                    return _MISSED
                result = self._finish_repeat(message.payload, request, memo)
                if result is not None:
                    return result
        payload, fds, inline, staged = self._encode(request, measure_timing, deadline_ns)
        try:
            message = self.device.transact(MsgType.EXECUTE_SYNC, payload, fds, deadline_ns)
        except DeadlineExpired:
            return _MISSED
        return self._finish(message.payload, request, inline, staged)

    def _transact_repeat(self, payload, deadline_ns: int | None):
        """A repeat's round trip; with a polling window (a step of a partitioned plan) the reply
        is watched for during the last ``window`` of the expected reply time (the moving average
        of this model's replies): asleep before, so that a reply that comes as expected costs
        no wake-up and a long step spins the CPU for one window only."""
        window = self.reply_poll_s
        if not window:
            return self.device.transact(_EXECUTE_SYNC_MEMO, payload, (), deadline_ns)
        start, expected = time.perf_counter(), self._reply_s
        message = self.device.transact(_EXECUTE_SYNC_MEMO, payload, (), deadline_ns, poll_s=window,
                                       nap_s=expected - window if expected > window else 0.0)
        self._reply_s += (time.perf_counter() - start - self._reply_s) / 4
        return message

    def _execute_on_lane(self, lane, request: Request, measure_timing: bool,
                         deadline_ns: int | None) -> ExecutionResult:
        """executeSynchronously on a further connection (``lanes``), without this model's memo."""
        staging = lane.staging.setdefault(self.model_id, [])
        payload, fds, inline, staged = encode_execute(self.model_id, request, measure_timing, deadline_ns,
                                                      lane.pools, staging)
        if staged:
            self._stage_inputs(request, staged, staging)
        try:
            message = lane.transact(MsgType.EXECUTE_SYNC, payload, fds, deadline_ns)
        except DeadlineExpired:
            return _MISSED
        return self._finish(message.payload, request, inline, staged, staging=staging)

    def execute_async(self, request: Request, measure_timing: bool = False,
                      deadline_ns: int | None = None) -> ExecutionCallback:
        """execute with a callback; the launch status is checked here (HalError on failure)."""
        if self.device.outdated(self.generation):
            self._recover()
        with _trace.ipc(Phase.EXECUTION, "execute"):
            with _trace.hidl("IPreparedModel", "execute", "client"):
                payload, fds, inline, staged = self._encode(request, measure_timing, deadline_ns)
                try:
                    message = self.device.transact(MsgType.EXECUTE, payload, fds, deadline_ns)
                except DeadlineExpired:
                    return ExecutionCallback(self, 0, request, inline, staged, deadline_ns, _MISSED)
                check_status(bytes(message.payload), "execute")
                return ExecutionCallback(self, message.request_id, request, inline, staged, deadline_ns)

    def _recover(self) -> None:
        """The driver died: have it restarted (if its backoff allows) and prepare this model on
        the new process. Left as is when it stays dead (the call then gives DEAD_OBJECT)."""
        device = self.device
        if not device.restart() or self.generation == device.generation:
            return
        with _trace.ipc(Phase.INITIALIZATION, "VersionedIPreparedModel::recover"):
            fresh = device.prepare_model(self.model, *self.prepare_args)
        self.model_id, self.generation, self._memo = fresh.model_id, device.generation, EncodeMemo()
        fresh._released = True  # its model id is now this object's
        vlog.log("manager", "VersionedInterfaces", "model prepared again on restarted driver %s "
                 "(model %d)", device.name, self.model_id)

    def execute_fenced(self, request: Request, fences: list, measure_timing: bool = False,
                       deadline_ns: int | None = None,
                       timeout_after_fence_ns: int | None = None) -> fenced_client.FencedRun:
        """executeFenced in the driver, which waits for ``fences`` itself (HalError when it
        refuses the launch or is gone). A request whose pools are all shared memory the driver
        mapped already goes through this connection's memo: once the driver holds the request,
        a launch is a repeat that carries no pool and whose reply is read later (a partitioned
        plan's steps, launched one after the other); any other is sent with its own pools, plain
        ones as copies (``client.fenced.launch``)."""
        device = self.device
        if device.outdated(self.generation):
            self._recover()
        with device.lock:
            memo, pools = self._memo, device.pools
            if pools.pending_free or not all(is_shared(pool) and pools.holds(pool) for pool in request.pools):
                return fenced_client.launch(self, request, fences, measure_timing, deadline_ns,
                                            timeout_after_fence_ns)
            after = -1 if timeout_after_fence_ns is None else timeout_after_fence_ns
            if memo.request is request:
                body = memo.repeat(request, _MEMO_HEAD_PACK(self.model_id, memo.memo_id, measure_timing,
                                                            -1 if deadline_ns is None else deadline_ns), pools)
                if body is not None:
                    head = FENCED_MEMO.pack(len(fences), after, int(self.reply_poll_s * 1e6))
                    return fenced_client.send_repeat(self, request, head + body, fences, measure_timing)
            payload, fds, _, _ = encode_execute(self.model_id, request, measure_timing, deadline_ns, pools,
                                                self.staging, memo)
            return fenced_client.send_launch(self, request, _EXECUTE_FENCED,
                                             FENCED_LAUNCH.pack(len(fences), after) + payload,
                                             [*fences, *fds], measure_timing)

    def configure_burst(self, low_power: bool = False) -> BurstController:
        """IPreparedModel.configureExecutionBurst (HalError when the driver refuses)."""
        return BurstController.configure(self, low_power)

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        release_on_driver(self.device, MsgType.RELEASE_MODEL, self.model_id)
        for pool in self.staging:
            if pool is not None:
                self.device.pools.forget(pool)
                pool.close()
        self.staging = []

    # ------------------------------------------------------------------ helpers
    def _encode(self, request: Request, measure: bool, deadline_ns: int | None):
        payload, fds, inline, staged = encode_execute(self.model_id, request, measure, deadline_ns,
                                                      self.device.pools, self.staging, self._memo)
        if staged:
            self._stage_inputs(request, staged)
        return payload, fds, inline, staged

    def _stage_inputs(self, request: Request, staged: list, staging: list | None = None) -> None:
        staging = self.staging if staging is None else staging
        for position in staged:
            source = pool_bytes(request.pools[position])
            target = staging[position].view
            for arg in request.inputs:
                if arg.pool_index == position and not arg.has_no_value:
                    end = arg.offset + arg.length
                    target[arg.offset:end] = source[arg.offset:end]

    def _finish_repeat(self, payload, request: Request, memo) -> ExecutionResult | None:
        """The answer to an EXECUTE_SYNC_MEMO; None when the driver lost the memo."""
        if len(payload) < 5:
            raise HalError(ErrorStatus.GENERAL_FAILURE, "execute: truncated reply")
        status, form = _STATUS_FORM.unpack_from(payload)
        if status:
            check_status(bytes(payload), "execute")  # raises with the driver's message
        if form == FORM_COMPACT:
            result = memo.ok_result
            if result is None:
                raise HalError(ErrorStatus.GENERAL_FAILURE, "execute: compact reply before a full one")
            targets = memo.out_targets or _output_targets(request, memo)
            if len(payload) != targets[0]:
                raise HalError(ErrorStatus.GENERAL_FAILURE, "execute: reply size does not match the outputs")
            pos = 5
            for target in targets[1]:
                end = pos + len(target)
                target[:] = payload[pos:end]
                pos = end
            if memo.staged:
                self._unstage_outputs(request, memo.staged)
            return result
        if form == FORM_FULL:
            result = self._finish(payload, request, memo.inline, memo.staged, 5)
            memo.ok_result = result if result.status == ErrorStatus.NONE and result.timing is None \
                else ExecutionResult(ErrorStatus.NONE, result.output_shapes, None)
            return result
        memo.request = None  # FORM_UNKNOWN: encode in full
        return None

    def _finish(self, payload, request: Request, inline: list, staged: list,
                start: int = 4, staging: list | None = None) -> ExecutionResult:
        if _U32.unpack_from(payload)[0]:
            check_status(bytes(payload), "execute")  # raises with the driver's message
        result, outputs = decode_result(Reader(payload, start))
        pools = request.pools
        for position, data in outputs:
            arg = request.outputs[position]
            pool = pools[arg.pool_index]
            if type(pool) is not bytearray:
                pool = pool_bytes(pool)
            pool[arg.offset:arg.offset + len(data)] = data
        if staged and result.status == ErrorStatus.NONE:
            self._unstage_outputs(request, staged, staging)
        return result

    def _unstage_outputs(self, request: Request, staged: list, staging: list | None = None) -> None:
        pools, staging = request.pools, self.staging if staging is None else staging
        for arg in request.outputs:
            if arg.pool_index in staged:
                end = arg.offset + arg.length
                pool_bytes(pools[arg.pool_index])[arg.offset:end] = staging[arg.pool_index].view[arg.offset:end]


class ExecutionCallback:
    """IExecutionCallback: :meth:`wait` returns the ExecutionResult of an async execute."""

    def __init__(self, prepared: RemotePreparedModel, request_id: int, request: Request, inline: list,
                 staged: list, deadline_ns: int | None, result: ExecutionResult | None = None):
        self._prepared = prepared
        self._request_id = request_id
        self._request = request
        self._inline = inline
        self._staged = staged
        self._deadline_ns = deadline_ns
        self._result = result

    def wait(self, timeout_s: float | None = None) -> ExecutionResult:
        """Block until the driver's NOTIFY arrives (bounded by the device timeout)."""
        if self._result is not None:
            return self._result
        device = self._prepared.device
        try:
            message = device.wait_for(MsgType.NOTIFY, self._request_id, self._deadline_ns, timeout_s)
        except DeadlineExpired:
            self._result = _MISSED
            return _MISSED
        with _trace.hidl("IExecutionCallback", "notify", "server"):
            self._result = self._prepared._finish(message.payload, self._request, self._inline,
                                                  self._staged)
        return self._result


def _output_targets(request: Request, memo) -> tuple[int, list]:
    """The compact reply's size and the byte views its outputs go to (kept in the memo)."""
    pools = request.pools
    views = [pool_bytes(pools[pool_index])[offset:offset + length]
             for pool_index, offset, length in memo.out_slots]
    memo.out_targets = (5 + sum(len(view) for view in views), views)
    return memo.out_targets

