"""Shared file handling of the text exporters: atomic replace, chunked writes, no raising.

Example:
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:  # "trace.txt" would write into cwd
    ...     path = os.path.join(tmp, "trace.txt")
    ...     print(write_atomically(path, lambda out: out.write("x"), "systrace"))
    ...     with open(path) as written:
    ...         print(written.read(), os.listdir(tmp))  # no temporary file left beside it
    ExportResult.SUCCESS
    x ['trace.txt']
"""
from __future__ import annotations

import logging
import os
from itertools import islice
from typing import Callable, Iterable, TextIO

from nnscope.tracing.exporters import ExportResult

_log = logging.getLogger(__name__)
CHUNK_LINES = 8192


def write_atomically(path: str, write: Callable[[TextIO], None], what: str) -> ExportResult:
    """Run ``write`` on a temporary file beside ``path`` and move it into place.

    Returns:
        SUCCESS, or FAILURE (logged, temporary file removed) on an I/O or encoding error.
    """
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8", newline="\n") as out:
            write(out)
        os.replace(temporary, path)
    except (OSError, ValueError) as error:
        _log.error("%s export to %s failed: %s", what, path, error)
        try:
            os.unlink(temporary)
        except OSError:
            pass
        return ExportResult.FAILURE
    return ExportResult.SUCCESS


def write_chunked(out: TextIO, lines: Iterable[str], separator: str = "\n") -> None:
    """Write ``lines`` (each followed by ``separator``) in chunks of :data:`CHUNK_LINES`."""
    lines = iter(lines)
    while chunk := list(islice(lines, CHUNK_LINES)):
        out.write(separator.join(chunk) + separator)
