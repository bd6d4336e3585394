"""Runtime-side proxy: ``RemoteDevice`` is a ``runtime.drivers.base.Device`` whose every call
goes to a driver process over the IPC protocol.

The process starts on first use and stops at :meth:`RemoteDevice.shutdown` (also registered with
``atexit``). Each call is bracketed as the contract asks: ``[NN_LI_<phase>]<method>`` around
``HIDL::<iface>::<method>::client``. Every wait is bounded: a driver that dies is reported as
``HalError(DEAD_OBJECT)`` as soon as its socket closes; one that stops answering for
``timeout_s`` is killed and reported the same way; an execution whose deadline passes returns
MISSED_DEADLINE_TRANSIENT. Deadlines are ``time.monotonic_ns()`` values (CLOCK_MONOTONIC, the same
clock in both processes). A dead driver is restarted on next use (:meth:`RemoteDevice.restart`,
with the backoff of ``_restart``); its prepared models then prepare again on the new process.

Example::

    device = RemoteDevice("sample-float-fast")
    prepared = device.prepare_model(hal_model)
    result = prepared.execute(request, measure_timing=True)
    device.shutdown()
"""
from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time

from nnscope import vlog
from nnscope.runtime.drivers.base import Device
from nnscope.runtime.drivers.ipc.client import _process, buffer as buffer_client, cache as cache_client
from nnscope.runtime.drivers.ipc.client._process import DriverProcess
from nnscope.runtime.drivers.ipc.client._reply import DeadlineExpired, check_status, deadline_grace_s, readable
from nnscope.runtime.drivers.ipc.client._restart import MAX_S as MAX_BACKOFF_S, Backoff
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.codec import Reader, Writer, decode_capabilities, decode_extensions
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, model_payload
from nnscope.runtime.drivers.ipc.client.lanes import LanePool
from nnscope.runtime.drivers.ipc.client.prepared import RemotePreparedModel
from nnscope.runtime.drivers.ipc.wire.protocol import HIDL_NAMES, REPLY, MsgType, ProtocolError
from nnscope.runtime.drivers.ipc.wire.transport import Channel, PeerClosed
from nnscope.runtime.hal.sync_fence import close_fds
from nnscope.runtime.drivers.ipc.wire.cache_args import prepare_args as cache_prepare_args
from nnscope.runtime.drivers.ipc.wire.layouts import PREPARE as _PREPARE
from nnscope.runtime.hal.device_types import Capabilities
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import DeviceType, ErrorStatus, HalModel, Preference, Priority

NNSCOPE_DRIVER_TIMEOUT_S = "NNSCOPE_DRIVER_TIMEOUT_S"  # the variable that sets DEFAULT_TIMEOUT_S
#: Longest any single call waits for the driver (seconds): one that does not answer is killed, the
#: call gives DEAD_OBJECT (the step then may run on the CPU); the driver restarts on next use.
DEFAULT_TIMEOUT_S = _process.positive_seconds(os.environ.get(NNSCOPE_DRIVER_TIMEOUT_S), 60.0)
#: Longest the driver process may take to start listening (seconds).
DEFAULT_STARTUP_TIMEOUT_S = 60.0
_DEAD = ErrorStatus.DEAD_OBJECT
_NOTIFY = int(MsgType.NOTIFY)
_log = logging.getLogger("nn.VersionedInterfaces")


class RemoteDevice(Device):
    """A driver process seen as a ``Device``."""

    allocates_memory = True

    def __init__(self, name: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S):
        self.name = name
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.process = DriverProcess(name)
        self.channel: Channel | None = None
        self.pools = PoolCache()
        self.lanes = LanePool(self)  # connections for executions beyond the one in flight here
        self.lock = threading.RLock()
        self._next_id = 0
        self._stash: dict = {}  # request id -> NOTIFY payload bytes received early
        self._awaited: dict = {}  # request id -> its reply (None until received) of send_expecting
        self._dead: str | None = None
        self._info: dict = {}
        self._atexit = False
        self._connected = False  # connected to this process at least once
        self._trace_dir: str | None = None  # the trace session directory the driver writes to
        self.generation = 0  # bumped by each restart: prepared models re-prepare on the new process
        self.backoff = Backoff()
        self._shut_down = False
        _trace.on_gather(self.flush_trace)  # a session about to be collected asks its driver

    # ------------------------------------------------------------------ attributes
    @property
    def type(self) -> DeviceType:
        return self._asked_once("type", lambda: DeviceType(self.call(MsgType.GET_TYPE, Phase.INITIALIZATION).u32()))

    @property
    def version(self) -> str:
        return self._asked_once("version", lambda: self.call(MsgType.GET_VERSION_STRING, Phase.INITIALIZATION).text())

    def _asked_once(self, key: str, ask):  # ask() once per driver process (kept until a restart)
        if key not in self._info:
            self._info[key] = ask()
        return self._info[key]

    @property
    def pid(self) -> int | None:
        """The driver process id (None before start)."""
        return self.process.pid

    def launched(self) -> bool:
        return self.process.pid is not None

    # ------------------------------------------------------------------ IDevice
    def capabilities(self) -> Capabilities:
        return decode_capabilities(self.call(MsgType.GET_CAPABILITIES, Phase.INITIALIZATION))

    def supported_extensions(self) -> tuple:
        """``getSupportedExtensions``: the driver's ``Extension`` records (cached)."""
        return self._asked_once("extensions", lambda: decode_extensions(
            self.call(MsgType.GET_SUPPORTED_EXTENSIONS, Phase.INITIALIZATION)))

    def number_of_cache_files_needed(self) -> tuple[int, int]:
        """Asked once per driver process; (0, 0) for more files than NNAPI allows."""
        def ask():
            r = self.call(MsgType.GET_NUMBER_OF_CACHE_FILES, Phase.INITIALIZATION)
            return cache_client.usable_counts(self.name, (r.u32(), r.u32()))
        return self._asked_once("cache_files", ask)

    def supported_operations(self, model: HalModel) -> list[bool]:
        payload, fds, keep = model_payload(model)
        try:
            r = self.call(MsgType.GET_SUPPORTED_OPERATIONS, Phase.COMPILATION, payload, fds)
        finally:
            _close(keep)
        return [bool(flag) for flag in r.view[r.pos + 4:]]

    def prepare_model(self, model: HalModel, preference: Preference = Preference.FAST_SINGLE_ANSWER,
                      priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
                      cache_dir: str | None = None, token: bytes | None = None):
        w = Writer()
        w.parts.append(_PREPARE.pack(preference, priority, -1 if deadline_ns is None else deadline_ns))
        cache_fds, counts = cache_client.open_cache(self, cache_dir, token, create=True)
        cache_prepare_args(w, counts, token)
        payload, fds, keep = model_payload(model)
        try:
            r = self.call(MsgType.PREPARE_MODEL, Phase.COMPILATION, w.getvalue() + payload,
                             cache_fds + fds, deadline_ns)
        finally:
            _close(keep)
            close_fds(cache_fds)
        return RemotePreparedModel(self, r.u32(), model, (preference, priority, cache_dir, token))

    def prepare_model_from_cache(self, model: HalModel, deadline_ns: int | None = None,
                                 cache_dir: str | None = None, token: bytes | None = None,
                                 preference=None, priority=None):
        """prepareModelFromCache_1_3 with the cache files of ``token`` (see ``client.cache``)."""
        return cache_client.prepare_from_cache(self, model, deadline_ns, cache_dir, token,
                                               preference, priority)

    def allocate(self, dimensions, roles):
        """IDevice::allocate: a ``buffer_client.RemoteBuffer`` (HalError with the driver's status)."""
        return buffer_client.allocate(self, dimensions, roles)

    def outdated(self, generation: int) -> bool:  # must a model of driver ``generation`` recover?
        return self._dead is not None or generation != self.generation

    def forget_pool(self, pool) -> None:
        """Stop caching a shared request pool (a freed ``Memory``); the driver unmaps it next."""
        with self.lock:
            self.pools.forget(pool)

    def shutdown(self) -> None:
        """Ask the driver to exit, then make sure it has; idempotent."""
        with self.lock:
            if self.channel is not None and self._dead is None:
                try:
                    self.transact(MsgType.SHUTDOWN, b"", timeout_s=2.0)
                except HalError:
                    pass
            self._drop_channel()
            self.lanes.close_all()
            self._dead = self._dead or "device was shut down"
            self._shut_down = True
            self.process.stop()

    def restart(self) -> bool:
        """Start a new driver process if this one died and the backoff allows (the device
        manager's restart on next use); True when a driver process runs afterwards."""
        with self.lock:
            if self._dead is None:
                return True
            now = time.monotonic()
            if self._shut_down or not self.backoff.may_restart(now):
                return False
            with _trace.ipc(Phase.INITIALIZATION, "VersionedIDevice::recover"):
                self.process.stop(grace_s=0.5)
                self.process = DriverProcess(self.name)
                self._dead, self._connected, self._info = None, False, {}
                self.pools, self._stash, self._awaited = PoolCache(), {}, {}  # a failed reconnect may have kept ids
                self.generation += 1
                self.lanes.close_all()
                self.backoff.started(now)
                self.backoff.restarts += 1
                try:
                    self.ensure_started()
                except HalError:
                    return False
            vlog.log("manager", "VersionedInterfaces", "driver %s restarted (restart %d, pid %s)",
                     self.name, self.backoff.restarts, self.pid)
            return True

    def ensure_live(self) -> None:
        """Until the driver answers a PING: started if need be; if it died (or dies on the
        PING), restarted once its backoff allows. Raises HalError when it cannot be."""
        for _ in range(2):
            if self._dead is not None:
                time.sleep(max(0.0, min(self.backoff.not_before - time.monotonic(), MAX_BACKOFF_S)))
                if not self.restart():
                    raise HalError(_DEAD, f"driver {self.name} could not be restarted: {self._dead}")
            try:
                self.launch(wait=True)
                self.call(MsgType.PING, Phase.INITIALIZATION, b"wait")
                return
            except HalError:
                if self._shut_down:
                    raise
        raise HalError(_DEAD, f"driver {self.name} died again on restart: {self._dead}")

    # ------------------------------------------------------------------ transport
    def call(self, msg_type: MsgType, phase: Phase, payload=b"", fds=(), deadline_ns=None) -> Reader:
        interface, method = HIDL_NAMES[msg_type]
        with _trace.ipc(phase, method):
            with _trace.hidl(interface, method, "client"):
                try:
                    message = self.transact(msg_type, payload, fds, deadline_ns=deadline_ns)
                except DeadlineExpired:
                    raise HalError(ErrorStatus.MISSED_DEADLINE_TRANSIENT,
                                   f"{method}: deadline passed") from None
                return check_status(bytes(message.payload), method)

    def launch(self, wait: bool = False) -> None:
        """Spawn the driver process now; ``wait`` until it listens. A running driver instead
        joins the current trace session if it is not in it (a session started after it)."""
        with self.lock:
            if self._dead is None and self.process.popen is None:
                self._spawn()
            elif self._dead is None and _trace.session_dir() != self._trace_dir:
                try:
                    self.ensure_started()  # joins the session when it connects
                    self._follow_session()
                except HalError as error:  # reported again (DEAD_OBJECT) by its next call
                    _log.warning("driver %s: cannot join the trace session: %s", self.name, error)
            if wait:
                self.ensure_started()

    def _follow_session(self) -> None:
        """Have the driver join (or leave) the current trace session if it is not in it; a
        driver that does not answer within its timeout is killed and reported (logged here,
        DEAD_OBJECT on its next call)."""
        current = _trace.session_dir()
        if current != self._trace_dir and self._set_trace_dir(current, "join the trace session"):
            self._trace_dir = current

    def flush_trace(self) -> None:
        """Have the driver write out the spans it holds for the current session (it writes them
        now and then while it serves): a session about to be collected asks."""
        directory = self._trace_dir
        if directory is not None and directory == _trace.session_dir() and self._dead is None \
                and self.channel is not None:
            self._set_trace_dir(directory, "write out its trace")

    def _set_trace_dir(self, directory: str | None, what: str) -> bool:
        """SET_TRACE_DIR (the driver writes out what it holds, then writes to ``directory``);
        False, logged, when the driver does not answer."""
        w = Writer()
        w.text(directory or "")
        try:
            self.transact(MsgType.SET_TRACE_DIR, w.getvalue(), timeout_s=self.timeout_s)
        except (HalError, DeadlineExpired) as error:
            _log.warning("driver %s: cannot %s: %s", self.name, what, error)
            return False
        return True

    def ensure_started(self) -> Channel:
        if self._dead is not None:
            raise HalError(_DEAD, f"driver {self.name}: {self._dead}")
        if self.channel is None:
            if self.process.popen is None:
                self._spawn()
            if not self._connected:
                self.channel = self.process.wait_listening(self.startup_timeout_s, self.timeout_s)
                self._connected = True
            else:
                self._reconnect()
            self._follow_session()  # a session started since its spawn (no-op otherwise)
            if self.channel is None:
                raise HalError(_DEAD, f"driver {self.name}: {self._dead}")
        return self.channel

    def _spawn(self) -> None:
        self.process.spawn()
        self._trace_dir = _trace.session_dir()
        if not self._atexit:
            atexit.register(self.shutdown)
            self._atexit = True

    def _reconnect(self) -> None:
        try:
            self.channel = self.process.connect(self.timeout_s)
        except OSError as error:
            self._mark_dead(f"cannot reconnect: {error}")

    def transact(self, msg_type: int, payload, fds=(), deadline_ns: int | None = None,
                 timeout_s: float | None = None, poll_s: float = 0.0, nap_s: float = 0.0):
        """Send one request and wait for its reply (a Message valid until the next receive; watched
        for ``poll_s`` seconds after a ``nap_s`` wait, then asleep). Raises HalError(DEAD_OBJECT)
        or DeadlineExpired."""
        with self.lock:
            request_id = self.send_request(msg_type, payload, fds)
            if deadline_ns is not None or timeout_s is not None:
                return self.wait_for(REPLY | msg_type, request_id, deadline_ns, timeout_s)
            # the common case (no deadline, the device timeout): the first record is the reply
            message = self._receive(self.channel, self.timeout_s, None, self.timeout_s, poll_s, nap_s)
            if self._is_reply(message, REPLY | msg_type, request_id):
                return message
            return self.wait_for(REPLY | msg_type, request_id, None, None)

    def send_request(self, msg_type: int, payload, fds=()) -> int:
        """Send a request, not waiting (the caller holds ``lock``; see :meth:`receive`): its id."""
        channel = self.channel if self.channel is not None and self._dead is None else self.ensure_started()
        self._next_id = request_id = (self._next_id + 1) & 0xFFFFFFFF
        try:
            channel.send(msg_type, request_id, payload, fds, _trace.context())
        except ProtocolError as error:  # refused here, before the driver saw it
            raise HalError(ErrorStatus.INVALID_ARGUMENT, str(error)) from None
        except OSError as error:
            self._lost(f"send failed: {error}")
        return request_id

    def send_expecting(self, msg_type: int, payload, fds=()) -> int:
        """Send a request whose reply :meth:`collect` reads later (other calls meanwhile keep it
        aside): its id."""
        with self.lock:
            request_id = self.send_request(msg_type, payload, fds)
            self._awaited[request_id] = None
            return request_id

    def collect(self, msg_type: int, request_id: int, generation: int):
        """The reply to a :meth:`send_expecting` request of driver ``generation`` (waited for up
        to the device timeout). Raises HalError(DEAD_OBJECT) when that driver is gone."""
        with self.lock:
            if self.outdated(generation) or request_id not in self._awaited:
                raise HalError(_DEAD, f"driver {self.name}: restarted since the request was sent")
            message = self._awaited[request_id]
            if message is None:
                message = self.wait_for(REPLY | msg_type, request_id, None)
            del self._awaited[request_id]
            return message

    def forget_reply(self, request_id: int) -> None:
        """No reply will come to that :meth:`send_expecting` request (its fence answered)."""
        with self.lock:
            self._awaited.pop(request_id, None)

    def receive(self, timeout_s: float):
        """The next reply (see :meth:`send_request`); None for a NOTIFY (kept for its callback)."""
        message = self._receive(self.channel, timeout_s, None, timeout_s)
        return None if self._kept_notify(message) else message

    def _receive(self, channel, wait: float, deadline_ns: int | None, limit: float, poll_s: float = 0.0,
                 nap_s: float = 0.0):
        """One record from the driver; a timeout, a lost peer or broken framing is reported.
        With a deadline the wait is a ``poll`` (precise to the millisecond; the socket's own
        receive timeout rounds up to the kernel's tick, tens of milliseconds late)."""
        if deadline_ns is not None and not readable(channel.sock, wait):
            self._timed_out(deadline_ns, limit)
        try:
            return channel.recv(wait, poll_s, nap_s)
        except socket.timeout:
            self._timed_out(deadline_ns, limit)
        except (PeerClosed, OSError) as error:
            self._lost(f"connection lost: {error}")
        except ValueError as error:  # ProtocolError: a reply that breaks the framing
            self._lost(f"malformed reply: {error}")

    def _is_reply(self, message, reply_type: int, request_id: int) -> bool:
        """True for the awaited reply (or the driver's refusal of that request: a bare ``REPLY``);
        a NOTIFY for another request is stashed."""
        if message.request_id == request_id and (message.type == reply_type or message.type == REPLY):
            return True
        self._kept_notify(message)
        return False

    def _kept_notify(self, message) -> bool:
        if message.type == _NOTIFY:
            self._stash[message.request_id] = message._replace(payload=bytes(message.payload))
        elif message.request_id in self._awaited:
            self._awaited[message.request_id] = message._replace(payload=bytes(message.payload))
        return message.type == _NOTIFY

    def wait_for(self, reply_type: int, request_id: int, deadline_ns: int | None,
                 timeout_s: float | None = None):
        """Receive until the message (``reply_type``, ``request_id``) arrives; NOTIFYs for other
        requests are stashed."""
        with self.lock:
            if reply_type == MsgType.NOTIFY and request_id in self._stash:
                return self._stash.pop(request_id)
            channel = self.ensure_started()
            limit = timeout_s if timeout_s is not None else self.timeout_s
            give_up = None
            grace = None if deadline_ns is None else deadline_grace_s(deadline_ns)
            while True:
                wait = limit
                if deadline_ns is not None or give_up is not None:
                    give_up = give_up or time.monotonic() + limit
                    wait = give_up - time.monotonic()
                    if deadline_ns is not None:
                        wait = min(wait, (deadline_ns - time.monotonic_ns()) / 1e9 + grace)
                    wait = max(wait, 0.001)
                message = self._receive(channel, wait, deadline_ns, limit)
                if self._is_reply(message, reply_type, request_id):
                    return message
                give_up = give_up or time.monotonic() + limit  # later waits share one budget

    def declare_dead(self, why: str):
        """Kill the driver process (it stopped answering) and raise HalError(DEAD_OBJECT)."""
        with self.lock:
            self.process.kill()
            self._mark_dead(why)

    def _timed_out(self, deadline_ns: int | None, limit: float):
        if deadline_ns is not None and time.monotonic_ns() >= deadline_ns:
            self._drop_channel()  # a late reply must not be read as the next call's
            raise DeadlineExpired()
        self.process.kill()
        self._mark_dead(f"no reply within {limit:.3g}s; driver killed")

    def _lost(self, why: str):
        if self.process.alive():
            try:
                self.process.popen.wait(0.5)
            except Exception:  # noqa: BLE001 - still alive: the connection alone broke
                pass
        self._mark_dead(why if not self.process.alive() else f"{why} (driver still running)")

    def _mark_dead(self, why: str):
        if self._dead is None:
            self.backoff.died(time.monotonic())
        _trace.fail(_DEAD, _DEAD.name)
        self._dead = why
        self._drop_channel()
        raise HalError(_DEAD, f"driver {self.name}: {why}")

    def _drop_channel(self) -> None:
        """Close the connection; the ids of the pools sent on it die with it (the next request
        is encoded against a fresh cache and sends its pools again)."""
        if self.channel is not None:
            self.channel.close()
            self.channel = None
            self.pools = PoolCache()


def _close(pools) -> None:
    for pool in pools:
        pool.close()
