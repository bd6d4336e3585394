"""The sample drivers' compilation-cache file format: one versioned, checksummed record per file.

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
from scratch. A file verified before and unchanged since (``cache_memo``: inotify) is not read
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

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     write(f.fileno(), KIND_DATA, "sample-all", "1.3", bytes(32), bytes(32), b"weights")
    ...     bytes(read(f.fileno(), KIND_DATA, "sample-all", "1.3", bytes(32)).payload)
    b'weights'
"""
from __future__ import annotations

import os
import stat
import struct
import zlib
from typing import NamedTuple

import numpy as np

from nnscope.runtime.drivers.cache_memo import MEMO

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
