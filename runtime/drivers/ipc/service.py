"""The driver-process side: serve one ``Device`` (a sample driver) over a Unix socket.

:class:`DriverService` accepts connections on a ``SOCK_SEQPACKET`` listener and answers one
record at a time: decode, trace (``HIDL::<iface>::<method>::server`` around
``[NN_LD_<phase>]SampleDriver::<method>``), call the device, flush the trace buffer, reply. Every
reply payload starts with a u32 ErrorStatus; failures carry a UTF-8 message after it. Anything
malformed (framing, codec, indexes, pool regions, invalid model or request) is answered with
INVALID_ARGUMENT and the service keeps going; unexpected exceptions become GENERAL_FAILURE.
The process exits on SHUTDOWN or when its parent process dies. With vlog ``driver`` on
(``NN_VLOG=driver``, inherited from the runtime), every call is logged on stderr under the log
tag ``SampleDriver``, e.g. ``prepareModel(sample-quant): 3 operations``.

Example (``python -m runtime.drivers sample-all --socket /tmp/d.sock`` does this)::

    service = DriverService(SampleDriver(SAMPLES["sample-all"]), listen("/tmp/d.sock"))
    service.serve_forever()
"""
from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import time
from typing import NamedTuple

import vlog
from runtime.drivers.base import Device
from runtime.drivers.ipc import _trace
from runtime.drivers.ipc._trace import Phase
from runtime.drivers.ipc.codec import (CodecError, Reader, Writer, decode_model, encode_capabilities,
                                       enum_value)
from runtime.drivers.ipc.execution_codec import (_MEMO_HEAD, FORM_COMPACT, FORM_FULL, FORM_UNKNOWN,
                                                 KNOWS_SHAPES, DecodeState, decode_execute,
                                                 encode_result)
from runtime.drivers.ipc.protocol import HIDL_NAMES, REPLY, MsgType, ProtocolError
from runtime.drivers.ipc.shm import MappingError, map_fd
from runtime.drivers.ipc.transport import Channel, PeerClosed, close_fds
from runtime.hal.device_types import ExecutionResult
from runtime.hal.errors import HalError
from runtime.hal.types import ErrorStatus, Preference, Priority

_OK = struct.pack("<I", 0)
_OK_COMPACT = struct.pack("<IB", 0, FORM_COMPACT)
_OK_FULL = struct.pack("<IB", 0, FORM_FULL)
_OK_UNKNOWN = struct.pack("<IB", 0, FORM_UNKNOWN)
_MEMO_HEAD_SIZE = _MEMO_HEAD.size
_unpack_memo_head = _MEMO_HEAD.unpack_from
_PREPARE = struct.Struct("<BBq")
_PHASES = {MsgType.GET_SUPPORTED_OPERATIONS: Phase.COMPILATION, MsgType.PREPARE_MODEL: Phase.COMPILATION,
           MsgType.EXECUTE_SYNC: Phase.EXECUTION, MsgType.EXECUTE: Phase.EXECUTION,
           MsgType.EXECUTE_SYNC_MEMO: Phase.EXECUTION,
           MsgType.RELEASE_MODEL: Phase.TERMINATION, MsgType.SHUTDOWN: Phase.TERMINATION,
           MsgType.FREE_POOLS: Phase.EXECUTION}


#: Process/resource lifecycle messages that are no HAL method: no ``HIDL::...::server`` mark
#: (parse_systrace would read such a mark as Initialization), only the ``[NN_LD_..]`` scope.
_LIFECYCLE = frozenset({MsgType.RELEASE_MODEL, MsgType.FREE_POOLS, MsgType.PING, MsgType.SHUTDOWN,
                        MsgType.SET_TRACE_DIR})
_NO_MARK = contextlib.nullcontext()
_EXECUTE = int(MsgType.EXECUTE)  # plain ints: enum attribute lookups cost on every message
_monotonic_ns = time.monotonic_ns
_trace_enabled = _trace.enabled
#: How long the loop blocks in one connection's recv before it polls all sockets again.
_DIRECT_S = 0.05


def listen(path: str) -> socket.socket:
    """A listening SOCK_SEQPACKET socket bound to ``path`` (replacing a stale file)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(path)
    sock.listen(8)
    return sock


def error_reply(status: ErrorStatus, message: str) -> bytes:
    w = Writer()
    w.u32(status)
    w.text(message[:4000])
    return w.getvalue()


class _Decoded(NamedTuple):
    model_id: int
    measure: bool
    deadline_ns: int | None
    request: object


class _Connection:
    def __init__(self, channel: Channel):
        self.channel = channel
        self.state = DecodeState()

    def close(self) -> None:
        self.state.close()
        self.channel.close()


class DriverService:
    """Serves ``device`` on ``listener`` until SHUTDOWN or the parent process exits."""

    def __init__(self, device: Device, listener: socket.socket, parent_pid: int | None = None):
        self.device = device
        self.listener = listener
        self.parent_pid = parent_pid
        self.models: dict = {}
        self._next_model = 1
        self._running = True
        self._label = "SampleDriver"
        self._vlog = vlog.is_on("driver")  # the mask is read once, at import
        self._cpuexe_vlog = vlog.is_on("cpuexe")
        self._handlers = {
            MsgType.GET_CAPABILITIES: self._capabilities, MsgType.GET_SUPPORTED_OPERATIONS: self._supported,
            MsgType.GET_TYPE: self._type, MsgType.GET_VERSION_STRING: self._version,
            MsgType.GET_SUPPORTED_EXTENSIONS: self._extensions,
            MsgType.GET_NUMBER_OF_CACHE_FILES: self._cache_files, MsgType.PREPARE_MODEL: self._prepare,
            MsgType.EXECUTE_SYNC: self._execute_sync, MsgType.EXECUTE_SYNC_MEMO: self._execute_memo,
            MsgType.RELEASE_MODEL: self._release,
            MsgType.FREE_POOLS: self._free_pools, MsgType.PING: self._ping, MsgType.SHUTDOWN: self._shutdown,
            MsgType.SET_TRACE_DIR: self._trace_dir,
        }
        self._routes = {int(t): (h, None if t in _LIFECYCLE else HIDL_NAMES[t][0], HIDL_NAMES[t][1],
                                 _PHASES.get(t, Phase.INITIALIZATION), f"{self._label}::{HIDL_NAMES[t][1]}")
                        for t, h in self._handlers.items()}

    # ------------------------------------------------------------------ loop
    def serve_forever(self) -> None:
        poller = select.epoll()
        listener_fd = self.listener.fileno()
        poller.register(listener_fd, select.EPOLLIN)
        connections: dict[int, _Connection] = {}
        try:
            poll = poller.poll
            serve_one = self._serve_one
            monotonic = time.monotonic
            poll_due = 0.0
            direct = None  # (fd, connection) of the single client
            while self._running:
                if len(connections) == 1 and monotonic() < poll_due:
                    # One client: wait for its next record in recv itself (one syscall, a direct
                    # wake-up); back to epoll after a quiet _DIRECT_S and at least that often,
                    # so new connections and the orphan check are never starved.
                    if direct is None or connections.get(direct[0]) is not direct[1]:  # fds are reused
                        direct = next(iter(connections.items()))
                    fd, connection = direct
                    served = serve_one(connection)
                    if served is None:
                        poll_due = 0.0
                    elif not served:
                        poller.unregister(fd)
                        connections.pop(fd).close()
                    continue
                events = poll(1.0)
                poll_due = monotonic() + _DIRECT_S
                if len(events) == 1:  # the common case: one request on one connection
                    fd = events[0][0]
                    connection = connections.get(fd)
                    if connection is not None:
                        if serve_one(connection) is False:
                            poller.unregister(fd)
                            connections.pop(fd).close()
                        continue
                if not events and self.parent_pid is not None and os.getppid() != self.parent_pid:
                    break  # idle and orphaned: the runtime process is gone
                for fd, _ in events:
                    if fd == listener_fd:
                        sock, _ = self.listener.accept()
                        connections[sock.fileno()] = _Connection(Channel(sock))
                        poller.register(sock.fileno(), select.EPOLLIN)
                    elif fd in connections and self._serve_one(connections[fd]) is False:
                        poller.unregister(fd)
                        connections.pop(fd).close()
        finally:
            _trace.flush()
            for connection in connections.values():
                connection.close()
            poller.close()

    def _serve_one(self, connection: _Connection) -> bool | None:
        """Answer one record; False when the connection is finished, None when nothing arrived
        within ``_DIRECT_S``."""
        try:
            message = connection.channel.recv(_DIRECT_S)
        except ProtocolError as error:
            self._reply(connection, 0, error.request_id, error_reply(ErrorStatus.INVALID_ARGUMENT, str(error)))
            return True
        except socket.timeout:
            return None
        except (PeerClosed, OSError):
            return False
        try:
            self.handle(connection, message)
        finally:
            if message.fds:
                close_fds(message.fds)
        return True

    def _reply(self, connection: _Connection, msg_type: int, request_id: int, payload,
               flags: int = REPLY) -> None:
        try:
            connection.channel.send(flags | msg_type, request_id, payload)
        except (PeerClosed, OSError):
            pass  # the client went away; its connection is dropped on the next read

    # ------------------------------------------------------------------ dispatch
    def handle(self, connection: _Connection, message) -> None:
        """Answer one decoded record (always replies, never raises for client errors)."""
        start = _monotonic_ns()
        msg_type = message.type
        if msg_type == _EXECUTE:
            return self._execute_async(connection, message, start)
        route = self._routes.get(msg_type)
        if route is None:
            return self._reply(connection, msg_type & 0x7FFF, message.request_id, error_reply(
                ErrorStatus.INVALID_ARGUMENT, f"unknown message type {msg_type}"))
        handler, interface, method, phase, detail = route
        if self._vlog:
            vlog.log("driver", self._label, "%s(%s) request %d", method, self.device.name,
                     message.request_id)
        if _trace_enabled():
            with _trace.hidl(interface, method, "server") if interface else _NO_MARK:
                with _trace.driver(phase, detail):
                    payload = self._guarded(handler, connection, message, start)
            _trace.flush()
        else:  # one check per message: no scopes to open (a handler may start a session)
            try:
                payload = handler(connection, message, start)
            except Exception:  # noqa: BLE001 - mapped to a status by _guarded
                payload = self._guarded(_reraise)
            if _trace_enabled():
                _trace.flush()
        try:
            connection.channel.send(REPLY | msg_type, message.request_id, payload)
        except (PeerClosed, OSError):
            pass  # the client went away; its connection is dropped on the next read

    @staticmethod
    def _guarded(handler, *args) -> bytes:
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
        model = self._read_model(Reader(message.payload), message.fds)
        flags = self.device.supported_operations(model)
        return _OK + struct.pack(f"<I{len(flags)}B", len(flags), *flags)

    def _type(self, connection, message, start) -> bytes:
        return _OK + struct.pack("<I", int(self.device.type))

    def _version(self, connection, message, start) -> bytes:
        w = Writer()
        w.text(self.device.version)
        return _OK + w.getvalue()

    def _extensions(self, connection, message, start) -> bytes:
        names = self.device.supported_extensions()
        w = Writer()
        w.u32(len(names))
        for name in names:
            w.text(name)
        return _OK + w.getvalue()

    def _cache_files(self, connection, message, start) -> bytes:
        return _OK + struct.pack("<II", *self.device.number_of_cache_files_needed())

    def _prepare(self, connection, message, start) -> bytes:
        r = Reader(message.payload)
        preference, priority, deadline = r._take(_PREPARE)
        cache_dir, token = r.text(), r.blob()
        model = self._read_model(r, message.fds)
        prepared = self.device.prepare_model(model, enum_value(Preference, preference),
                                             enum_value(Priority, priority),
                                             None if deadline < 0 else deadline, cache_dir or None,
                                             token or None)
        model_id = self._next_model
        self._next_model += 1
        self.models[model_id] = prepared
        if self._vlog:
            vlog.log("driver", self._label, "prepareModel(%s): model %d, %d operations", self.device.name,
                     model_id, len(model.main.operations))
        return _OK + struct.pack("<I", model_id)

    def _read_model(self, r: Reader, fds: list):
        """Model structure + out-of-line operand values (fd 0) + model pools (following fds)."""
        model, external = decode_model(r)
        pool_regions = [r._take(struct.Struct("<QQ")) for _ in range(r.count(16))]
        r.end()
        expected = len(pool_regions) + (external is not None)
        if len(fds) != expected:
            raise CodecError(f"model needs {expected} fds, {len(fds)} were sent")
        values = model.operand_values
        if external is not None:
            values = map_fd(fds[0], 0, external, writable=False).view
        pools = tuple(map_fd(fd, offset, size, writable=False).view
                      for fd, (offset, size) in zip(fds[expected - len(pool_regions):], pool_regions))
        return type(model)(model.main, model.referenced, values, pools, model.relax_float32_to_float16)

    # ------------------------------------------------------------------ IPreparedModel
    def _execute_sync(self, connection, message, start) -> bytes:
        decoded = decode_execute(Reader(message.payload), connection.state, message.fds)
        result = self._run(decoded, start)
        return _OK + encode_result(result, decoded.request, decoded.inline_outputs)

    def _execute_memo(self, connection, message, start) -> bytes:
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
        if len(view) != _MEMO_HEAD_SIZE + memo.inline_size:
            raise CodecError(f"execute repeat carries {len(view) - _MEMO_HEAD_SIZE} inline bytes, "
                             f"its request has {memo.inline_size}")
        memo.refill(view, _MEMO_HEAD_SIZE)
        prepared = self.models.get(model_id)
        if prepared is None:
            raise CodecError(f"unknown prepared model {model_id}")
        request = memo.request
        if measure == KNOWS_SHAPES and deadline < 0 and memo.shapes is not None \
                and not self._cpuexe_vlog and not _trace_enabled():
            results = prepared.compute_outputs(request, memo.shapes)
            if results is not None and len(results) == len(memo.out_views):
                try:
                    return b"".join([_OK_COMPACT, *results])
                except (TypeError, BufferError):  # a non-contiguous result: answer through execute()
                    pass
        if measure & 1:
            result = self._run(_Decoded(model_id, True, None if deadline < 0 else deadline, request), start)
        else:
            result = prepared.execute(request, False, None if deadline < 0 else deadline)
            if measure & 2 and not result.status and result.timing is None:
                shapes = memo.shapes
                if shapes is not None and (result.output_shapes is shapes or result.output_shapes == shapes):
                    return b"".join([_OK_COMPACT, *memo.out_views])
        memo.shapes = result.output_shapes
        return _OK_FULL + encode_result(result, request, memo.outputs)

    def _run(self, decoded, start: int) -> ExecutionResult:
        prepared = self.models.get(decoded.model_id)
        if prepared is None:
            raise CodecError(f"unknown prepared model {decoded.model_id}")
        result = prepared.execute(decoded.request, decoded.measure, decoded.deadline_ns)
        if result.timing is not None:  # time in driver covers decoding too
            in_driver = max((time.monotonic_ns() - start) // 1000, result.timing.time_in_driver)
            result = ExecutionResult(result.status, result.output_shapes,
                                     type(result.timing)(result.timing.time_on_device, in_driver))
        return result

    def _execute_async(self, connection: _Connection, message, start: int) -> None:
        """Launch reply first (status only), then the result as a NOTIFY callback."""
        decoded = None
        with _trace.hidl("IPreparedModel", "execute", "server"):
            with _trace.driver(Phase.EXECUTION, f"{self._label}::execute"):
                try:
                    decoded = decode_execute(Reader(message.payload), connection.state, message.fds)
                    if decoded.model_id not in self.models:
                        raise CodecError(f"unknown prepared model {decoded.model_id}")
                    launch = _OK
                except (CodecError, MappingError) as error:
                    launch = error_reply(ErrorStatus.INVALID_ARGUMENT, str(error))
                except Exception as error:  # noqa: BLE001 - a driver must answer, never crash
                    decoded = None
                    launch = error_reply(ErrorStatus.GENERAL_FAILURE, f"{type(error).__name__}: {error}")
        self._reply(connection, MsgType.EXECUTE, message.request_id, launch)
        if decoded is None:
            return _trace.flush()
        with _trace.driver(Phase.EXECUTION, f"{self._label}::asyncExecute"):
            payload = self._guarded(lambda: _OK + encode_result(
                self._run(decoded, start), decoded.request, decoded.inline_outputs))
        with _trace.hidl("IExecutionCallback", "notify", "client"):
            self._reply(connection, MsgType.NOTIFY, message.request_id, payload, flags=0)
        _trace.flush()

    def _release(self, connection, message, start) -> bytes:
        r = Reader(message.payload)
        model_id = r.u32()
        r.end()
        self.models.pop(model_id, None)
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
        return _OK + bytes(message.payload)

    def _trace_dir(self, connection, message, start) -> bytes:
        r = Reader(message.payload)
        directory = r.text()
        r.end()
        if directory and not os.path.isdir(directory):
            raise CodecError(f"trace directory {directory!r} does not exist")
        _trace.join_session(directory)
        return _OK

    def _shutdown(self, connection, message, start) -> bytes:
        self._running = False
        return _OK


def _reraise():
    """Raise the exception being handled again inside ``DriverService._guarded`` (which maps it
    to a status). No frame on its traceback holds it, so no reference cycle keeps the request
    (a payload of up to 64 MiB) alive until the garbage collector runs."""
    raise  # noqa: PLE0704 - called from within an except block
