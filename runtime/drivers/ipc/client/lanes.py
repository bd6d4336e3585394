"""More than one execution in flight on one driver: extra connections ("lanes") for threads
that find the device's main connection busy.

``RemoteDevice`` runs one call at a time on its main connection (one request, one reply). A
thread whose ``executeSynchronously`` finds it taken by another thread borrows a lane: a further
connection of the same process to the same driver, with its own pool ids and staging memory
(prepared models belong to the client process, so any of its connections may run them). The
driver then has both executions at once, and its scheduler orders them by priority. A device
keeps at most :data:`MAX_LANES` lanes; further threads wait for the main connection. Lanes are
closed when the driver restarts or shuts down.

Example (``RemotePreparedModel.execute`` does this)::

    lane = device.lanes.borrow()          # None: all lanes busy
    try:
        message = lane.transact(MsgType.EXECUTE_SYNC, payload, fds, deadline_ns)
    finally:
        device.lanes.give_back(lane)
"""
from __future__ import annotations

import threading
import time

from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.client._reply import DeadlineExpired, deadline_grace_s, readable
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, ProtocolError
from nnscope.runtime.drivers.ipc.wire.transport import PeerClosed
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus

#: Lanes one device keeps (executions in flight beyond the main connection).
MAX_LANES = 8


class Lane:
    """One extra connection: its channel, pool ids and per-model staging pools."""

    def __init__(self, device):
        self.device = device
        self.generation = device.generation
        self.channel = device.process.connect(device.timeout_s)
        self.pools = PoolCache()
        self.staging: dict[int, list] = {}  # model id -> SharedPool per pool position
        self._next_id = 0

    def transact(self, msg_type: int, payload, fds, deadline_ns: int | None):
        """Send one execute and wait for its reply (DeadlineExpired, or HalError(DEAD_OBJECT))."""
        self._next_id = request_id = (self._next_id + 1) & 0xFFFFFFFF
        try:
            self.channel.send(msg_type, request_id, payload, fds, _trace.context())
        except ProtocolError as error:  # refused here, before the driver saw it
            raise HalError(ErrorStatus.INVALID_ARGUMENT, str(error)) from None
        except (PeerClosed, OSError) as error:
            self.close()
            _trace.fail(ErrorStatus.DEAD_OBJECT, ErrorStatus.DEAD_OBJECT.name)
            raise HalError(ErrorStatus.DEAD_OBJECT, f"driver {self.device.name}: lane lost: {error}") from None
        try:
            message = self._receive(deadline_ns)
        except (PeerClosed, OSError, ValueError) as error:
            self.close()
            _trace.fail(ErrorStatus.DEAD_OBJECT, ErrorStatus.DEAD_OBJECT.name)
            raise HalError(ErrorStatus.DEAD_OBJECT, f"driver {self.device.name}: lane lost: {error}") from None
        if message.request_id != request_id or message.type not in (REPLY | msg_type, REPLY):
            self.close()
            raise HalError(ErrorStatus.GENERAL_FAILURE, "a lane received a reply to another request")
        return message

    def _receive(self, deadline_ns: int | None):
        limit = self.device.timeout_s
        wait = limit
        if deadline_ns is not None:
            wait = min(limit, max(0.001, (deadline_ns - time.monotonic_ns()) / 1e9 + deadline_grace_s(deadline_ns)))
        if not readable(self.channel.sock, wait):
            self.close()
            if deadline_ns is not None and time.monotonic_ns() >= deadline_ns:
                raise DeadlineExpired()
            self.device.declare_dead(f"no reply within {limit:.3g}s on a lane; driver killed")
        return self.channel.recv(limit)

    @property
    def open(self) -> bool:
        return self.channel is not None and self.generation == self.device.generation

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        for staging in self.staging.values():
            for pool in staging:
                if pool is not None:
                    pool.close()
        self.staging = {}


class LanePool:
    """A device's idle lanes, and how many exist."""

    def __init__(self, device):
        self.device = device
        self._idle: list[Lane] = []
        self._count = 0
        self._lock = threading.Lock()

    def borrow(self) -> Lane | None:
        """An idle lane, a new one, or None when :data:`MAX_LANES` are all busy."""
        with self._lock:
            while self._idle:
                lane = self._idle.pop()
                if lane.open:
                    return lane
                self._count -= 1
                lane.close()
            if self._count >= MAX_LANES:
                return None
            self._count += 1
        try:
            return Lane(self.device)
        except OSError:
            with self._lock:
                self._count -= 1
            return None

    def give_back(self, lane: Lane) -> None:
        with self._lock:
            if lane.open:
                self._idle.append(lane)
            else:
                self._count -= 1
                lane.close()

    def close_all(self) -> None:
        """Close the idle lanes (the driver restarted or stops); busy ones close when returned."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for lane in idle:
            lane.close()
