"""Runtime side of ``IPreparedModel.executeFenced`` and ``IFencedExecutionCallback``.

:func:`execute_fenced` sends the request with its ``wait_for`` sync fences (eventfds, SCM_RIGHTS)
and returns the driver's sync fence fd, signalled when the execution is done (1 ok, 2 error), plus
a :class:`FencedCallback` whose :meth:`~FencedCallback.get_execution_info` asks the driver for the
status and the two timings once the fence signalled. The driver writes outputs after the call
returned, so every pool an output lives in must be shared memory: :func:`shared_request` puts a
request's other pools into fresh memfds and :func:`copy_back` copies output regions out of them.
The wire format is in ``service.fenced`` and ``wire.layouts``. :class:`FencedRun` is what
``RemotePreparedModel.execute_fenced`` returns: the launched run, which waits for the driver's
fence (checking every :data:`LIVENESS_S` that the driver lives), reads the outcome and copies
the outputs back.

Example::

    shared, copies = shared_request(request)
    fence, callback = execute_fenced(prepared, shared, [dependency_fd], measure=True)
    sync_fence.wait(fence, None)
    info = callback.get_execution_info()      # status, launched and fenced Timing
    copy_back(request, copies); os.close(fence)
"""
from __future__ import annotations

import dataclasses
import os
import struct
from typing import NamedTuple, Sequence

from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.client._reply import DeadlineExpired, check_status
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.wire.codec import CodecError
from nnscope.runtime.drivers.ipc.wire.layouts import FENCED_INFO, FENCED_LAUNCH
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.drivers import base
from nnscope.runtime.hal.shared_memory import SharedPool, is_shared, pool_bytes
from nnscope.runtime.hal.sync_fence import ACTIVE, DONE, ERROR, close_fds, fail, is_eventfd, new_fence, wait
from nnscope.runtime.hal.device_types import ExecutionResult, OutputShape, Request
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.timing import NO_TIMING, FencedTiming, Timing

#: Seconds between checks that the driver process is still alive while its fence is pending.
LIVENESS_S = 0.25

_U32 = struct.Struct("<I")
_FENCED_MEMO = int(MsgType.EXECUTE_FENCED_MEMO)


class ExecutionInfo(NamedTuple):
    """``getExecutionInfo``: status, launched and fenced Timing (NO_TIMING when unknown), message."""

    status: ErrorStatus
    launched: Timing
    fenced: Timing
    message: str = ""


class FencedCallback:
    """IFencedExecutionCallback of one fenced execution in a driver process."""

    def __init__(self, device, callback_id: int):
        self.device = device
        self.callback_id = callback_id

    def get_execution_info(self) -> ExecutionInfo:
        """Status and timings; call once the sync fence signalled. Raises HalError when the
        driver is gone or answers with an error."""
        with _trace.ipc(Phase.EXECUTION, "getExecutionInfo"):
            with _trace.hidl("IFencedExecutionCallback", "getExecutionInfo", "client"):
                message = self.device.transact(MsgType.FENCED_INFO, _U32.pack(self.callback_id))
                r = check_status(bytes(message.payload), "getExecutionInfo")
                status, *values = r.take(FENCED_INFO)
                text = r.text()
                r.end()
        try:
            status = ErrorStatus(status)
            launched, fenced = Timing(values[0], values[1]), Timing(values[2], values[3])
        except ValueError as error:
            raise HalError(ErrorStatus.GENERAL_FAILURE, f"getExecutionInfo: bad reply: {error}") from None
        return ExecutionInfo(status, launched, fenced, text)


def execute_fenced(prepared, request: Request, wait_for: Sequence[int], measure: bool = False,
                   deadline_ns: int | None = None, loop_timeout_ns: int | None = None,
                   timeout_after_fence_ns: int | None = None) -> tuple[int, FencedCallback]:
    """``executeFenced`` on a ``RemotePreparedModel``: (sync fence fd the caller owns, callback).

    ``wait_for`` fds (eventfds) stay the caller's. Every output must lie in a shared pool (see
    :func:`shared_request`). Raises HalError: the driver's launch status, DEAD_OBJECT when it is
    gone; ValueError for an output outside shared memory or a ``wait_for`` fd that is no eventfd.
    """
    if not all(is_eventfd(fd) for fd in wait_for):  # a bad fd must not fail the socket send
        raise ValueError("executeFenced: every wait_for fd must be a sync fence (an open eventfd)")
    if loop_timeout_ns is not None:
        request = dataclasses.replace(request, loop_timeout_ns=loop_timeout_ns)
    if any(not is_shared(request.pools[arg.pool_index]) for arg in request.outputs if not arg.has_no_value):
        raise ValueError("executeFenced: every output must be in shared memory (see shared_request)")
    with _trace.ipc(Phase.EXECUTION, "executeFenced"):
        with _trace.hidl("IPreparedModel", "executeFenced", "client"):
            staging: list = []
            payload, pool_fds, _, staged = encode_execute(prepared.model_id, request, measure, deadline_ns,
                                                          PoolCache(), staging)
            try:
                if staged:  # a large plain input: send its bytes through the staging memfd
                    _stage(request, staging, staged)
                after = -1 if timeout_after_fence_ns is None else timeout_after_fence_ns
                head = FENCED_LAUNCH.pack(len(wait_for), after)
                message = prepared.device.transact(MsgType.EXECUTE_FENCED, head + payload,
                                                   [*wait_for, *pool_fds])
            except DeadlineExpired:
                raise HalError(ErrorStatus.MISSED_DEADLINE_TRANSIENT,
                               "executeFenced: deadline passed") from None
            finally:
                for pool in staging:
                    if pool is not None:
                        pool.close()
            return _launched(prepared.device, message)


def _launched(device, message) -> tuple[int, FencedCallback]:
    fds = list(message.fds)
    try:
        r = check_status(bytes(message.payload), "executeFenced")
        callback_id = r.u32()
        r.end()
        if len(fds) != 1 or not is_eventfd(fds[0]):
            raise HalError(ErrorStatus.GENERAL_FAILURE, "executeFenced: the reply carries no sync fence")
    except BaseException:
        close_fds(fds)
        raise
    return fds[0], FencedCallback(device, callback_id)


def _stage(request: Request, staging: list, staged: list) -> None:
    for position in staged:
        data = pool_bytes(request.pools[position])
        staging[position].view[:len(data)] = data


def shared_request(request: Request) -> tuple[Request, list]:
    """``request`` with every non-empty pool that is not shared memory replaced by a memfd copy;
    returns (the new request, [(pool position, SharedPool)]) — close the pools when done."""
    copies, pools = [], list(request.pools)
    try:
        for position, pool in enumerate(pools):
            if not is_shared(pool):
                data = pool_bytes(pool)
                if len(data):
                    pools[position] = copy = SharedPool.from_bytes(data, "nnscope-fenced")
                    copies.append((position, copy))
    except BaseException:
        close_copies(copies)
        raise
    return dataclasses.replace(request, pools=tuple(pools)), copies


def copy_back(request: Request, copies: list) -> None:
    """Copy the output regions of the memfd copies back into ``request``'s own pools."""
    by_position = dict(copies)
    for arg in request.outputs:
        copy = by_position.get(arg.pool_index)
        if copy is not None and not arg.has_no_value:
            end = arg.offset + arg.length
            pool_bytes(request.pools[arg.pool_index])[arg.offset:end] = copy.view[arg.offset:end]


def close_copies(copies: list) -> None:
    for _, copy in copies:
        copy.close()


def timing_or_none(timing: Timing) -> Timing | None:
    """None for a Timing with nothing measured."""
    return None if timing == NO_TIMING else timing



class FencedRun(base.FencedRun):
    """One fenced execution launched on a driver for ``request`` (its plain pools copied to
    memfds: ``copies``); :meth:`wait` completes it, once, or :meth:`state` and :meth:`result`
    (a partitioned plan's steps), then :meth:`close`."""

    def __init__(self, prepared, request: Request, copies: list, measure: bool,
                 fence: int, callback: FencedCallback | None, pending: tuple | None = None):
        self.prepared, self.request, self.copies, self.measure = prepared, request, copies, measure
        self.fence, self.callback = fence, callback
        self.pending = pending  # (request id, driver generation) of a launch reply not read yet
        self.quiet = pending is not None and not measure  # answered by its fence (and by a reply if it fails)
        self.generation = prepared.device.generation  # of the driver process it was launched on
        self.refused: HalError | None = None  # what that reply said, when it refused the launch
        self.timeout_s = prepared.device.timeout_s

    def wait(self) -> tuple[ExecutionResult, FencedTiming | None, str] | None:
        """``(result, fenced timing, driver's message)`` once the driver's fence signalled
        (outputs copied back on success); None when the driver died before it reported.
        Raises HalError when ``getExecutionInfo`` fails otherwise."""
        try:
            info = self._outcome()
            if info is None:
                return None
            if info.status != ErrorStatus.NONE:
                return ExecutionResult(info.status), None, info.message
            copy_back(self.request, self.copies)
        finally:
            self.close()
        launched = timing_or_none(info.launched) if self.measure else None
        result = ExecutionResult(ErrorStatus.NONE, self._shapes(), launched)
        return result, (FencedTiming(info.launched, info.fenced) if self.measure else None), ""

    def state(self, timeout_s: float) -> str:
        if self.quiet and self.prepared.device.outdated(self.generation):  # its driver is gone
            fail(self.fence)
        elif not self.quiet and not self._accepted():
            return ERROR
        return wait(self.fence, timeout_s, True)

    def _forget_reply(self) -> None:
        """A quiet run that succeeded: no reply will come."""
        if self.pending is not None:
            self.prepared.device.forget_reply(self.pending[0])
            self.pending = None

    def _accepted(self) -> bool:
        """Whether the driver took the launch (its reply read first when it is pending). A
        refused launch, or one whose driver is gone, never signals: its fence is failed here,
        so that the runs waiting for it end."""
        if self.pending is not None:
            request_id, generation = self.pending
            self.pending = None
            device = self.prepared.device
            try:
                r = check_status(bytes(device.collect(_FENCED_MEMO, request_id, generation).payload),
                                 "executeFenced")
                self.callback = FencedCallback(device, r.u32())
                r.end()
            except HalError as error:
                self.refused = error
            except CodecError as error:
                self.refused = HalError(ErrorStatus.GENERAL_FAILURE, f"executeFenced: bad reply: {error}")
            if self.refused is not None:
                fail(self.fence)
        return self.refused is None

    def result(self, state: str) -> ExecutionResult:
        """An untimed run's result once its fence is ``state`` (its status asked of the driver
        only when it failed)."""
        if self.quiet and state == DONE:  # its fence answered: no reply comes
            self._forget_reply()
            return self._succeeded()
        if self.quiet and self.pending is not None and self.prepared.device.outdated(self.generation):
            self.refused = HalError(ErrorStatus.DEAD_OBJECT, "executeFenced: the driver is gone")
            self.pending = None
        if not self._accepted() or self.quiet:  # a quiet run that failed: the reply says why
            self.last_error = str(self.refused)
            return ExecutionResult(self.refused.status if self.refused else ErrorStatus.GENERAL_FAILURE)
        if state == DONE and not self.measure:
            copy_back(self.request, self.copies)
            return self._succeeded()
        try:
            info = self.callback.get_execution_info()
        except HalError as error:
            self.last_error = str(error)
            return ExecutionResult(error.status)
        if info.status == ErrorStatus.NONE:
            copy_back(self.request, self.copies)
            return ExecutionResult(ErrorStatus.NONE, self._shapes(), timing_or_none(info.launched))
        self.last_error = info.message
        return ExecutionResult(info.status)

    def give_up(self, why: str) -> None:
        """The driver stopped answering: killed (restarted on next use), and the fence failed,
        so that runs waiting for it end."""
        try:
            self.prepared.device.declare_dead(why)
        except HalError:
            pass
        fail(self.fence)

    def close(self) -> None:
        if self.quiet and self.pending is not None and self.state(0) == DONE:
            self._forget_reply()
        self._accepted()  # its reply must not stay behind
        if self.fence >= 0:
            os.close(self.fence)
            self.fence = -1
            close_copies(self.copies)

    def _outcome(self) -> ExecutionInfo | None:
        if self._wait_for_driver() == ErrorStatus.DEAD_OBJECT:
            return None
        try:
            return self.callback.get_execution_info()
        except HalError as error:
            if error.status == ErrorStatus.DEAD_OBJECT:
                return None
            raise

    def _wait_for_driver(self):
        """The fence's state once it signalled; DEAD_OBJECT if the driver process died first."""
        while True:
            state = wait(self.fence, LIVENESS_S, True)
            if state != ACTIVE:
                return state
            if not self.prepared.device.process.alive():
                return ErrorStatus.DEAD_OBJECT

    def _shapes(self) -> tuple:
        """The output shapes (fully specified for a fenced run: the runtime checked them)."""
        return self._succeeded().output_shapes

    def _succeeded(self) -> ExecutionResult:
        """An untimed success with its output shapes; the same result again for the request its
        prepared model's last fenced run had (a plan's step repeats its request)."""
        prepared, request = self.prepared, self.request
        last = prepared.fenced_success
        if last is not None and last[0] is request:
            return last[1]
        graph = prepared.model.main
        result = ExecutionResult(ErrorStatus.NONE, tuple(
            OutputShape(tuple(arg.dimensions or graph.operands[index].dimensions))
            for arg, index in zip(request.outputs, graph.output_indexes)))
        prepared.fenced_success = (request, result)
        return result


def send_repeat(prepared, request: Request, payload: bytes, fences: list, measure: bool) -> FencedRun:
    """Send an ``EXECUTE_FENCED_MEMO`` launch with a new sync fence of ours for the driver to
    signal, and return its run at once: its reply is read when the run is looked at."""
    device, fence = prepared.device, new_fence()
    try:
        with _trace.ipc(Phase.EXECUTION, "executeFenced"):
            with _trace.hidl("IPreparedModel", "executeFenced", "client"):
                request_id = device.send_expecting(_FENCED_MEMO, payload, [*fences, fence])
    except BaseException:
        os.close(fence)
        raise
    return FencedRun(prepared, request, [], measure, fence, None, (request_id, device.generation))


def send_launch(prepared, request: Request, msg_type: int, payload: bytes, fds: list,
                measure: bool) -> FencedRun:
    """Send one prepared executeFenced message (``fds``: the wait fences, then new pools) and
    return its run. Raises HalError: the driver's launch status, DEAD_OBJECT when it is gone."""
    with _trace.ipc(Phase.EXECUTION, "executeFenced"):
        with _trace.hidl("IPreparedModel", "executeFenced", "client"):
            try:
                message = prepared.device.transact(msg_type, payload, fds)
            except DeadlineExpired:
                raise HalError(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "executeFenced: deadline passed") from None
            fence, callback = _launched(prepared.device, message)
    return FencedRun(prepared, request, [], measure, fence, callback)


def launch(prepared, request: Request, fences: list, measure: bool, deadline_ns: int | None,
           timeout_after_fence_ns: int | None) -> FencedRun:
    """``RemotePreparedModel.execute_fenced``: :func:`execute_fenced` on ``request`` with its
    plain pools in memfd copies. Raises HalError when the driver refuses or is gone."""
    shared, copies = shared_request(request)
    try:
        fence, callback = execute_fenced(prepared, shared, fences, measure, deadline_ns,
                                         timeout_after_fence_ns=timeout_after_fence_ns)
    except BaseException:
        close_copies(copies)
        raise
    return FencedRun(prepared, request, copies, measure, fence, callback)
