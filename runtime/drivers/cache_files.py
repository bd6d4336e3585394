"""The sample drivers' compilation-cache file format: one versioned, checksummed record per file,
and the driver's memory of the files it has verified.

A cache file (model cache or data cache, see NNAPI ``getNumberOfCacheFilesNeeded``) is a
fixed 196-byte little-endian header followed by the payload, zero-padded to a multiple of
:data:`BLOCK` bytes::

    magic 8s (``\\xabNNSC\\r\\n\\x1a``) | format version u16 | kind u8 (1 model, 2 data) | reserved u8
    | reserved u32 | driver name 48s | driver version 32s | token 32s | model digest 32s
    | payload length u64 | payload checksum 3*u64 | header checksum u32 (crc32 of the rest)

:func:`write` fills a file descriptor (the runtime opened it; AOSP passes fds too) and
:func:`read` checks every field against what the driver expects before returning the payload:
the header checksum, magic, version, kind, driver name and version, token, the exact file size
and the payload checksum. Anything else raises :class:`CacheError`; the caller then prepares
from scratch. A file verified before and unchanged since (:data:`MEMO`, below) is not read
again. The payload is read into private memory (never a live mapping of the file, which
the runtime may rewrite or truncate while the prepared model runs). Nothing here is executed or
unpickled: a cache file is numbers and bytes.

The payload checksum is a position-weighted 64-bit sum (Fletcher-like) over the payload as
little-endian u64 words in rows of :data:`ROW_WORDS`: each row's words weighted by odd column
weights ``2c + 1`` (so every changed word shows), then those row values summed plainly, weighted
by row number and by its square, all mod 2**64. The weights are applied in one pass over the
payload (one ``einsum``: the payload is read once, which matters when memory is contended; a
CRC over 5 MB costs more than the rest of a cached preparation), and it catches any changed,
dropped, swapped or moved word region; it is not a defence against a deliberately forged file.

The driver's memory of the files it verified (:class:`VerifiedFiles`, one per process:
:data:`MEMO`) forgets a file the moment it changes, so ``prepareModelFromCache`` of an unchanged
file skips reading and checksumming its payload again (for the built-in model, 5 MB of weights:
most of a cached preparation). An entry is keyed by the file (device, inode, size) and the header
fields :func:`read` checks (kind, driver, version, token), and lives only while the kernel
reports no change to the file: each remembered file has an inotify watch (written, truncated,
attributes changed, moved, deleted), and the event queue is drained before every lookup. The
kernel queues the event inside the ``write``/``truncate`` call itself, so a change made before a
lookup is always seen. The watch is added *before* the file is read, and an event during the
read means the record is not kept. A full event queue (IN_Q_OVERFLOW) forgets everything;
without inotify nothing is remembered. inotify does not see stores through a shared mapping of
the file: an entry then still serves the bytes verified before (right for the token), never
bytes that were not verified. At most :data:`MEMO_MAX_ENTRIES` files and :data:`MEMO_MAX_BYTES`
of payload, least recently used out; a watch lives only as long as a remembered record needs it
(so at most MEMO_MAX_ENTRIES watches, plus one per read in progress), and only regular files are
watched. :func:`read` uses it so::

    key = MEMO.key(fd, kind, driver, version, token)
    record = MEMO.get(key)          # None: read and verify the file, then
    watch = MEMO.watch(fd)          # before reading it
    MEMO.put(key, watch, record, size)  # kept only if the file did not change meanwhile

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     write(f.fileno(), KIND_DATA, "sample-all", "1.3", bytes(32), bytes(32), b"weights")
    ...     bytes(read(f.fileno(), KIND_DATA, "sample-all", "1.3", bytes(32)).payload)
    b'weights'
"""
from __future__ import annotations

import collections
import ctypes
import os
import stat
import struct
import threading
import zlib
from typing import NamedTuple

import numpy as np

#: Like PNG's: a first byte that is no pickle opcode and not ASCII, then text, then CR LF SUB.
MAGIC = b"\xabNNSC\r\n\x1a"
FORMAT_VERSION = 2
KIND_MODEL, KIND_DATA = 1, 2
#: Payloads are padded to this many bytes (a whole number of checksum rows).
BLOCK = 4096
ROW_WORDS = BLOCK // 8
_COLUMN_WEIGHTS = 2 * np.arange(ROW_WORDS, dtype=np.uint64) + 1
_BODY = struct.Struct("<8sHBBI48s32s32s32sQ3Q")
_CRC = struct.Struct("<I")
HEADER_SIZE = _BODY.size + _CRC.size
#: Byte ranges of the header fields, for tests that corrupt each one.
FIELDS = {"magic": (0, 8), "version": (8, 10), "kind": (10, 11), "reserved": (11, 16),
          "driver": (16, 64), "driver_version": (64, 96), "token": (96, 128),
          "model_digest": (128, 160), "payload_length": (160, 168), "checksum": (168, 192),
          "header_checksum": (192, 196)}
#: Largest payload a cache file of each kind may declare (the driver reads it into memory): a
#: model cache holds a model's structure, a data cache its constants. Larger ones are neither
#: written nor read (the model is prepared from scratch).
MAX_PAYLOADS = {KIND_MODEL: 16 << 20, KIND_DATA: 256 << 20}
MAX_PAYLOAD = max(MAX_PAYLOADS.values())
#: The payload is read in pieces of this many bytes (memory is touched only as data comes).
READ_PIECE = 8 << 20


class CacheError(ValueError):
    """A cache file that is missing, foreign, truncated, extended or corrupted."""


class CacheRecord(NamedTuple):
    model_digest: bytes
    payload: memoryview  # exactly the payload bytes (private memory, read-only view)
    sums: tuple[int, int, int]  # the payload checksum


class Sealed(NamedTuple):
    """A payload ready to write: zero-padded, with its checksum."""

    padded: np.ndarray
    length: int
    sums: tuple[int, int, int]


def seal(payload) -> Sealed:
    """Pad ``payload`` (bytes-like) to :data:`BLOCK` and checksum it."""
    length = len(payload)
    padded = np.zeros(padded_size(length), np.uint8)
    padded[:length] = np.frombuffer(payload, np.uint8)
    return Sealed(padded, length, checksum(padded))


def seal_padded(padded: np.ndarray, length: int) -> Sealed:
    """Checksum a payload of ``length`` bytes already laid out, zero-padded, in ``padded``
    (uint8, :func:`padded_size` long): no copy."""
    if padded.dtype != np.uint8 or len(padded) != padded_size(length):
        raise CacheError("payload buffer is not padded to the block size")
    return Sealed(padded, length, checksum(padded))


def checksum(padded: np.ndarray) -> tuple[int, int, int]:
    """The three position-weighted sums of a payload padded to a multiple of :data:`BLOCK`."""
    rows = np.einsum("ij,j->i", padded.view("<u8").reshape(-1, ROW_WORDS), _COLUMN_WEIGHTS)
    number = np.arange(1, len(rows) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return (int(rows.sum(dtype=np.uint64)), int(np.dot(rows, number)),
                int(np.dot(rows, number * number)))


def padded_size(length: int) -> int:
    return -(-length // BLOCK) * BLOCK


def _text(value: str, size: int) -> bytes:
    data = value.encode("utf-8")
    if len(data) > size:
        raise CacheError(f"{value!r} is longer than {size} bytes")
    return data


def header(kind: int, driver: str, version: str, token: bytes, digest: bytes,
           length: int, sums: tuple[int, int, int]) -> bytes:
    body = _BODY.pack(MAGIC, FORMAT_VERSION, kind, 0, 0, _text(driver, 48), _text(version, 32),
                      token, digest, length, *sums)
    return body + _CRC.pack(zlib.crc32(body))


def write(fd: int, kind: int, driver: str, version: str, token: bytes, digest: bytes,
          payload) -> None:
    """Replace the content of ``fd`` with one record (``payload``: bytes-like or :class:`Sealed`).

    Raises:
        CacheError: a name too long for its field. OSError: the file cannot be written.
    """
    sealed = payload if isinstance(payload, Sealed) else seal(payload)
    if sealed.length > MAX_PAYLOADS[kind]:
        raise CacheError(f"payload of {sealed.length} bytes exceeds the {MAX_PAYLOADS[kind]}-byte "
                         f"limit of its kind")
    record = header(kind, driver, version, token, digest, sealed.length, sealed.sums)
    os.ftruncate(fd, 0)
    _write_all(fd, record, 0)
    _write_all(fd, memoryview(sealed.padded), HEADER_SIZE)


def _write_all(fd: int, data, offset: int) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def read(fd: int, kind: int, driver: str, version: str, token: bytes,
         max_payload: int = MAX_PAYLOAD) -> CacheRecord:
    """The record in ``fd`` if it is exactly what this driver wrote for ``token``. Before any
    payload is read: the file must be a regular file, its header check out, its payload be at
    most ``max_payload`` and :data:`MAX_PAYLOADS` of its kind, and its size match with no
    hole (a sparse file would read as zeros costing no disk); then it is read in pieces.

    Raises:
        CacheError: naming the first check that failed.
    """
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CacheError("the cache fd is not a regular file")
        key = MEMO.key(fd, kind, driver, version, token)
        remembered = MEMO.get(key)
        if remembered is not None:
            return remembered
        watch = MEMO.watch(fd)
    except OSError as error:
        raise CacheError(f"cannot read the cache file: {error}") from None
    try:
        record = _read_checked(fd, kind, driver, version, token, min(max_payload, MAX_PAYLOADS[kind]))
    except BaseException:
        MEMO.unwatch(watch)
        raise
    MEMO.put(key, watch, record, padded_size(len(record.payload)))
    return record


def _read_checked(fd: int, kind: int, driver: str, version: str, token: bytes, limit: int):
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, HEADER_SIZE, 0)
    except OSError as error:
        raise CacheError(f"cannot read the cache file: {error}") from None
    length, sums = _check_header(head, kind, driver, version, token)
    if length > limit:
        raise CacheError(f"payload length {length} is implausible (at most {limit} bytes)")
    if size != HEADER_SIZE + padded_size(length):
        raise CacheError(f"file of {size} bytes, the header says {HEADER_SIZE + padded_size(length)}")
    padded = _read_payload(fd, padded_size(length))
    if checksum(padded) != sums:
        raise CacheError("payload checksum mismatch")
    padded.flags.writeable = False
    return CacheRecord(head[FIELDS["model_digest"][0]:FIELDS["model_digest"][1]],
                       memoryview(padded)[:length], sums)


def _read_payload(fd: int, size: int) -> np.ndarray:
    """``size`` payload bytes, read in :data:`READ_PIECE` pieces into pages that cost nothing
    until read into; a hole or a short read is a CacheError."""
    try:
        if size and os.lseek(fd, HEADER_SIZE, os.SEEK_HOLE) < HEADER_SIZE + size:
            raise CacheError("the cache file has holes (sparse): not a file this driver wrote")
        padded = np.empty(size, np.uint8)
        for start in range(0, size, READ_PIECE):
            piece = padded[start:start + READ_PIECE]
            if os.preadv(fd, [piece], HEADER_SIZE + start) != len(piece):
                raise CacheError(f"payload truncated while reading (at byte {start} of {size})")
    except OSError as error:
        raise CacheError(f"cannot read the payload: {error}") from None
    return padded


def _check_header(head: bytes, kind: int, driver: str, version: str, token: bytes):
    if len(head) < HEADER_SIZE:
        raise CacheError(f"file shorter than the {HEADER_SIZE}-byte header")
    (magic, file_version, file_kind, _, _, name, driver_version, file_token, _, length,
     *sums) = _BODY.unpack_from(head)
    if _CRC.unpack_from(head, _BODY.size)[0] != zlib.crc32(head[:_BODY.size]):
        raise CacheError("header checksum mismatch")
    checks = ((magic == MAGIC, "not a cache file (bad magic)"),
              (file_version == FORMAT_VERSION, f"format version {file_version}, expected {FORMAT_VERSION}"),
              (file_kind == kind, f"cache kind {file_kind}, expected {kind} (model/data swapped?)"),
              (name.rstrip(b"\0") == driver.encode(), "written by another driver"),
              (driver_version.rstrip(b"\0") == version.encode(), "written by another driver version"),
              (file_token == token, "written for another token"),
              (length <= MAX_PAYLOADS[kind], f"payload length {length} is implausible"))
    for ok, problem in checks:
        if not ok:
            raise CacheError(problem)
    return length, tuple(sums)


# --------------------------------------------------------------------------- the memo of verified files
#: Files the memo remembers at once, and their payload bytes.
MEMO_MAX_ENTRIES = 16
MEMO_MAX_BYTES = 256 << 20
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
            if wd in self._changed or size > MEMO_MAX_BYTES:
                self._release(wd)
                return
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
                self._release(old[0], keep=wd)
            self._entries[key] = (wd, record, size)
            self._bytes += size
            while len(self._entries) > MEMO_MAX_ENTRIES or self._bytes > MEMO_MAX_BYTES:
                evicted = self._entries.popitem(last=False)[1]
                self._bytes -= evicted[2]
                self._release(evicted[0])

    def _done_reading(self, wd: int) -> None:
        self._reading[wd] -= 1
        if self._reading[wd] <= 0:
            del self._reading[wd]

    def watches(self) -> int:
        """inotify watches held now (one per remembered file; at most MEMO_MAX_ENTRIES)."""
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
