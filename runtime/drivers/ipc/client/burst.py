"""Runtime side of bursts (AOSP ``ExecutionBurstController``): executions over two FMQs.

:meth:`RemotePreparedModel.configure_burst` creates two
:class:`~runtime.drivers.ipc.wire.fmq.FmqChannel` rings and hands their fds to the driver, which
starts a listener thread (:mod:`runtime.drivers.ipc.service.burst`). :meth:`BurstController.execute`
then has the interface of ``PreparedModel.execute``: it writes the request's datums into the
request ring and reads the result ring, with no socket call on the way.

Pools travel by **slot**: the :class:`SlotTable` gives each shared pool (a ``Memory`` or a
``SharedPool``) a slot for the burst's life, the same pool always the same slot; the driver asks
for the pools of slots it has not mapped (``IBurstCallback.getMemories``, answered here over the
socket with their fds) and keeps them. Buffers that are not shared memory (numpy arrays) are
staged through one shared pool of the burst. Freeing a ``Memory`` tells every burst that gave it
a slot (``IBurstContext.freeMemory``).

Waiting: both sides watch their ring for a short polling window before they sleep on the
eventfd wake-up (as AOSP's burst controller and server; no polling when the compilation prefers
low power): the controller catches a quick result, the driver's listener the next request of a
back-to-back burst, without a wake-up. Between camera frames the poll costs at most the window.

Liveness: an FMQ cannot tell whether its peer lives, so the result ring also watches the driver's
socket; a driver that dies mid-execution gives DEAD_OBJECT at once (the runtime then falls back
as for ``compute()``), one that hangs past the device timeout is killed and gives DEAD_OBJECT.
Executions with a deadline or a non-default loop timeout (the burst datums carry neither) go
through ``executeSynchronously``, as do those using a device memory (an IBuffer token: as AOSP,
bursts carry only shared memory) and everything after the burst broke.

Example::

    burst = prepared.configure_burst()
    result = burst.execute(request, measure_timing=True)
    burst.release()
"""
from __future__ import annotations

import select
import struct
import weakref

from nnscope import vlog
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.client._reply import check_status
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.hal.shared_memory import ibuffer_token, is_shared, pool_bytes
from nnscope.runtime.hal.sync_fence import watch_window_s
from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel, FmqError, FmqPeerGone, FmqTimeout
from nnscope.runtime.drivers.ipc.wire.fmq_datum import (BurstRequest, decode_memory_request, decode_result,
                                           encode_request, encode_trace)
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.shared_memory import SharedPool
from nnscope.runtime.drivers.ipc.wire.layouts import BURST_MEMORY
from nnscope.runtime.hal.device_types import ExecutionResult, Request, RequestArgument
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.runtime.ops.control_flow import LOOP_TIMEOUT_DEFAULT_NS

#: Bytes of each ring (AOSP sizes them for 1024 datums; ours hold that and stream the rest).
RING_BYTES = 64 * 1024
#: How long the controller and the driver's listener watch their ring before they sleep on the
#: wake-up (AOSP's burst polling window; 0 when the compilation prefers low power).
#: ``NNSCOPE_BURST_POLL_US``.
DEFAULT_POLL_US = 50
#: Staged pools start on a cache line; smaller ones are packed 16-byte aligned (any dtype's
#: alignment), so that a small request's arguments cross between the CPUs as one line.
_ALIGN, _SMALL_ALIGN = 64, 16
_U32 = struct.Struct("<I")
_LABEL = "ExecutionBurstController"
_DEAD = ErrorStatus.DEAD_OBJECT
_NONE = ErrorStatus.NONE  # a module global: Enum member access is slow on Python 3.11


class SlotTable:
    """Slots of the shared pools one burst has used: the same pool keeps its slot; freed slots
    are reused. ``generation`` changes whenever a slot stops naming its pool."""

    def __init__(self) -> None:
        self._by_pool: dict[int, tuple[object, int]] = {}
        self._pools: dict[int, object] = {}
        self._free: list[int] = []
        self.generation = 0

    def slot_for(self, pool) -> tuple[int, bool]:
        """(slot, is_new) of ``pool``."""
        entry = self._by_pool.get(id(pool))
        if entry is not None:
            return entry[1], False
        slot = self._free.pop() if self._free else len(self._pools)
        self._by_pool[id(pool)] = (pool, slot)
        self._pools[slot] = pool
        return slot, True

    def pool(self, slot: int):
        return self._pools.get(slot)

    def forget(self, pool) -> int | None:
        """Drop ``pool``; its slot (None if it had none)."""
        entry = self._by_pool.pop(id(pool), None)
        if entry is None:
            return None
        del self._pools[entry[1]]
        self._free.append(entry[1])
        self.generation += 1
        return entry[1]


class _Encoded:
    """One request as burst datums: the message, and the copies in and out of staging."""

    __slots__ = ("request", "measure", "generation", "message", "copy_in", "copy_out")

    def __init__(self, request, measure, generation, message, copy_in, copy_out):
        self.request, self.measure, self.generation = request, measure, generation
        self.message, self.copy_in, self.copy_out = message, copy_in, copy_out


class BurstController:
    """IBurstContext of one prepared model in a driver process; see the module docstring."""

    def __init__(self, prepared, burst_id: int, channels: tuple, connection, poll_s: float) -> None:
        self.prepared = prepared
        self.poll_s = poll_s
        self.device = prepared.device
        self.burst_id = burst_id
        self.requests, self.results = channels
        self.results.watch(connection.sock.fileno(), select.POLLRDHUP)
        self._connection = connection
        self.slots = SlotTable()
        self._staging: SharedPool | None = None
        self._encoded: _Encoded | None = None
        self._reply: tuple = (None, None)  # (result message, ExecutionResult) of the last run
        self.broken: str | None = None

    @classmethod
    def configure(cls, prepared, low_power: bool = False) -> BurstController:
        """configureExecutionBurst: two rings, their fds to the driver, its listener started;
        ``low_power``: never poll the result ring (sleep until the driver's wake-up).

        Raises:
            HalError: the driver refused (or died: DEAD_OBJECT).
        """
        channels = (FmqChannel.create(RING_BYTES), FmqChannel.create(RING_BYTES))
        poll_s = 0.0 if low_power else polling_window_s()
        try:
            with _trace.ipc(Phase.PREPARATION, "configureExecutionBurst"):
                message = prepared.device.transact(
                    MsgType.CONFIGURE_BURST, struct.pack("<II", prepared.model_id, round(poll_s * 1e6)),
                    [*channels[0].fds, *channels[1].fds])
                burst_id = check_status(bytes(message.payload), "configureExecutionBurst").u32()
            return cls(prepared, burst_id, channels, prepared.device.channel, poll_s)
        except BaseException:
            for channel in channels:
                channel.close()
            raise

    # ------------------------------------------------------------------ executing
    def execute(self, request: Request, measure_timing: bool = False,
                deadline_ns: int | None = None) -> ExecutionResult:
        """Run ``request`` through the burst (or executeSynchronously, see the module docstring)."""
        if deadline_ns is not None or self.broken is not None or self.device.channel is not self._connection:
            return self.prepared.execute(request, measure_timing, deadline_ns)
        encoded = self._encoded
        if encoded is None or encoded.request is not request or encoded.measure != measure_timing \
                or encoded.generation != self.slots.generation:
            if (request.loop_timeout_ns or LOOP_TIMEOUT_DEFAULT_NS) != LOOP_TIMEOUT_DEFAULT_NS \
                    or any(ibuffer_token(pool) is not None for pool in request.pools):
                return self.prepared.execute(request, measure_timing, deadline_ns)  # datums carry neither
            encoded = self._encode(request, measure_timing)
        for source, target in encoded.copy_in:
            target[:] = source
        if _trace.enabled():
            with _trace.ipc(Phase.EXECUTION, f"{_LABEL}::compute"):
                with _trace.hidl("IBurstContext", "executeBurst", "client"):
                    context = _trace.context()
                    result = self._exchange(encoded.message if context is None
                                            else encode_trace(context) + encoded.message)
        else:
            result = self._exchange(encoded.message)
        if result.status == _NONE:
            for source, target in encoded.copy_out:
                target[:] = source
        return result

    def _exchange(self, message: bytes) -> ExecutionResult:
        """Send one request, serve getMemories calls, return the decoded result."""
        last_reply, result = self._reply
        try:
            self.requests.write(message, timeout=self.device.timeout_s)
            while True:
                reply = self.results.read(timeout=self.device.timeout_s, poll_s=self.poll_s)
                if reply == last_reply:  # the same result again (never a getMemories call)
                    return result
                slots = decode_memory_request(reply)
                if slots is None:
                    break
                self._send_memories(slots)
        except FmqPeerGone:
            return self._break("the driver's connection closed mid-burst")
        except FmqTimeout:
            self._kill_driver()
            return self._break(f"no burst result within {self.device.timeout_s:g}s; driver killed")
        except (FmqError, HalError) as error:  # FmqCorrupt is a CodecError, not an FmqError
            return self._break(f"burst failed: {error}")
        except ValueError as error:
            return self._break(f"malformed burst reply: {error}")
        try:
            result = decode_result(reply)
        except ValueError as error:
            return self._break(f"malformed burst result: {error}")
        self._reply = (reply, result)
        return result

    def echo(self, message: bytes) -> None:
        """Send an echo message (:func:`~runtime.drivers.ipc.wire.fmq_datum.encode_echo`) through the
        burst's rings and wait until the driver's listener wrote it back: the round trip of the
        channel alone, the floor of a burst execution (``benchmarks/runtime_latency.py``).

        Raises:
            HalError: DEAD_OBJECT when the burst is or becomes broken; INVALID_ARGUMENT when
                the driver answered anything but the message.
        """
        if self.broken is not None:
            raise HalError(_DEAD, f"burst {self.burst_id}: {self.broken}")
        try:
            self.requests.write(message, timeout=self.device.timeout_s)
            reply = self.results.read(timeout=self.device.timeout_s, poll_s=self.poll_s)
        except (FmqError, ValueError) as error:  # FmqCorrupt is a CodecError (ValueError)
            raise HalError(self._break(f"echo failed: {error}").status, self.broken) from None
        if reply != message:
            raise HalError(ErrorStatus.INVALID_ARGUMENT, "the driver did not echo the message")

    def _encode(self, request: Request, measure: bool) -> _Encoded:
        slots, positions, staged = [], {}, {}
        for position, pool in enumerate(request.pools):
            if is_shared(pool):
                slot, _ = self.slots.slot_for(pool)
                positions[position] = (len(slots), 0)
                slots.append(slot)
        staging_size = self._stage_layout(request, staged)
        if staged:
            pool = self._staging_pool(staging_size)
            slot, _ = self.slots.slot_for(pool)
            for position, offset in staged.items():
                positions[position] = (len(slots), offset)
            slots.append(slot)
        copy_in = [(pool_bytes(request.pools[p])[a.offset:a.offset + a.length], self._staged_view(positions[p], a))
                   for a in request.inputs if (p := a.pool_index) in staged and not a.has_no_value]
        copy_out = [(self._staged_view(positions[p], a), pool_bytes(request.pools[p])[a.offset:a.offset + a.length])
                    for a in request.outputs if (p := a.pool_index) in staged]
        burst = BurstRequest(_moved(request.inputs, positions), _moved(request.outputs, positions),
                             tuple(slots), measure)
        self._encoded = _Encoded(request, measure, self.slots.generation, encode_request(burst),
                                 copy_in, copy_out)
        return self._encoded

    @staticmethod
    def _stage_layout(request: Request, staged: dict) -> int:
        """Offsets in the staging pool of the non-shared pools the arguments use; total size."""
        size = 0
        used = {a.pool_index for a in (*request.inputs, *request.outputs) if not a.has_no_value}
        for position in sorted(used):
            pool = request.pools[position]
            if not is_shared(pool):
                nbytes = pool_bytes(pool).nbytes
                align = _ALIGN if nbytes >= _ALIGN else _SMALL_ALIGN  # small ones share a line
                staged[position] = -(-size // align) * align
                size = staged[position] + nbytes
        return size

    def _staged_view(self, placed: tuple, argument: RequestArgument) -> memoryview:
        start = placed[1] + argument.offset
        return self._staging.view[start:start + argument.length]

    def _staging_pool(self, size: int) -> SharedPool:
        """The burst's staging pool, replaced by a larger one when ``size`` does not fit."""
        if self._staging is None or self._staging.size < size:
            if self._staging is not None:
                self._free_pool(self._staging)
                self._staging.close()
            self._staging = SharedPool(max(size, 4096), "nnscope-burst-staging")
        return self._staging

    # ------------------------------------------------------------------ memories
    def _send_memories(self, slots: tuple) -> None:
        """Answer getMemories(slots) over the socket with the pools' fds (none if one is
        unknown: the driver then fails the request)."""
        pools = [self.slots.pool(slot) for slot in slots]
        entries, fds = [], []
        if all(pool is not None for pool in pools):
            entries = [BURST_MEMORY.pack(slot, pool.offset, pool.size) for slot, pool in zip(slots, pools)]
            fds = [pool.fd for pool in pools]
            for pool in pools:
                _watch_free(pool, self)
        payload = _U32.pack(self.burst_id) + _U32.pack(len(entries)) + b"".join(entries)
        with _trace.ipc(Phase.EXECUTION, f"{_LABEL}::getMemories"):
            message = self.device.transact(MsgType.BURST_MEMORIES, payload, fds)
        check_status(bytes(message.payload), "getMemories")

    def memory_freed(self, pool) -> None:
        """A ``Memory`` this burst gave a slot was freed: IBurstContext.freeMemory(slot)."""
        self._free_pool(pool)

    def _free_pool(self, pool) -> None:
        slot = self.slots.forget(pool)
        if slot is None or self.broken is not None:
            return
        try:
            self.device.transact(MsgType.BURST_FREE_MEMORY, struct.pack("<II", self.burst_id, slot),
                                 timeout_s=5.0)
        except (HalError, ValueError, OSError) as error:
            vlog.log("execution", _LABEL, "freeMemory(%d): %s", slot, error)
        except Exception as error:  # noqa: BLE001 - DeadlineExpired: the driver will be found dead
            vlog.log("execution", _LABEL, "freeMemory(%d): %s", slot, type(error).__name__)

    # ------------------------------------------------------------------ lifetime
    def _break(self, why: str) -> ExecutionResult:
        self.broken = why
        vlog.log("execution", _LABEL, "burst %d of %s: %s", self.burst_id, self.device.name, why)
        return ExecutionResult(_DEAD)

    def _kill_driver(self) -> None:
        try:
            self.device.declare_dead(f"no burst result within {self.device.timeout_s:g}s")
        except HalError:
            pass

    def release(self) -> None:
        """Tell the driver to end the burst, then close the rings and the staging pool."""
        if self.requests.fd < 0:
            return
        if self.broken is None and self.device.channel is self._connection:
            try:
                self.device.transact(MsgType.BURST_RELEASE, _U32.pack(self.burst_id), timeout_s=5.0)
            except Exception as error:  # noqa: BLE001 - a dead driver has ended it already
                vlog.log("execution", _LABEL, "release: %s", error)
        self.broken = self.broken or "released"
        for channel in (self.requests, self.results):
            channel.close()
        if self._staging is not None:
            self._staging.close()
            self._staging = None


def polling_window_s() -> float:
    """The polling window in seconds (``NNSCOPE_BURST_POLL_US``, default 50 us, at most 1 ms;
    none on one CPU: ``sync_fence.watch_window_s``)."""
    return watch_window_s("NNSCOPE_BURST_POLL_US", DEFAULT_POLL_US, 1000)


def _moved(arguments, positions: dict) -> tuple:
    """``arguments`` with pool indexes and offsets re-pointed at the burst's pools."""
    moved = []
    for argument in arguments:
        if argument.has_no_value:
            moved.append(RequestArgument(True, 0, 0, 0, argument.dimensions))
            continue
        index, base = positions[argument.pool_index]
        moved.append(RequestArgument(False, index, base + argument.offset, argument.length,
                                     argument.dimensions))
    return tuple(moved)


def _watch_free(pool, controller: BurstController) -> None:
    """Have ``pool`` (a ``Memory``) tell ``controller`` when it is freed."""
    add = getattr(pool, "add_free_listener", None)
    if add is not None:
        add(weakref.WeakMethod(controller.memory_freed))

