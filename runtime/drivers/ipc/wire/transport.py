"""Blocking ``SOCK_SEQPACKET`` channel: send/receive one framed record with its fds.

A :class:`Channel` wraps a connected Unix socket. :meth:`Channel.send` writes one record
(large payloads go through a memfd, see ``protocol``); :meth:`Channel.recv` waits at most
``timeout`` seconds for one record and returns a :class:`Message`. A closed peer raises
:class:`PeerClosed`, a timeout :class:`socket.timeout`; framing problems raise
``ProtocolError`` after any received fds are closed (fds never outlive a failed receive).
:meth:`Channel.send_nowait` never blocks: it hands back what the socket could not take yet, for
:meth:`Channel.send_pending` once the peer reads again (the driver's per-connection output). The receive buffer is reused, so a
message's ``payload`` is only valid until the next ``recv`` on the same channel.

Example:
    >>> a, b = socket_pair()
    >>> a.send(MsgType.PING, 1, b"hi")
    >>> msg = b.recv(timeout=1.0)
    >>> (msg.type, msg.request_id, bytes(msg.payload))
    (12, 1, b'hi')
    >>> a.close(); b.close()
"""
from __future__ import annotations

import array
import fcntl
import mmap
import os
import socket
import select
import struct
from typing import NamedTuple

from nnscope.runtime.hal.shared_memory import can_not_shrink, sealed_memfd
from nnscope.runtime.drivers.ipc.wire.protocol import (FLAG_BULK, FLAG_TRACE, HEADER, HEADER_SIZE, MAGIC,
                                               MAX_FDS, MAX_INLINE_PAYLOAD, TRACE_CONTEXT_SIZE,
                                               VERSION, MsgType, ProtocolError, pack_header,
                                               unpack_header)
from nnscope.tracing.propagation import unpack as _unpack_context
from nnscope.runtime.hal.sync_fence import close_fds, spin

_RECV_SIZE = HEADER_SIZE + MAX_INLINE_PAYLOAD + 1  # +1: detect oversized records
#: A traced record's context counts against the inline limit: larger payloads go bulk.
_TRACED_INLINE = MAX_INLINE_PAYLOAD - TRACE_CONTEXT_SIZE
_ANC_SIZE = socket.CMSG_SPACE(MAX_FDS * 4)
_CLOEXEC = int(getattr(socket, "MSG_CMSG_CLOEXEC", 0))
_CTRUNC = int(socket.MSG_CTRUNC)  # plain ints: IntFlag arithmetic is slow
_BAD_FLAGS = _CTRUNC | int(socket.MSG_TRUNC)
_HEADER_UNPACK = HEADER.unpack_from
_HEADER_PACK = HEADER.pack
_BUFFER_SIZE = 1 << 20
_DONTWAIT = int(socket.MSG_DONTWAIT)


class PeerClosed(ConnectionError):
    """The other end closed the connection (or died)."""


class Message(NamedTuple):
    type: int
    request_id: int
    payload: memoryview
    fds: list
    #: The sender's trace context (26 bytes, ``tracing.propagation``) or None.
    context: bytes | None = None


_new_message = tuple.__new__  # Message(...) without the generated Python-level __new__


class Channel:
    """One end of a connected ``SOCK_SEQPACKET`` Unix socket (blocking, with timeouts)."""

    def __init__(self, sock: socket.socket, send_timeout: float = 10.0):
        self.sock = sock
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, option, _BUFFER_SIZE)
            except OSError:
                pass
        # Blocking mode with kernel timeouts: one syscall per receive, no poll() before it.
        sock.settimeout(None)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(send_timeout))
        self._buf = bytearray(_RECV_SIZE)
        self._view = memoryview(self._buf)
        self._sendall = sock.sendall
        self._send = sock.send
        self._recvmsg_into = sock.recvmsg_into
        self._bufs = [self._buf]
        self._readable = (sock,)  # what a nap in recv waits for
        self._timeout: float | None = None

    @classmethod
    def connect(cls, path: str, timeout: float) -> Channel:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            raise
        return cls(sock)

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()

    def send(self, msg_type: int, request_id: int, payload=b"", fds=(), context=None) -> None:
        """Send one record (with the trace ``context`` of the sending span, if given); raises
        PeerClosed when the peer is gone, ProtocolError for more fds than a record carries."""
        if len(fds) > MAX_FDS - 1:  # a bulk record adds its payload's fd
            raise ProtocolError(f"a record carries at most {MAX_FDS - 1} file descriptors, not {len(fds)}",
                                request_id, msg_type)
        try:
            size = len(payload)
            if context is not None:
                self._send_traced(msg_type, request_id, payload, fds, context)
            elif size > MAX_INLINE_PAYLOAD:
                self._send_bulk(msg_type, request_id, payload, fds)
            elif fds:
                head = pack_header(msg_type, request_id, size)
                socket.send_fds(self.sock, [head + bytes(payload)], list(fds))
            else:  # the hot path: one record, no fds (SEQPACKET sends it whole or not at all)
                self._sendall(_HEADER_PACK(MAGIC, VERSION, 0, msg_type, request_id, size) + payload)
        except (BrokenPipeError, ConnectionResetError) as error:
            raise PeerClosed(str(error)) from None
        except BlockingIOError:
            raise socket.timeout("peer does not read (send timed out)") from None

    def _send_traced(self, msg_type: int, request_id: int, payload, fds, context: bytes) -> None:
        if len(context) != TRACE_CONTEXT_SIZE:
            raise ValueError(f"trace context of {len(context)} bytes")
        size = len(payload)
        if size > _TRACED_INLINE:
            fd = _bulk_fd(payload)
            try:
                head = pack_header(msg_type, request_id, size, FLAG_BULK | FLAG_TRACE)
                socket.send_fds(self.sock, [head + context], [fd, *fds])
            finally:
                os.close(fd)
            return
        record = pack_header(msg_type, request_id, size, FLAG_TRACE) + context + bytes(payload)
        if fds:
            socket.send_fds(self.sock, [record], list(fds))
        else:
            self._sendall(record)

    def _send_bulk(self, msg_type: int, request_id: int, payload, fds) -> None:
        fd = _bulk_fd(payload)
        try:
            head = pack_header(msg_type, request_id, len(payload), FLAG_BULK)
            socket.send_fds(self.sock, [head], [fd, *fds])
        finally:
            os.close(fd)

    def send_nowait(self, msg_type: int, request_id: int, payload=b"") -> tuple | None:
        """Send one record without blocking; returns None once sent, else the pending record
        (see :meth:`pending`) to pass to :meth:`send_pending` when the peer reads again.

        Raises:
            PeerClosed: the peer is gone.
        """
        size = len(payload)
        if size <= MAX_INLINE_PAYLOAD:  # the hot path: one plain record
            data = _HEADER_PACK(MAGIC, VERSION, 0, msg_type, request_id, size) + payload
            try:
                self._send(data, _DONTWAIT)
                return None
            except BlockingIOError:
                return (data if type(data) is bytes else bytes(data)), []
            except (BrokenPipeError, ConnectionResetError) as error:
                raise PeerClosed(str(error)) from None
        pending = self.pending(msg_type, request_id, payload)
        return None if self.send_pending(pending) else pending

    @staticmethod
    def pending(msg_type: int, request_id: int, payload=b"") -> tuple:
        """One record as ``(bytes, fds)`` ready for :meth:`send_pending` (a large payload in a
        sealed memfd, owned by the record until it is sent or dropped with :func:`close_fds`)."""
        size = len(payload)
        if size <= MAX_INLINE_PAYLOAD:
            return pack_header(msg_type, request_id, size) + bytes(payload), []
        return pack_header(msg_type, request_id, size, FLAG_BULK), [_bulk_fd(payload)]

    def send_pending(self, pending: tuple) -> bool:
        """Try again to send a record from :meth:`send_nowait`; True (and its fds closed) once
        sent, False while the peer does not read. Raises PeerClosed when the peer is gone, or
        the OSError; either way the record's fds are closed first (its list emptied, so a later
        :func:`close_fds` of the same record closes nothing twice)."""
        data, fds = pending
        try:
            if fds:
                socket.send_fds(self.sock, [data], fds, _DONTWAIT)
            else:
                self._send(data, _DONTWAIT)
        except BlockingIOError:
            return False
        except OSError as error:
            close_fds(fds)
            fds.clear()
            if isinstance(error, (BrokenPipeError, ConnectionResetError)):
                raise PeerClosed(str(error)) from None
            raise
        close_fds(fds)
        fds.clear()
        return True

    def recv(self, timeout: float | None, poll_s: float = 0.0, nap_s: float = 0.0) -> Message:
        """Wait up to ``timeout`` seconds (None: the socket's default) for one record; with
        ``poll_s``, watch the socket for that long without sleeping (a polling window), after
        waiting up to ``nap_s`` for the record in ``select`` (a record then ends the nap).

        Raises:
            PeerClosed: end of stream or connection reset.
            socket.timeout: nothing arrived in time.
            ProtocolError: a malformed record (its fds are closed).
        """
        if timeout != self._timeout:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(timeout))
            self._timeout = timeout
        try:
            if poll_s > 0:
                if nap_s > 0:
                    select.select(self._readable, (), (), nap_s)
                size, ancdata, flags = self._polled_recvmsg(poll_s)
            else:
                size, ancdata, flags, _ = self._recvmsg_into(self._bufs, _ANC_SIZE, _CLOEXEC)
        except BlockingIOError:
            raise socket.timeout(f"no message within {timeout}s") from None
        except ConnectionResetError as error:
            raise PeerClosed(str(error)) from None
        if not ancdata and not flags & _BAD_FLAGS and HEADER_SIZE <= size < _RECV_SIZE:
            # the hot path: a well-formed plain record without fds (the same checks as _parse)
            magic, version, bits, msg_type, request_id, length = _HEADER_UNPACK(self._buf)
            if magic == MAGIC and version == VERSION and not bits and length == size - HEADER_SIZE:
                return _new_message(Message, (msg_type, request_id, self._view[HEADER_SIZE:size], [],
                                              None))
        fds = _fds(ancdata) if ancdata else []
        if size == 0:  # end of stream, or an empty record (its fds must not leak)
            close_fds(fds)
            raise PeerClosed("peer closed the connection")
        try:
            return self._parse(size, flags, fds)
        except ProtocolError:
            close_fds(fds)
            raise

    def _polled_recvmsg(self, poll_s: float) -> tuple:
        """``recvmsg`` without sleeping until a record comes or ``poll_s`` has passed
        (``sync_fence.spin``), then asleep as usual: the reply of a short call then costs no
        wake-up of this process."""
        receive, bufs = self._recvmsg_into, self._bufs

        def look():
            try:
                return receive(bufs, _ANC_SIZE, _CLOEXEC | _DONTWAIT)[:3]
            except BlockingIOError:
                return None
        return spin(look, poll_s) or receive(bufs, _ANC_SIZE, _CLOEXEC)[:3]

    def _parse(self, size: int, flags: int, fds: list) -> Message:
        if flags & _BAD_FLAGS or size == _RECV_SIZE:
            raise ProtocolError(f"more than {MAX_FDS} file descriptors" if flags & _CTRUNC
                                else f"record longer than {_RECV_SIZE - 1} bytes", *self._sender(size))
        if size >= HEADER_SIZE:  # fast path: a well-formed plain record
            magic, version, bits, msg_type, request_id, length = _HEADER_UNPACK(self._buf)
            if magic == MAGIC and version == VERSION and not bits and length == size - HEADER_SIZE:
                return Message(msg_type, request_id, self._view[HEADER_SIZE:size], fds)
        head = unpack_header(self._view[:size])
        start, context = HEADER_SIZE, None
        if head.flags & FLAG_TRACE:
            start += TRACE_CONTEXT_SIZE
            context = _context(self._view[HEADER_SIZE:start] if size >= start else b"", head)
        if head.flags & FLAG_BULK:
            if size != start or not fds:
                raise ProtocolError("bulk record must be a bare header with a payload fd", head.request_id,
                                    head.type)
            payload = _read_bulk(fds.pop(0), head)
        else:
            if size - start != head.length:
                raise ProtocolError(f"header says {head.length} payload bytes, record has "
                                    f"{size - start}", head.request_id, head.type)
            payload = self._view[start:size]
        return Message(head.type, head.request_id, payload, fds, context)

    def _sender(self, size: int) -> tuple[int, int]:
        """(request id, message type) of a refused record whose header is readable, else (0, 0):
        the refusal is then answered as a reply to that request, never left unanswered."""
        if size >= HEADER_SIZE:
            magic, _, _, msg_type, request_id, _ = _HEADER_UNPACK(self._buf)
            if magic == MAGIC:
                return request_id, msg_type
        return 0, 0


def _context(data, head) -> bytes:
    """The checked trace context of a FLAG_TRACE record."""
    try:
        _unpack_context(data)
    except ValueError as error:
        raise ProtocolError(f"malformed trace context: {error}", head.request_id, head.type) from None
    return bytes(data)


def _timeval(seconds: float | None) -> bytes:
    """``struct timeval`` for SO_RCVTIMEO/SO_SNDTIMEO; None or 0 means wait forever."""
    if not seconds:
        return struct.pack("@ll", 0, 0)
    seconds = max(seconds, 1e-6)
    return struct.pack("@ll", int(seconds), int((seconds % 1) * 1e6) or (0 if int(seconds) else 1))


def _bulk_fd(payload) -> int:
    """A sealed memfd holding ``payload`` (the receiver reads a payload that cannot change size)."""
    fd = sealed_memfd("nnscope-bulk", len(payload))
    try:
        if len(payload):
            with mmap.mmap(fd, len(payload)) as mapping:
                mapping[:] = payload
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)  # and frozen
    except (OSError, ValueError):
        os.close(fd)
        raise
    return fd


def _read_bulk(fd: int, head) -> memoryview:
    """The payload of a bulk record: only from a memfd that cannot shrink (a mapping of a file
    that shrinks while it is read faults with SIGBUS)."""
    try:
        if not can_not_shrink(fd):
            raise ProtocolError("bulk payload fd is not a memfd sealed against shrinking",
                                head.request_id)
        if os.fstat(fd).st_size < head.length:
            raise ProtocolError("bulk payload fd is shorter than the header length", head.request_id)
        with mmap.mmap(fd, head.length, prot=mmap.PROT_READ) if head.length else _Empty() as mapping:
            return memoryview(bytes(mapping))
    except (OSError, ValueError) as error:
        raise ProtocolError(f"cannot read bulk payload: {error}", head.request_id) from None
    finally:
        os.close(fd)


class _Empty:
    def __enter__(self):
        return b""

    def __exit__(self, *exc):
        return None


def _fds(ancdata) -> list:
    fds: list = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(array.array("i", data[:usable]))
    return fds


def socket_pair() -> tuple[Channel, Channel]:
    """Two connected channels (for tests and in-process use)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return Channel(a), Channel(b)


__all__ = ["Channel", "Message", "PeerClosed", "socket_pair", "MsgType"]
