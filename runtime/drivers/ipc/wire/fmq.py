"""Fast message queue (FMQ): a single-producer single-consumer ring of bytes in shared memory.

One :class:`FmqChannel` carries messages in one direction. Its memfd (sealed like every pool in
:mod:`runtime.hal.shared_memory`, so it can never shrink under a mapping) holds a small header,
with the write and read indices on their own cache lines, followed by ``capacity`` bytes of ring.
A message is a u32 length and its bytes; one larger than the ring streams through it in pieces.
Indices are free-running u64 byte counts; a position is ``index % capacity``, so no copy can
leave the ring, and the reader and writer check ``0 <= write - read <= capacity`` on every access
(a peer that scribbles on the header gets :class:`FmqCorrupt`, never an out-of-range read).

Wake-up: two Linux eventfds, one per direction of waiting. The writer bumps ``data_event`` after
publishing bytes; the reader bumps ``space_event`` after freeing some, but only while the writer
has raised its wants-space flag in the header (a full ring is rare; this saves a syscall per
message). A blocked side polls its eventfd, so it sleeps in the kernel instead of spinning, and an
eventfd is a counter, so a signal sent before the waiter sleeps is not lost. (Python has no
memory fence, so the flag's wake-up could in theory be lost to store/load reordering; a writer
waiting for space therefore rechecks every 10 ms.) Why not a futex on the shared header as AOSP does:
Python has no futex call, while an eventfd is pollable (timeouts come for free, and one can join
a ``select`` with the driver socket) and crosses the socket with SCM_RIGHTS like the memfd.
Every blocking call takes a timeout, so a dead peer never hangs a caller (:class:`FmqTimeout`).

Indices are stored with single aligned 8-byte writes (a ``memoryview.cast('Q')`` item), which
x86-64 and arm64 make atomic; each side publishes its index only after copying the bytes.

Example:
    >>> channel = FmqChannel.create(64)
    >>> channel.write(b"frame")
    True
    >>> channel.read(timeout=1.0)
    b'frame'
    >>> channel.read(block=False) is None
    True
    >>> peer = FmqChannel.attach(*[os.dup(fd) for fd in channel.fds])   # in the other process
    >>> peer.close(); channel.close()
"""
from __future__ import annotations

import os
import select
import struct
import time

from nnscope.runtime.drivers.ipc.wire.codec import CodecError
from nnscope.runtime.hal.shared_memory import MappingError, map_fd, sealed_memfd
from nnscope.runtime.hal.sync_fence import close_fds, read_nowait, spin, write_nowait

MAGIC = 0x514D464E  # "NFMQ"
VERSION = 1
#: magic/version/capacity | write index (byte 64) | read index (128), writer-wants-space flag (136)
HEADER_SIZE = 192
MIN_CAPACITY = 16
#: Largest message a reader accepts unless told otherwise (a length above it is corruption).
DEFAULT_MAX_MESSAGE = 64 << 20
_LEN = struct.Struct("<I")
_INFO = struct.Struct("<IIQ")
_WRITE, _READ, _SPACE_WANTED = 64 // 8, 128 // 8, 136 // 8  # u64 slots of the header
_SLICE_S = 0.01  # longest sleep of a writer waiting for space between rechecks
_MASK = (1 << 64) - 1


class FmqError(RuntimeError):
    """A channel that cannot be used (bad arguments, broken by a timeout mid-message)."""


class FmqTimeout(FmqError, TimeoutError):
    """A blocking read or write found no peer progress before its timeout."""


class FmqPeerGone(FmqError):
    """A watched fd (the peer's connection hanging up, a stop signal) fired while waiting."""


class FmqCorrupt(CodecError):
    """The shared header or a length prefix is inconsistent (a broken or hostile peer)."""


class FmqChannel:
    """One direction of a fast message queue; see the module docstring.

    Attributes:
        fd: The memfd of the ring (header + ``capacity`` bytes).
        fds: ``(fd, data_event_fd, space_event_fd)``: what the peer passes to :meth:`attach`.
        capacity: Ring size in bytes.
    """

    def __init__(self, region, fds: tuple[int, int, int], capacity: int, max_message: int):
        self._region = region
        self.fds = fds
        self.fd = fds[0]
        self.capacity = capacity
        self.max_message = max_message
        self._index = region.view[:HEADER_SIZE].cast("Q")
        self._ring = region.view[HEADER_SIZE:HEADER_SIZE + capacity]
        self._data_poll = _poller(fds[1])
        self._space_poll = _poller(fds[2])
        self._body: bytearray | None = None  # a message being received in pieces
        self._expected = 0  # its announced length
        self._broken = False

    @classmethod
    def create(cls, capacity: int, max_message: int = DEFAULT_MAX_MESSAGE) -> FmqChannel:
        """A new empty channel with a ring of ``capacity`` bytes (this side owns the fds)."""
        if not MIN_CAPACITY <= capacity <= 1 << 40:
            raise ValueError(f"capacity {capacity} outside [{MIN_CAPACITY}, 2**40]")
        fd = sealed_memfd("nnscope-fmq", HEADER_SIZE + capacity)
        events = (os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK),
                  os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK))
        region = map_fd(fd, 0, HEADER_SIZE + capacity)
        _INFO.pack_into(region.view, 0, MAGIC, VERSION, capacity)
        return cls(region, (fd, *events), capacity, max_message)

    @classmethod
    def attach(cls, fd: int, data_event_fd: int, space_event_fd: int,
               max_message: int = DEFAULT_MAX_MESSAGE) -> FmqChannel:
        """Map a channel received from the peer; takes ownership of the three fds (closed by
        :meth:`close`, or at once when this raises).

        Raises:
            FmqCorrupt: not a sealed memfd, a wake-up fd that is not an eventfd (made
                non-blocking here: a signal never blocks), or a header that does not match.
        """
        fds = (fd, data_event_fd, space_event_fd)
        try:
            for event_fd in fds[1:]:
                _own_eventfd(event_fd)
            size = os.fstat(fd).st_size
            region = map_fd(fd, 0, size)
        except (OSError, MappingError) as error:
            close_fds(fds)
            raise FmqCorrupt(f"cannot map the FMQ: {error}") from None
        magic, version, capacity = _INFO.unpack_from(region.view) if size >= HEADER_SIZE else (0, 0, 0)
        if (magic, version) != (MAGIC, VERSION) or not MIN_CAPACITY <= capacity == size - HEADER_SIZE:
            region.close()
            close_fds(fds)
            raise FmqCorrupt(f"not an FMQ of this version ({size} bytes, magic {magic:#x})")
        return cls(region, fds, capacity, max_message)

    def watch(self, fd: int, events: int = select.POLLIN) -> None:
        """Also wake a blocked read or write when ``fd`` signals ``events`` or hangs up (an FMQ
        cannot tell whether its peer is alive: watch its connection with ``select.POLLRDHUP``,
        or a stop eventfd); the call then raises :class:`FmqPeerGone` unless a message or room
        arrived too. The caller keeps ``fd`` open while watched."""
        self._data_poll.register(fd, events)
        self._space_poll.register(fd, events)

    # -- writing ---------------------------------------------------------------------------

    def write(self, data, block: bool = True, timeout: float | None = None) -> bool:
        """Queue one message (bytes-like). Non-blocking: False when it does not fit whole now.

        Blocking: waits for room (up to ``timeout`` seconds, None = forever); a message larger
        than the ring streams through it as the reader frees space.

        Raises:
            FmqTimeout: no room in time. If part of the message had gone out, the channel is
                broken (later writes raise FmqError).
            FmqError: message above ``max_message``, broken channel, or a non-blocking write of
                a message that can never fit the ring.
        """
        if type(data) is not bytes and not isinstance(data, bytearray):
            data = memoryview(data).cast("B")
        size = len(data)
        total = _LEN.size + size
        index, capacity = self._index, self.capacity
        if self._broken or size > self.max_message or total > capacity:
            return self._write_large(data, block, timeout)
        write = index[_WRITE]
        used = (write - index[_READ]) & _MASK
        if total > capacity - used:
            if used > capacity:
                raise FmqCorrupt(f"indices claim {used} bytes in a {capacity}-byte ring")
            if not block:
                return False
            self._wait_room(total, _deadline(timeout))
        position = write % capacity
        if position + total <= capacity:  # the usual case: one contiguous copy
            _LEN.pack_into(self._ring, position, size)
            self._ring[position + _LEN.size:position + total] = data
        else:
            _copy_in(self._ring, position, _LEN.pack(size) + bytes(data))
        index[_WRITE] = (write + total) & _MASK
        _signal(self.fds[1])
        return True

    def _write_large(self, data, block: bool, timeout: float | None) -> bool:
        if self._broken:
            raise FmqError("channel broken by an earlier timeout mid-message")
        if len(data) > self.max_message:
            raise FmqError(f"message of {len(data)} bytes exceeds max_message {self.max_message}")
        if not block:
            raise FmqError(f"{len(data) + _LEN.size} bytes never fit a {self.capacity}-byte ring "
                           "at once; use a blocking write")
        src = memoryview(_LEN.pack(len(data)) + bytes(data))
        deadline = _deadline(timeout)
        self._wait_room(_LEN.size, deadline)  # the length prefix always goes out whole
        sent = 0
        while sent < len(src):
            try:
                room = self._wait_room(1, deadline)
            except FmqTimeout:
                self._broken = True
                raise FmqTimeout(f"peer stalled after {sent} of {len(src)} bytes; "
                                 "channel broken") from None
            write = self._index[_WRITE]
            piece = src[sent:sent + room]
            _copy_in(self._ring, write % self.capacity, piece)
            self._index[_WRITE] = (write + len(piece)) & _MASK
            _signal(self.fds[1])
            sent += len(piece)
        return True

    def _wait_room(self, need: int, deadline: float | None) -> int:
        """Sleep until ``need`` bytes are free. The reader signals space only while the
        writer's flag is up; a wake-up lost to store/load reordering costs one poll slice."""
        while (room := self.capacity - self._used()) < need:
            self._index[_SPACE_WANTED] = 1
            try:
                if self.capacity - self._used() < need and \
                        _wait(self._space_poll, self.fds[2], deadline, "room in the ring", _SLICE_S) \
                        and self.capacity - self._used() < need:
                    raise FmqPeerGone("the peer is gone (watched fd fired) while waiting for room")
            finally:
                self._index[_SPACE_WANTED] = 0
        return room

    # -- reading ---------------------------------------------------------------------------

    def read(self, block: bool = True, timeout: float | None = None, poll_s: float = 0.0) -> bytes | None:
        """The next message; None when non-blocking and no whole message is there yet.

        ``poll_s``: before going to sleep, watch the ring for that long (a polling window: the
        message is taken without waiting for the wake-up, at the price of a busy CPU; every 64
        looks it yields the CPU, so that a peer placed on the same CPU can write meanwhile).

        Raises:
            FmqTimeout: blocking and no whole message within ``timeout`` seconds (bytes of a
                streamed message already taken are kept; the next read resumes it).
            FmqCorrupt: inconsistent indices or a length above ``max_message``.
        """
        if self._index[_WRITE] != self._index[_READ] or self._body is not None:
            message = self._take_whole()
            if message is not None or (message := self._take()) is not None:
                return message
        if not block:
            return None
        if poll_s > 0 and self._poll_ring(poll_s):
            return self.read(block=False)
        deadline, data_poll, data_fd = _deadline(timeout), self._data_poll, self.fds[1]
        while True:
            gone = _wait(data_poll, data_fd, deadline, "a message")
            message = self._take_whole()
            if message is not None or (message := self._take()) is not None:
                return message
            if gone:
                raise FmqPeerGone("the peer is gone (watched fd fired) while waiting for a message")

    def _poll_ring(self, seconds: float) -> bool:
        """Watch the write index for up to ``seconds`` (``sync_fence.spin``); True once bytes
        arrived."""
        index, read = self._index, self._index[_READ]
        return spin(lambda: index[_WRITE] != read, seconds)

    def _take_whole(self) -> bytes | None:
        """The usual case, kept short: a whole message that does not wrap (else None)."""
        index, capacity = self._index, self.capacity
        read = index[_READ]
        available = (index[_WRITE] - read) & _MASK
        if self._body is not None or not _LEN.size <= available <= capacity:
            return None
        start = read % capacity + _LEN.size
        if start > capacity:
            return None
        (size,) = _LEN.unpack_from(self._ring, start - _LEN.size)
        if size > available - _LEN.size or start + size > capacity or size > self.max_message:
            return None
        message = self._ring[start:start + size].tobytes()
        index[_READ] = (read + _LEN.size + size) & _MASK
        if index[_SPACE_WANTED]:
            _signal(self.fds[2])
        return message

    def _take(self) -> bytes | None:
        """Any other case: a wrapped message, or one streaming in (taken piece by piece)."""
        available = self._used()
        if self._body is None:
            if available < _LEN.size:
                return None
            read = self._index[_READ]
            header = memoryview(bytearray(_LEN.size))
            _copy_into(self._ring, read % self.capacity, header)
            (size,) = _LEN.unpack(header)
            if size > self.max_message:
                raise FmqCorrupt(f"message length {size} exceeds max_message {self.max_message}")
            self._body, self._expected = bytearray(), size  # grows only as bytes arrive
            self._release(read, _LEN.size)
            available -= _LEN.size
        return self._take_piece(available)

    def _take_piece(self, available: int) -> bytes | None:
        body = self._body
        piece = min(available, self._expected - len(body))
        if piece:
            read = self._index[_READ]
            target = memoryview(bytearray(piece))
            _copy_into(self._ring, read % self.capacity, target)
            body += target
            self._release(read, piece)
        if len(body) < self._expected:
            return None
        message, self._body = bytes(body), None
        return message

    def _release(self, read: int, count: int) -> None:
        self._index[_READ] = (read + count) & _MASK
        if self._index[_SPACE_WANTED]:
            _signal(self.fds[2])

    def _used(self) -> int:
        used = (self._index[_WRITE] - self._index[_READ]) & _MASK
        if used > self.capacity:
            raise FmqCorrupt(f"indices claim {used} bytes in a {self.capacity}-byte ring")
        return used

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Unmap the ring and close the three fds (idempotent)."""
        if self.fd < 0:
            return
        self._index.release()
        self._ring.release()
        self._region.close()
        close_fds(self.fds)
        self.fd, self.fds = -1, (-1, -1, -1)

    def __enter__(self) -> FmqChannel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _own_eventfd(fd: int) -> None:
    """Refuse a wake-up fd that is not an eventfd (a file, pipe or /dev/zero would make a waiter
    spin, fail or block); make it non-blocking (each wake-up's write and read makes it so again:
    the peer shares the flag and may clear it)."""
    if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:[eventfd]":
        raise MappingError(f"wake-up fd is not an eventfd ({os.readlink(f'/proc/self/fd/{fd}')})")
    os.set_blocking(fd, False)


def _poller(fd: int):
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return poller


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + max(timeout, 0.0)


def _wait(poller, event_fd: int, deadline: float | None, what: str, slice_s: float | None = None) -> bool:
    """Sleep on ``event_fd`` until it is signalled (then reset it), ``slice_s`` passes (then
    return: the caller rechecks), or ``deadline`` passes (FmqTimeout). True when a watched fd
    fired."""
    left = None if deadline is None else deadline - time.monotonic()
    if left is not None and left <= 0:
        raise FmqTimeout(f"no {what} from the peer in time")
    if slice_s is not None and (left is None or slice_s < left):
        left = slice_s
    ready = poller.poll(None if left is None else max(1, int(left * 1000 + 0.999)))
    if not ready:
        return False
    try:
        read_nowait(event_fd)  # the peer may have made its eventfd blocking since
    except BlockingIOError:
        pass  # consumed already; the caller rechecks the indices anyway
    return len(ready) > 1 or ready[0][0] != event_fd


def _signal(event_fd: int) -> None:
    try:
        write_nowait(event_fd, 1)  # the peer may have made its eventfd blocking since
    except BlockingIOError:
        pass  # counter saturated: the waiter is woken anyway


def _copy_in(ring: memoryview, pos: int, data) -> None:
    first = min(len(data), len(ring) - pos)
    ring[pos:pos + first] = data[:first]
    if first < len(data):
        ring[:len(data) - first] = data[first:]


def _copy_into(ring: memoryview, pos: int, target: memoryview) -> None:
    first = min(len(target), len(ring) - pos)
    target[:first] = ring[pos:pos + first]
    target[first:] = ring[:len(target) - first]
