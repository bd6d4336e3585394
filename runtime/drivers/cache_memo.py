"""A driver's memory of the cache files it has verified, forgotten the moment a file changes.

``prepareModelFromCache`` of an unchanged file then skips reading and checksumming its payload
again (for the built-in model, 5 MB of weights: most of a cached preparation). An entry is keyed
by the file (device, inode, size) and the header fields ``cache_files.read`` checks (kind,
driver, version, token), and lives only while the kernel reports no change to the file: each
remembered file has an inotify watch (written, truncated, attributes changed, moved, deleted),
and the event queue is drained before every lookup. The kernel queues the event inside the
``write``/``truncate`` call itself, so a change made before a lookup is always seen. The watch is
added *before* the file is read, and an event during the read means the record is not kept. A
full event queue (IN_Q_OVERFLOW) forgets everything; without inotify nothing is remembered.
inotify does not see stores through a shared mapping of the file: an entry then still serves the
bytes verified before (right for the token), never bytes that were not verified.
At most :data:`MAX_ENTRIES` files and :data:`MAX_BYTES` of payload, least recently used out;
a watch lives only as long as a remembered record needs it (so at most MAX_ENTRIES watches,
plus one per read in progress), and only regular files are watched.

Example (``cache_files.read`` does this)::

    key = MEMO.key(fd, kind, driver, version, token)
    record = MEMO.get(key)          # None: read and verify the file, then
    watch = MEMO.watch(fd)          # before reading it
    MEMO.put(key, watch, record)    # kept only if the file did not change meanwhile
"""
from __future__ import annotations

import collections
import ctypes
import os
import stat
import struct
import threading

#: Files remembered at once, and payload bytes.
MAX_ENTRIES = 16
MAX_BYTES = 256 << 20
_IN_MODIFY, _IN_ATTRIB = 0x2, 0x4  # not IN_CLOSE_WRITE: the runtime opens cache files read-write
_IN_MOVE_SELF, _IN_DELETE_SELF, _IN_Q_OVERFLOW, _IN_IGNORED = 0x800, 0x400, 0x4000, 0x8000
_CHANGES = _IN_MODIFY | _IN_ATTRIB | _IN_MOVE_SELF | _IN_DELETE_SELF
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, name length


def _inotify():
    """(inotify fd, libc inotify_add_watch, inotify_rm_watch), or None without inotify."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    return (fd, libc.inotify_add_watch, libc.inotify_rm_watch) if fd >= 0 else None


class VerifiedFiles:
    """The remembered records (thread-safe: burst and socket threads may prepare at once)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict = collections.OrderedDict()  # key -> (wd, record, bytes)
        self._bytes = 0
        self._changed: set = set()  # watches with an event since they were added
        self._reading: collections.Counter = collections.Counter()  # watches of reads under way
        self._inotify = _inotify()  # now: a driver's fd count does not change on first use
        self.hits = 0

    @staticmethod
    def key(fd: int, *checked) -> tuple:
        info = os.fstat(fd)
        return (info.st_dev, info.st_ino, info.st_size, *checked)

    def get(self, key: tuple):
        with self._lock:
            self._drain()
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]

    def holds(self, record) -> bool:
        """True while ``record`` is remembered (its file unchanged since it was verified)."""
        with self._lock:
            self._drain()
            return any(entry[1] is record for entry in self._entries.values())

    def watch(self, fd: int) -> int | None:
        """Watch the regular file behind ``fd`` for changes; its watch id, or None (then nothing
        is kept). The caller ends the watch with :meth:`put` or :meth:`unwatch`."""
        with self._lock:
            if self._inotify is None or not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            wd = self._inotify[1](self._inotify[0], f"/proc/self/fd/{fd}".encode(), _CHANGES)
            if wd < 0:
                return None
            self._drain()
            self._changed.discard(wd)  # events from before this read do not count
            self._reading[wd] += 1
            return wd

    def unwatch(self, wd: int | None) -> None:
        """End a watch that no remembered record needs (a failed read)."""
        if wd is not None:
            with self._lock:
                self._done_reading(wd)
                self._release(wd)

    def put(self, key: tuple, wd: int | None, record, size: int) -> None:
        """Remember ``record`` unless its file changed since :meth:`watch` (or is too large);
        the watch ends with the last record that needs it."""
        if wd is None:
            return
        with self._lock:
            self._drain()
            self._done_reading(wd)
            if wd in self._changed or size > MAX_BYTES:
                self._release(wd)
                return
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
                self._release(old[0], keep=wd)
            self._entries[key] = (wd, record, size)
            self._bytes += size
            while len(self._entries) > MAX_ENTRIES or self._bytes > MAX_BYTES:
                evicted = self._entries.popitem(last=False)[1]
                self._bytes -= evicted[2]
                self._release(evicted[0])

    def _done_reading(self, wd: int) -> None:
        self._reading[wd] -= 1
        if self._reading[wd] <= 0:
            del self._reading[wd]

    def watches(self) -> int:
        """inotify watches held now (one per remembered file; at most MAX_ENTRIES)."""
        with self._lock:
            return len({entry[0] for entry in self._entries.values()} | set(self._reading))

    def _release(self, wd: int, keep: int | None = None) -> None:
        """Remove watch ``wd`` unless a remembered record, a read in progress (or ``keep``)
        still needs it."""
        if wd == keep or wd in self._reading or any(entry[0] == wd for entry in self._entries.values()):
            return
        self._changed.discard(wd)
        self._inotify[2](self._inotify[0], wd)  # fails harmlessly if the file is gone

    def _drain(self) -> None:
        """Read every queued event (caller holds the lock); forget the files that changed."""
        if self._inotify is None:
            return
        while True:
            try:
                data = os.read(self._inotify[0], 65536)
            except BlockingIOError:
                return
            for wd, mask in _events(data):
                if mask & _IN_Q_OVERFLOW:
                    for entry in self._entries.values():
                        self._inotify[2](self._inotify[0], entry[0])
                    self._entries.clear()
                    self._bytes = 0
                    self._changed.update(self._reading)  # unknown changes: keep no read under way
                    continue
                if mask & _IN_IGNORED:  # the watch is gone (removed, or its file deleted)
                    self._changed.discard(wd)
                    continue
                self._changed.add(wd)
                for key in [k for k, entry in self._entries.items() if entry[0] == wd]:
                    self._bytes -= self._entries.pop(key)[2]
                self._release(wd)


def _events(data: bytes):
    """(watch id, mask) of each inotify_event in ``data``."""
    offset = 0
    while offset + _EVENT.size <= len(data):
        wd, mask, _, length = _EVENT.unpack_from(data, offset)
        offset += _EVENT.size + length
        yield wd, mask


#: The driver process's memory of verified cache files.
MEMO = VerifiedFiles()
