"""The driver's defences against hostile or broken clients: who a peer is and what it may hold.

- A client is one OS process: ``SO_PEERCRED`` gives the peer's pid and uid at connect time (the
  kernel's word, not the client's), and the pid's start time (``/proc/<pid>/stat``) tells a
  reused pid apart. Only the driver's own user (or root) may connect. Prepared models belong to
  their client (:class:`Clients`): any connection of the same process reaches them (a runtime
  that reconnects keeps its models), no other process can, and they go when the process is gone.
- The fd table is shared by connections and mapped pools (each mapping holds a duplicated fd):
  an :class:`FdBudget` keeps a reserve free so ``accept`` and the driver's own files never fail
  for lack of fds, and a :class:`PoolTable` bounds one connection's pools by count and bytes.
  Beyond a limit a request gets RESOURCE_EXHAUSTED_TRANSIENT (freeing makes room again).
- :func:`check_dimensions` refuses operand shapes whose size overflows 32 bits, or absurd ranks.

Example:
    >>> budget = FdBudget(10)
    >>> budget.take(8), budget.take(3), budget.used
    (True, False, 8)
"""
from __future__ import annotations

import os
import resource
import socket
import struct
import threading
from typing import NamedTuple

from nnscope.runtime.drivers.ipc.wire.codec import CodecError
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, OperandType

#: Connections served at once; more are closed as soon as they are accepted.
MAX_CONNECTIONS = 256
#: Shared pools one connection may keep mapped, and their total bytes.
MAX_POOLS_PER_CONNECTION = 1024
MAX_MAPPED_BYTES_PER_CONNECTION = 4 << 30
#: Prepared models one client process may hold.
MAX_MODELS_PER_CLIENT = 256
#: Largest operand rank accepted at prepare.
MAX_RANK = 32
#: fds never handed to clients (the driver's own files, trace output, accept's spare).
FD_RESERVE = 96
_UCRED = struct.Struct("3i")
_EXHAUSTED = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
_U32_MAX = 2**32 - 1


class ClientId(NamedTuple):
    pid: int
    start_time: int  # clock ticks after boot (0: unknown)


class Peer(NamedTuple):
    client: ClientId
    uid: int


def peer_of(sock: socket.socket) -> Peer:
    """The process at the other end of a connected Unix socket (from ``SO_PEERCRED``)."""
    pid, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return Peer(ClientId(pid, start_time(pid)), uid)


def may_connect(peer: Peer) -> bool:
    """Only the user who started the driver (or root) may use it."""
    return peer.uid in (os.geteuid(), 0)


def start_time(pid: int) -> int:
    """When process ``pid`` started (``/proc/<pid>/stat`` field 22); 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def raise_fd_limit() -> int:
    """Raise this process's soft fd limit to the hard one; returns the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


class FdBudget:
    """fds that connections and mapped pools may hold together (the limit less a reserve), with
    fair shares: one client process may hold at most a quarter of the connections and half of
    the pool fds, so a single hostile process cannot lock the others out."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.max_connections = max(4, min(MAX_CONNECTIONS, limit // 4))
        self.max_client_connections = max(2, self.max_connections // 4)
        self.max_client_pools = max(8, (limit - self.max_connections) // 2)
        self._lock = threading.Lock()  # fenced workers give back fds from their own threads

    @classmethod
    def for_this_process(cls) -> FdBudget:
        return cls(max(raise_fd_limit() - FD_RESERVE, 16))

    def take(self, count: int = 1) -> bool:
        with self._lock:
            if self.used + count > self.limit:
                return False
            self.used += count
            return True

    def give(self, count: int = 1) -> None:
        with self._lock:
            self.used = max(self.used - count, 0)

    def take_for(self, client: Client, count: int) -> bool:
        """``count`` pool fds for ``client`` within its share and the total (any thread)."""
        with self._lock:
            if client.pools + count > self.max_client_pools or self.used + count > self.limit:
                return False
            client.pools += count
            self.used += count
            return True

    def give_for(self, client: Client, count: int) -> None:
        with self._lock:
            client.pools -= count
            self.used = max(self.used - count, 0)


class PoolTable(dict):
    """One connection's mapped pools by id (the ``DecodeState.pools`` the execute decoder fills),
    bounded by count, bytes and the process's fd budget; an id announced twice in one request
    (since :meth:`begin`) is refused."""

    def __init__(self, budget: FdBudget, client: Client):
        super().__init__()
        self.budget = budget
        self.client = client
        self.bytes = 0
        self._fresh: set = set()

    def begin(self) -> None:
        """A new request starts."""
        if self._fresh:
            self._fresh.clear()

    def __setitem__(self, pool_id, region) -> None:
        if pool_id in self._fresh:
            region.close()
            raise CodecError(f"pool id {pool_id} announced twice in one request")
        if len(self) >= MAX_POOLS_PER_CONNECTION or \
                self.bytes + region.size > MAX_MAPPED_BYTES_PER_CONNECTION or \
                not self.budget.take_for(self.client, 1):
            region.close()
            raise HalError(_EXHAUSTED, f"pool limit reached: {len(self)} pools, {self.bytes} bytes "
                           f"mapped for this connection (free some first)")
        self._fresh.add(pool_id)
        self.bytes += region.size
        super().__setitem__(pool_id, region)

    def pop(self, pool_id, default=None):
        region = super().pop(pool_id, default)
        if region is not default:
            self.bytes -= region.size
            self.budget.give_for(self.client, 1)
        return region

    def clear(self) -> None:
        self.budget.give_for(self.client, len(self))
        self.bytes = 0
        super().clear()


class Client:
    """One client process: its prepared models (id -> model) and the fds they hold."""

    __slots__ = ("id", "models", "model_fds", "connections", "pools", "bursts", "fenced")

    def __init__(self, client_id: ClientId):
        self.id = client_id
        self.models: dict = {}
        self.model_fds: dict = {}
        self.connections = 0
        self.pools = 0  # fds its mapped pools, models, bursts and fenced runs hold
        self.bursts = 0  # bursts open (each a listener thread)
        self.fenced = 0  # fenced executions running (each a worker thread)


class Clients:
    """The clients with connections or prepared models, by :class:`ClientId`."""

    def __init__(self, budget: FdBudget):
        self.budget = budget
        self._clients: dict[ClientId, Client] = {}
        self._next_model = 1
        self._holders: dict = {}  # id(prepared model) -> bursts and IBuffers holding it
        self._released: dict = {}  # id -> prepared models released while held

    def busiest(self) -> Client | None:
        """The client holding the most connections."""
        return max(self._clients.values(), key=lambda c: c.connections, default=None)

    def attach(self, client_id: ClientId) -> Client:
        client = self._clients.get(client_id)
        if client is None:
            client = self._clients[client_id] = Client(client_id)
        client.connections += 1
        return client

    def detach(self, client: Client) -> None:
        client.connections -= 1
        if client.connections <= 0:
            self._forget_if_gone(client)

    def sweep(self) -> None:
        """Drop the models of client processes that have exited."""
        for client in [c for c in self._clients.values() if c.connections <= 0]:
            self._forget_if_gone(client)

    def add_model(self, client: Client, prepared, fds: int) -> int:
        """Register a prepared model holding ``fds`` mapped fds (already taken from the budget)."""
        if len(client.models) >= MAX_MODELS_PER_CLIENT:
            self.budget.give_for(client, fds)
            raise HalError(_EXHAUSTED, f"{MAX_MODELS_PER_CLIENT} prepared models held by this client "
                           f"(release some first)")
        model_id = self._next_model
        self._next_model += 1
        client.models[model_id] = prepared
        client.model_fds[model_id] = fds
        return model_id

    def release_model(self, client: Client, model_id: int) -> None:
        prepared = client.models.pop(model_id, None)
        if prepared is not None:
            self.budget.give_for(client, client.model_fds.pop(model_id, 0))
            self._release_unless_held(prepared)

    def hold(self, prepared) -> None:
        """A burst or IBuffer keeps ``prepared`` alive: its release (and its memory budget
        charge) waits for :meth:`let_go` of every holder, as AOSP's strong references."""
        self._holders[id(prepared)] = self._holders.get(id(prepared), 0) + 1

    def let_go(self, prepared) -> None:
        left = self._holders.pop(id(prepared), 1) - 1
        if left > 0:
            self._holders[id(prepared)] = left
        elif self._released.pop(id(prepared), None) is not None:
            prepared.release()

    def _release_unless_held(self, prepared) -> None:
        if id(prepared) in self._holders:
            self._released[id(prepared)] = prepared  # released by the last let_go
        else:
            prepared.release()  # e.g. a sample driver's memory budget charge

    def _forget_if_gone(self, client: Client) -> None:
        if client.id.start_time and start_time(client.id.pid) == client.id.start_time:
            return  # still running: it may reconnect to its models
        for model_id in list(client.models):
            self.release_model(client, model_id)
        self._clients.pop(client.id, None)


def check_dimensions(model) -> None:
    """Refuse operands whose rank exceeds :data:`MAX_RANK` or whose byte size overflows u32.

    Raises:
        CodecError: the first offending operand.
    """
    for graph in (model.main, *model.referenced):
        for index, operand in enumerate(graph.operands):
            dims = operand.dimensions
            if len(dims) > MAX_RANK:
                raise CodecError(f"operand {index}: rank {len(dims)} exceeds {MAX_RANK}")
            size = _element_size(operand.type)
            for dim in dims:
                size *= dim or 1
                if size > _U32_MAX:
                    raise CodecError(f"operand {index}: dimensions {tuple(dims)[:8]} overflow a "
                                     f"32-bit byte size")


_BYTES = {OperandType.TENSOR_FLOAT16: 2, OperandType.FLOAT16: 2, OperandType.TENSOR_QUANT16_SYMM: 2,
          OperandType.TENSOR_QUANT16_ASYMM: 2, OperandType.TENSOR_BOOL8: 1, OperandType.BOOL: 1,
          OperandType.TENSOR_QUANT8_ASYMM: 1, OperandType.TENSOR_QUANT8_SYMM: 1,
          OperandType.TENSOR_QUANT8_ASYMM_SIGNED: 1, OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: 1}


def _element_size(operand_type) -> int:
    return _BYTES.get(operand_type, 4)
