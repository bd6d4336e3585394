"""The driver's event loop: accept, read one record at a time, write replies without blocking.

One thread serves every connection (``epoll``). Guarantees that keep one client from hurting
the others:

- ``accept`` takes every pending connection per pass; it admits only the driver's own user
  (``SO_PEERCRED``), at most ``MAX_CONNECTIONS`` and only while the fd budget allows. A failing
  ``accept`` (EMFILE, ...) is logged and the pending connection shed; the loop goes on.
- Replies are sent with ``MSG_DONTWAIT``. What a peer does not take waits in its connection's
  output queue, and that connection is not read again until the queue drains, so the queue holds
  at most the replies of one request; a peer that takes nothing for :data:`STUCK_S` is dropped,
  and so is one that leaves :data:`MAX_UNREAD_BULK` memfd replies unread (each pins memory).
- Closing a connection stops its bursts with a bounded join; a listener still busy is closed
  by a later pass once it has ended (``burst_server.reap``).
- With a single client the loop waits in that client's ``recv`` itself (one syscall per
  request), back to ``epoll`` every ``_DIRECT_S`` so new connections are never starved.
- A connection whose execution went to the priority scheduler is *parked*: taken out of the
  ``epoll`` set until the scheduler's thread has sent the reply and handed it back (an eventfd
  wakes the loop), so nothing it sends meanwhile can free what the execution reads. A parked
  connection is never dropped to make room.

Example (``DriverService.serve_forever`` does this)::

    ServeLoop(service).run()
"""
from __future__ import annotations

import collections
import errno
import fcntl
import functools
import logging
import os
import select
import socket
import struct
import termios
import time

from nnscope.runtime.drivers.ipc.service import _guard, buffers, burst as burst_server
from nnscope.runtime.drivers.ipc.service.execute import DecodeState
from nnscope.runtime.drivers.ipc.wire.protocol import MAX_INLINE_PAYLOAD, ProtocolError
from nnscope.runtime.drivers.ipc.wire.transport import Channel, PeerClosed
from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.wire._trace import Phase
from nnscope.runtime.hal.sync_fence import close_fds, nap, spin

#: Seconds a peer may leave its replies unread before it is dropped.
STUCK_S = 5.0
#: Large (memfd) replies a peer may leave unread in its socket queue before it is dropped.
MAX_UNREAD_BULK = 8
#: How long the loop blocks in one connection's recv before it polls all sockets again.
_DIRECT_S = 0.05
_IN, _OUT = select.EPOLLIN, select.EPOLLOUT
_FD_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_log = logging.getLogger("nn.SampleDriver")


class Connection:
    """One client connection: its channel, decode state, pools, client and pending output."""

    __slots__ = ("channel", "state", "pools", "client", "pid", "outbox", "stuck_since", "dead",
                 "launched", "bursts", "parked", "unpark", "bulk_unread")

    def __init__(self, channel: Channel, client, pid: int, budget: _guard.FdBudget):
        self.channel = channel
        self.state = DecodeState()
        self.pools = self.state.pools = _guard.PoolTable(budget, client)
        self.client = client
        self.pid = pid
        self.outbox: collections.deque | None = None  # pending (bytes, fds) records
        self.stuck_since = 0.0
        self.dead = False
        self.launched = None  # the decoded request of an async execute being launched
        self.bursts: dict = {}  # burst id -> burst_server.BurstServer
        self.parked = False  # an execution of it is queued: read nothing more until it replies
        self.unpark = _no_loop  # called by the scheduler's thread once the reply is sent
        self.bulk_unread = 0  # large replies sent since the peer's queue was last seen empty

    def send(self, msg_type: int, request_id: int, payload) -> None:
        """Send now, or queue behind what the peer has not taken yet."""
        if self.dead or (len(payload) > MAX_INLINE_PAYLOAD and not self._may_send_bulk()):
            return
        try:
            if self.outbox:
                self.outbox.append(Channel.pending(msg_type, request_id, payload))
                return
            pending = self.channel.send_nowait(msg_type, request_id, payload)
        except (PeerClosed, OSError):
            self.dead = True
            return
        if pending is not None:
            self.outbox = collections.deque([pending])
            self.stuck_since = time.monotonic()

    def _may_send_bulk(self) -> bool:
        """A large reply is a memfd pinned in the peer's socket queue until it reads it: a peer
        that leaves :data:`MAX_UNREAD_BULK` of them unread (its queue never empty meanwhile)
        is dropped instead of sent more."""
        if _unread_bytes(self.channel.sock) == 0:
            self.bulk_unread = 0
        self.bulk_unread += 1
        if self.bulk_unread > MAX_UNREAD_BULK:
            self.dead = True
        return not self.dead

    def flush(self) -> None:
        """Send what the peer now takes."""
        try:
            while self.outbox:
                if not self.channel.send_pending(self.outbox[0]):
                    return
                self.outbox.popleft()
                self.stuck_since = time.monotonic()
        except (PeerClosed, OSError):
            self.dead = True

    def close(self) -> None:
        for burst in self.bursts.values():
            burst.signal_stop()  # all at once: each join below is then short
        for burst in self.bursts.values():
            burst.stop()
        self.bursts.clear()
        self._unbind()
        self.state.close()
        while self.outbox:
            close_fds(self.outbox.popleft()[1])
        self.channel.close()

    def forget_requests(self) -> None:
        """Drop the requests this connection remembers (memos, the last one, the models'
        bindings of them): a freed IBuffer must not stay alive, uncharged, through them."""
        self._unbind()
        self.state.memos.clear()
        self.state.last = (None, (), None)

    def _unbind(self) -> None:
        """Make the client's models forget requests decoded on this connection: their cached
        numpy views would keep the connection's pools (and fds) mapped after it is gone."""
        state = self.state
        requests = {id(state.last[2]), *(id(memo.request) for memo in state.memos.values())}
        for prepared in self.client.models.values():
            prepared.forget(lambda request: id(request) in requests)


def _unread_bytes(sock) -> int:
    """Bytes the peer has not read yet (``SIOCOUTQ``); 0 when it cannot be told."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    except OSError:
        return 0


def _no_loop() -> None:
    """The unpark of a connection no loop serves (tests drive the service directly)."""


class ServeLoop:
    """Runs ``service`` (a ``DriverService``) until it stops running or its parent exits."""

    def __init__(self, service):
        self.service = service
        self.listener = service.listener
        self.budget: _guard.FdBudget = service.budget
        self.clients: _guard.Clients = service.clients
        self.connections: dict[int, Connection] = {}
        self.poller = select.epoll()
        self._writing: set = set()  # fds registered for EPOLLOUT (their outbox is not empty)
        self._parked: set = set()  # fds not polled while an execution of theirs is queued
        self._unparked: collections.deque = collections.deque()  # fds the scheduler released
        self._wakeup = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._spare = -1
        self._last_warning = 0.0
        self._wait_label = f"{service.label}::syncWait"

    def run(self) -> None:
        self.listener.setblocking(False)
        listener_fd = self.listener.fileno()
        fenced = self.service.fenced
        fenced_fd = fenced.fileno()
        self.poller.register(listener_fd, _IN)
        self.poller.register(self._wakeup, _IN)
        self.poller.register(fenced_fd, _IN)
        self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        connections, serve, service = self.connections, self._serve, self.service
        monotonic = time.monotonic
        poll_due, direct = 0.0, None
        try:
            while service.running:
                if len(connections) == 1 and not self._writing and not self._parked and monotonic() < poll_due \
                        and not fenced.waiting():
                    # One client: wait for its next record in recv itself; back to epoll after a
                    # quiet _DIRECT_S and at least that often (new connections, orphan check).
                    if direct is None or connections.get(direct[0]) is not direct[1]:  # fds are reused
                        direct = next(iter(connections.items()))
                    if serve(*direct) is None:
                        poll_due = 0.0
                    continue
                events = self._poll(0.2 if self._writing else 1.0)
                poll_due = monotonic() + _DIRECT_S
                if any(fd == fenced_fd for fd, _ in events):  # a step whose fence signalled first
                    fenced.ready()
                for fd, mask in events:
                    if fd == listener_fd:
                        self._accept_all()
                    elif fd == self._wakeup:
                        self._resume_unparked()
                    elif fd in connections:
                        if mask & _OUT:
                            self._flush(fd, connections[fd])
                        else:
                            serve(fd, connections[fd])
                if fenced.waiting():
                    fenced.expire()
                if self._writing:
                    self._drop_stuck(monotonic())
                if service.ending_bursts:
                    burst_server.reap(service)
                if not events:
                    self._idle()
        finally:
            for fd in list(connections):
                self._drop(fd)
            fenced.close()
            if self._spare >= 0:
                os.close(self._spare)
            self.poller.close()
            os.close(self._wakeup)

    def _poll(self, timeout: float) -> list:
        """The ready fds within ``timeout`` (cut to the earliest deadline of a fenced job that
        waits). While fenced jobs wait, the loop looks without sleeping for a while, and again
        around the time their fences are expected to signal (a fence signalling then costs no
        wake-up); the looks and sleeps are a fence wait (``SampleDriver::syncWait``), unless
        something was ready at once."""
        fenced = self.service.fenced
        if not fenced.waiting():
            return self.poller.poll(timeout)
        events = self.poller.poll(0)
        if events:  # no wait: no span
            return events
        due = fenced.due_s()
        if due is not None:
            timeout = min(timeout, due)
        with _trace.driver(Phase.EXECUTION, self._wait_label):
            return self._look_around(fenced, timeout)

    def _look_around(self, fenced, timeout: float) -> list:
        """Look without sleeping for the jobs' watch window first (right after an event the
        next fence often follows), then sleep until their look window, look through it, and
        sleep the rest of ``timeout``. No look while this driver's scheduler runs a job: it
        would take the CPU and the GIL from that job."""
        look, clock = self.poller.poll, time.monotonic_ns
        watch = 0.0 if self.service.executions.scheduler.busy() else fenced.watch_s()
        if watch <= 0:
            return look(timeout)
        events = spin(lambda: look(0), min(watch, timeout))
        window = None if events else fenced.look_window(clock())
        if window is None:
            return events or look(timeout)
        ahead = (window[0] - clock()) / 1e9
        if ahead >= timeout:
            return look(timeout)
        if nap(self.poller.fileno(), ahead):
            return look(0)
        events = spin(lambda: look(0), min(timeout, (window[1] - clock()) / 1e9))
        return events or look(timeout)

    # ------------------------------------------------------------------ reading and writing
    def _serve(self, fd: int, connection: Connection) -> bool | None:
        """Answer one record of ``connection``; None when nothing arrived within _DIRECT_S."""
        try:
            message = connection.channel.recv(_DIRECT_S)
        except ProtocolError as error:
            self.service.reject(connection, error)
            message = None
        except socket.timeout:
            return None
        except (PeerClosed, OSError):
            self._drop(fd)
            return False
        if message is not None:
            try:
                self.service.handle(connection, message)
            finally:
                if message.fds:
                    close_fds(message.fds)
        if connection.parked:
            self._park(fd)
            return True
        if connection.dead:
            self._drop(fd)
            return False
        if connection.outbox and fd not in self._writing:
            self.poller.modify(fd, _OUT)  # read nothing more until the peer takes its replies
            self._writing.add(fd)
        return True

    def connections_of(self, client) -> list:
        """The open connections of ``client`` (parked ones too)."""
        return [c for c in self.connections.values() if c.client is client]

    def _park(self, fd: int) -> None:
        """Stop polling ``fd`` until the scheduler has sent the queued execution's reply."""
        self.poller.unregister(fd)
        self._parked.add(fd)

    def _unpark(self, fd: int) -> None:
        """(The scheduler's thread) hand ``fd`` back to the loop."""
        self._unparked.append(fd)
        os.eventfd_write(self._wakeup, 1)

    def _resume_unparked(self) -> None:
        try:
            os.eventfd_read(self._wakeup)
        except BlockingIOError:
            pass
        while self._unparked:
            fd = self._unparked.popleft()
            self._parked.discard(fd)
            connection = self.connections.get(fd)
            if connection is None:
                continue
            connection.parked = False
            self.poller.register(fd, _IN)
            if connection.dead:
                self._drop(fd)
            elif connection.outbox:
                self.poller.modify(fd, _OUT)
                self._writing.add(fd)

    def _flush(self, fd: int, connection: Connection) -> None:
        connection.flush()
        if connection.dead:
            self._drop(fd)
        elif not connection.outbox:
            self.poller.modify(fd, _IN)
            self._writing.discard(fd)

    def _drop_stuck(self, now: float) -> None:
        for fd in [fd for fd in self._writing if now - self.connections[fd].stuck_since > STUCK_S]:
            self._warn(f"dropping a client that has not read its replies for {STUCK_S:g}s "
                       f"(pid {self.connections[fd].pid})")
            self._drop(fd)

    def _drop(self, fd: int) -> None:
        if fd in self._parked:
            return  # its queued execution still reads its pools: dropped once it replied
        connection = self.connections.pop(fd, None)
        if connection is None:
            return
        self._writing.discard(fd)
        try:
            self.poller.unregister(fd)
        except OSError:
            pass
        self.service.fenced.drop(connection)
        connection.close()
        self.budget.give(1)
        self.clients.detach(connection.client)

    def _idle(self) -> None:
        parent = self.service.parent_pid
        if parent is not None and os.getppid() != parent:
            self.service.running = False  # idle and orphaned: the runtime process is gone
        self.clients.sweep()
        buffers.TRACKER.sweep(self.clients.let_go)  # IBuffers of exited clients, and their charge

    # ------------------------------------------------------------------ accepting
    def _accept_all(self) -> None:
        """Accept every pending connection; never raises."""
        while True:
            try:
                sock, _ = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as error:
                if error.errno in _FD_ERRORS:
                    self._shed(error)
                    return
                continue  # e.g. ECONNABORTED: that peer gave up
            self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        try:
            peer = _guard.peer_of(sock)
        except OSError:
            sock.close()
            return
        if not _guard.may_connect(peer):
            self._warn(f"refused a connection from uid {peer.uid} (pid {peer.client.pid})")
            sock.close()
            return
        client = self.clients.attach(peer.client)
        if client.connections > self.budget.max_client_connections or not self._make_room():
            self._warn(f"refused a connection from pid {peer.client.pid}: {client.connections} of its "
                       f"own, {len(self.connections)} in all, {self.budget.used} of "
                       f"{self.budget.limit} fds in use")
            self.clients.detach(client)
            sock.close()
            return
        connection = Connection(Channel(sock), client, peer.client.pid, self.budget)
        connection.unpark = functools.partial(self._unpark, sock.fileno())
        self.connections[sock.fileno()] = connection
        self.poller.register(sock.fileno(), _IN)

    def _make_room(self) -> bool:
        """Take an fd for a new connection; when all are taken, drop one connection of the
        client holding the most (if it holds more than one)."""
        if len(self.connections) < self.budget.max_connections and self.budget.take(1):
            return True
        hog = self.clients.busiest()
        if hog is None or hog.connections < 2:
            return False
        fd = next((fd for fd, c in self.connections.items() if c.client is hog and fd not in self._parked), None)
        if fd is None:
            return False
        self._warn(f"dropping a connection of pid {hog.id.pid}, which holds {hog.connections}")
        self._drop(fd)
        return len(self.connections) < self.budget.max_connections and self.budget.take(1)

    def _shed(self, error: OSError) -> None:
        """Out of fds: close pending connections (with the spare fd freed) instead of spinning."""
        self._warn(f"accept failed ({error}); shedding pending connections")
        if self._spare >= 0:
            os.close(self._spare)
            self._spare = -1
        try:
            while True:
                self.listener.accept()[0].close()
        except OSError:
            pass
        try:
            self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            time.sleep(0.05)  # still no fd free: back off briefly, then serve on

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= 1.0:  # at most one line a second
            self._last_warning = now
            _log.warning("%s", message)
