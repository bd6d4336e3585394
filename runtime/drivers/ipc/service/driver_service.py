"""The driver-process side: serve one ``Device`` (a sample driver) over a Unix socket.

:class:`DriverService` accepts connections on a ``SOCK_SEQPACKET`` listener and answers one
record at a time: decode, trace (``HIDL::<iface>::<method>::server`` around
``[NN_LD_<phase>]SampleDriver::<method>``), call the device, flush the trace buffer, reply. Every
reply payload starts with a u32 ErrorStatus; failures carry a UTF-8 message after it. Anything
malformed (framing, codec, indexes, pool regions, invalid model or request) is answered with
INVALID_ARGUMENT and the service keeps going; unexpected exceptions become GENERAL_FAILURE.
The loop (``_serve``) and the limits (``_guard``) keep one client from crashing, stalling or
starving the others: prepared models belong to the client process that prepared them, only
the process that started the driver may move its trace directory, pools must be sealed memfds.
The process exits on SHUTDOWN or when its parent process dies. With vlog ``driver`` on
(``NN_VLOG=driver``, inherited from the runtime), every call is logged on stderr under the log
tag ``SampleDriver``, e.g. ``prepareModel(sample-quant): 3 operations``.

Example (``python -m nnscope.runtime.drivers sample-all --socket /tmp/d.sock`` does this)::

    service = DriverService(SampleDriver(SAMPLES["sample-all"]), listen("/tmp/d.sock"))
    service.serve_forever()
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import struct
import threading
import time

from nnscope import vlog
from nnscope.runtime.drivers.base import Device
from nnscope.runtime.drivers.ipc.service import _guard, buffers, burst, cache as cache_server
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.service._serve import Connection, ServeLoop
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.drivers.ipc.wire.codec import (CodecError, Reader, Writer, decode_model, encode_capabilities,
                                            encode_extensions, enum_value)
from nnscope.runtime.drivers.ipc.service.execute import PARKED, ExecuteServer, optional_ns
from nnscope.runtime.drivers.ipc.service.fenced import FencedServer
from nnscope.runtime.drivers.ipc.wire.protocol import HIDL_NAMES, MAX_INLINE_PAYLOAD, REPLY, MsgType, ProtocolError
from nnscope.runtime.hal.shared_memory import MappingError, map_fd
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK, error_reply, mark_failure
from nnscope.runtime.drivers.ipc.wire.layouts import PREPARE as _PREPARE
from nnscope.runtime.drivers.ipc.wire import cache_args
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, Preference, Priority

_POOL_REGION = struct.Struct("<QQ")
_PHASES = {MsgType.GET_SUPPORTED_OPERATIONS: Phase.COMPILATION, MsgType.PREPARE_MODEL: Phase.COMPILATION,
           MsgType.EXECUTE_SYNC: Phase.EXECUTION, MsgType.EXECUTE: Phase.EXECUTION,
           MsgType.EXECUTE_SYNC_MEMO: Phase.EXECUTION,
           MsgType.RELEASE_MODEL: Phase.TERMINATION, MsgType.SHUTDOWN: Phase.TERMINATION,
           MsgType.FREE_POOLS: Phase.EXECUTION, MsgType.CONFIGURE_BURST: Phase.PREPARATION,
           MsgType.BURST_MEMORIES: Phase.EXECUTION, MsgType.BURST_FREE_MEMORY: Phase.EXECUTION,
           MsgType.BURST_RELEASE: Phase.TERMINATION,
           MsgType.FENCED_INFO: Phase.EXECUTION,
           MsgType.PREPARE_MODEL_FROM_CACHE: Phase.COMPILATION, **buffers.PHASES}


#: Process/resource lifecycle messages that are no HAL method: no ``HIDL::...::server`` mark
#: (parse_systrace would read such a mark as Initialization), only the ``[NN_LD_..]`` scope.
#: The burst calls go without one too: a HIDL name would classify them by its words, not by phase.
_LIFECYCLE = frozenset({MsgType.RELEASE_MODEL, MsgType.FREE_POOLS, MsgType.PING, MsgType.SHUTDOWN,
                        MsgType.SET_TRACE_DIR, MsgType.CONFIGURE_BURST, MsgType.BURST_MEMORIES,
                        MsgType.BURST_FREE_MEMORY, MsgType.BURST_RELEASE}) | buffers.LIFECYCLE
_NO_MARK = contextlib.nullcontext()
_EXECUTE = int(MsgType.EXECUTE)  # plain ints: enum attribute lookups cost on every message
_FENCED_LAUNCHES = frozenset({int(MsgType.EXECUTE_FENCED), int(MsgType.EXECUTE_FENCED_MEMO)})
_monotonic_ns = time.monotonic_ns
_trace_enabled = _trace.enabled
_EXHAUSTED = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
#: Longest PING payload echoed (the reply stays an inline record).
MAX_PING_BYTES = MAX_INLINE_PAYLOAD - 4


def listen(path: str) -> socket.socket:
    """A listening SOCK_SEQPACKET socket bound to ``path`` (replacing a stale file), which only
    its owner may connect to (mode 0600; the peer's uid is checked on accept as well)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old_umask = os.umask(0o177)  # the socket file is created 0600, never reachable by others
    try:
        sock.bind(path)
    finally:
        os.umask(old_umask)
    sock.listen(socket.SOMAXCONN)
    return sock


class DriverService:
    """Serves ``device`` on ``listener`` until SHUTDOWN or the parent process exits."""

    def __init__(self, device: Device, listener: socket.socket, parent_pid: int | None = None):
        self.device = device
        self.listener = listener
        self.parent_pid = parent_pid
        #: Only this process may set the trace directory (the one that started the driver).
        self.starter_pid = parent_pid if parent_pid is not None else os.getpid()
        self.budget = _guard.FdBudget.for_this_process()
        self.clients = _guard.Clients(self.budget)
        self.running = True
        #: Held while a prepared model runs: the socket loop and burst threads share the models.
        self.exec_lock = threading.Lock()
        self.next_burst_id = 0
        self.ending_bursts: list = []  # stopped bursts whose listener has not ended yet
        self.bursts_open = 0  # bursts of every connection (listener threads)
        self.loop: ServeLoop | None = None
        self.label = "SampleDriver"
        self.vlog_driver = vlog.is_on("driver")  # the mask is read once, at import
        self.vlog_cpuexe = vlog.is_on("cpuexe")
        self.fenced = FencedServer(self)  # executeFenced: replies itself (with the sync fence fd)
        self.executions = ExecuteServer(self)  # execute*: inline or queued by priority
        self._handlers = {
            MsgType.GET_CAPABILITIES: self._capabilities, MsgType.GET_SUPPORTED_OPERATIONS: self._supported,
            MsgType.GET_TYPE: self._type, MsgType.GET_VERSION_STRING: self._version,
            MsgType.GET_SUPPORTED_EXTENSIONS: self._extensions,
            MsgType.GET_NUMBER_OF_CACHE_FILES: self._cache_files, MsgType.PREPARE_MODEL: self._prepare,
            MsgType.PREPARE_MODEL_FROM_CACHE: _bound(self, cache_server.prepare_from_cache),
            MsgType.EXECUTE_SYNC: self.executions.sync, MsgType.EXECUTE_SYNC_MEMO: self.executions.memo,
            MsgType.RELEASE_MODEL: self._release,
            MsgType.FREE_POOLS: self._free_pools, MsgType.PING: self._ping, MsgType.SHUTDOWN: self._shutdown,
            MsgType.SET_TRACE_DIR: self._trace_dir, MsgType.FENCED_INFO: self.fenced.info,
            **{t: _bound(self, f) for t, f in ((MsgType.CONFIGURE_BURST, burst.configure),
                                              (MsgType.BURST_MEMORIES, burst.memories),
                                              (MsgType.BURST_FREE_MEMORY, burst.free_memory),
                                              (MsgType.BURST_RELEASE, burst.release))},
            **buffers.routes(self),  # IDevice.allocate and IBuffer (memory domains)
        }
        self._routes = {int(t): (h, None if t in _LIFECYCLE else HIDL_NAMES[t][0], HIDL_NAMES[t][1],
                                 _PHASES.get(t, Phase.INITIALIZATION), f"{self.label}::{HIDL_NAMES[t][1]}")
                        for t, h in self._handlers.items()}

    # ------------------------------------------------------------------ loop
    def serve_forever(self) -> None:
        try:
            self.loop = ServeLoop(self)
            self.loop.run()
        finally:
            _trace.flush()

    def connections_of(self, client) -> list:
        """The open connections of client process ``client`` (none without a serve loop)."""
        return self.loop.connections_of(client) if self.loop is not None else []

    def reject(self, connection: Connection, error: ProtocolError) -> None:
        """Answer a record that breaks the framing."""
        self._reply(connection, error.msg_type & 0x7FFF, error.request_id,
                    error_reply(ErrorStatus.INVALID_ARGUMENT, str(error)))

    def _reply(self, connection: Connection, msg_type: int, request_id: int, payload,
               flags: int = REPLY) -> None:
        connection.send(flags | msg_type, request_id, payload)

    # ------------------------------------------------------------------ dispatch
    def handle(self, connection: Connection, message) -> None:
        """Answer one decoded record (always replies, never raises for client errors)."""
        start = _monotonic_ns()
        msg_type = message.type
        if msg_type == _EXECUTE:
            return self.executions.execute_async(connection, message, start)
        route = self._routes.get(msg_type)
        if route is None:
            if msg_type in _FENCED_LAUNCHES:
                return self.fenced.execute(connection, message, start)
            return self._reply(connection, msg_type & 0x7FFF, message.request_id, error_reply(
                ErrorStatus.INVALID_ARGUMENT, f"unknown message type {msg_type}"))
        handler, interface, method, phase, detail = route
        if self.vlog_driver:
            vlog.log("driver", self.label, "%s(%s) request %d", method, self.device.name,
                     message.request_id)
        if _trace_enabled():  # the runtime's span that sent the request is the parent
            with _trace.adopt(message.context), \
                    _trace.hidl(interface, method, "server") if interface else _NO_MARK:
                with _trace.driver(phase, detail):
                    payload = self.guarded(handler, connection, message, start)
                mark_failure(payload)
            _trace.flush_due()
        else:  # one check per message: no scopes to open (a handler may start a session)
            try:
                payload = handler(connection, message, start)
            except Exception:  # noqa: BLE001 - mapped to a status by guarded
                payload = self.guarded(_reraise)
            if _trace_enabled():
                _trace.flush_due()
        if payload is not PARKED:
            connection.send(REPLY | msg_type, message.request_id, payload)

    @staticmethod
    def guarded(handler, *args) -> bytes:
        try:
            return handler(*args)
        except (CodecError, MappingError, ProtocolError) as error:
            return error_reply(ErrorStatus.INVALID_ARGUMENT, str(error))
        except HalError as error:
            return error_reply(error.status, str(error))
        except Exception as error:  # noqa: BLE001 - a driver must answer, never crash
            return error_reply(ErrorStatus.GENERAL_FAILURE, f"{type(error).__name__}: {error}")

    # ------------------------------------------------------------------ IDevice
    def _capabilities(self, connection, message, start) -> bytes:
        Reader(message.payload).end()
        return _OK + encode_capabilities(self.device.capabilities())

    def _supported(self, connection, message, start) -> bytes:
        model, held = self._read_model(Reader(message.payload), message.fds, connection.client)
        try:
            flags = self.device.supported_operations(model)
        finally:
            self.budget.give_for(connection.client, held)
        return _OK + struct.pack(f"<I{len(flags)}B", len(flags), *flags)

    def _type(self, connection, message, start) -> bytes:
        return _OK + struct.pack("<I", int(self.device.type))

    def _version(self, connection, message, start) -> bytes:
        w = Writer()
        w.text(self.device.version)
        return _OK + w.getvalue()

    def _extensions(self, connection, message, start) -> bytes:
        return _OK + encode_extensions(self.device.supported_extensions())

    def _cache_files(self, connection, message, start) -> bytes:
        return _OK + struct.pack("<II", *self.device.number_of_cache_files_needed())

    def _prepare(self, connection, message, start) -> bytes:
        r = Reader(message.payload)
        preference, priority, deadline = r.take(_PREPARE)
        deadline_ns = optional_ns(deadline)
        model_cache, data_cache, token, fds = cache_args.read_prepare_args(r, message.fds)
        model, held = self._read_model(r, fds, connection.client)
        try:
            prepared = self.device.prepare_model(model, enum_value(Preference, preference),
                                                 enum_value(Priority, priority),
                                                 deadline_ns)
        except BaseException:
            self.budget.give_for(connection.client, held)
            raise
        prepared.priority = enum_value(Priority, priority)  # the scheduler's rank among this client's models
        model_id = self.clients.add_model(connection.client, prepared, held)
        cache_server.save(self, prepared, model_cache, data_cache, token)
        if self.vlog_driver:
            vlog.log("driver", self.label, "prepareModel(%s): model %d, %d operations", self.device.name,
                     model_id, len(model.main.operations))
        return _OK + struct.pack("<I", model_id)

    def _read_model(self, r: Reader, fds: list, client):
        """Model structure + out-of-line operand values (fd 0) + model pools (following fds);
        returns (model, fds its mappings hold, taken from the budget: the caller gives them back)."""
        model, external = decode_model(r)
        pool_regions = [r.take(_POOL_REGION) for _ in range(r.count(16))]
        r.end()
        expected = len(pool_regions) + (external is not None)
        if len(fds) != expected:
            raise CodecError(f"model needs {expected} fds, {len(fds)} were sent")
        _guard.check_dimensions(model)
        if not self.budget.take_for(client, expected):
            raise HalError(_EXHAUSTED, "too many pools mapped for this client (release some first)")
        try:
            values = model.operand_values
            if external is not None:
                values = map_fd(fds[0], 0, external, writable=False).view
            pools = tuple(map_fd(fd, offset, size, writable=False).view
                          for fd, (offset, size) in zip(fds[expected - len(pool_regions):], pool_regions))
        except BaseException:
            self.budget.give_for(client, expected)
            raise
        return dataclasses.replace(model, operand_values=values, pools=pools), expected

    # ------------------------------------------------------------------ IPreparedModel
    def _release(self, connection, message, start) -> bytes:
        r = Reader(message.payload)
        model_id = r.u32()
        r.end()
        self.clients.release_model(connection.client, model_id)  # only this client's models
        return _OK

    def _free_pools(self, connection, message, start) -> bytes:
        connection.state.memos.clear()  # their buffers may be unmapped
        r = Reader(message.payload)
        for pool_id in r.u32s():
            region = connection.state.pools.pop(pool_id, None)
            if region is not None:
                region.close()
        r.end()
        return _OK

    def _ping(self, connection, message, start) -> bytes:
        """Echo a payload of at most MAX_PING_BYTES: a longer echo would travel back as a new
        memfd, which a client that never reads could pin in its socket queue for free."""
        if len(message.payload) > MAX_PING_BYTES:
            raise CodecError(f"PING payload of {len(message.payload)} bytes; at most {MAX_PING_BYTES}")
        return _OK + bytes(message.payload)

    def _trace_dir(self, connection, message, start) -> bytes:
        r = Reader(message.payload)
        directory = r.text()
        r.end()
        if connection.pid != self.starter_pid:
            raise CodecError("only the process that started the driver may set its trace directory")
        if directory and not os.path.isdir(directory):
            raise CodecError(f"trace directory {directory!r} does not exist")
        _trace.join_session(directory)
        return _OK

    def _shutdown(self, connection, message, start) -> bytes:
        self.running = False
        return _OK


def _bound(service: DriverService, handler):
    """A socket handler of another module, called like the service's own."""
    return lambda connection, message, start: handler(service, connection, message)


def _reraise():
    """Raise the exception being handled again inside ``DriverService.guarded`` (which maps it
    to a status). No frame on its traceback holds it, so no reference cycle keeps the request
    (a payload of up to 64 MiB) alive until the garbage collector runs."""
    raise  # noqa: PLE0704 - called from within an except block
