"""Transparent gzip unwrapping for trace files of any format.

Registered as a content unwrapper: when the content starts with the gzip magic
``1f 8b``, :func:`unwrap` returns a decompressing stream (each
:meth:`~parse_systrace.readers.RowSource.rows` pass re-opens the file and decompresses
it again), otherwise the raw stream itself. Truncated or corrupt compressed data
raises :class:`~parse_systrace.errors.TraceFormatError` from ``read``, never
``EOFError``/``zlib.error``.

Example:
    >>> import gzip, io
    >>> raw = io.BufferedReader(io.BytesIO(gzip.compress(b"# tracer: nop\\n")))
    >>> unwrap(raw).read()
    b'# tracer: nop\\n'
    >>> try:
    ...     unwrap(io.BufferedReader(io.BytesIO(gzip.compress(b"abc")[:-4]))).read()
    ... except TraceFormatError as error:
    ...     print(error.where, error.reason.split(" (")[0])
    file truncated gzip data
"""
from __future__ import annotations

import gzip
import io
import zlib
from typing import BinaryIO

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.readers import register_unwrapper

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of some content) starts a gzip stream."""
    return head[:2] == GZIP_MAGIC


def unwrap(raw: BinaryIO) -> BinaryIO:
    """Return a decompressing, peekable stream over ``raw`` if it holds gzip data, else ``raw``.

    ``raw`` must support ``peek`` (the registry gives unwrappers buffered streams).
    """
    if not is_gzip(raw.peek(2)[:2]):
        return raw
    return io.BufferedReader(_GuardedGzip(gzip.GzipFile(fileobj=raw, mode="rb")))


class _GuardedGzip(io.RawIOBase):
    """Raw stream over a :class:`gzip.GzipFile` that reports bad data as TraceFormatError."""

    def __init__(self, inner: gzip.GzipFile) -> None:
        self._inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            return self._inner.readinto(buffer)
        except EOFError as error:
            raise TraceFormatError("file", f"truncated gzip data ({error})") from None
        except (gzip.BadGzipFile, zlib.error) as error:
            raise TraceFormatError("file", f"corrupt gzip data ({error})") from None

    def close(self) -> None:
        self._inner.close()  # leaves the underlying file to its owner
        super().close()


register_unwrapper(unwrap)
