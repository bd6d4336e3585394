"""The output files of ``nnscope run`` and ``nnscope bench``: each path is checked before the run,
and each file is written after it so that a failure loses nothing.

:func:`check` opens every requested path as it will be written (an existing file for appending,
which changes nothing; a new one is created and removed at once) before any driver starts, and
raises one-line :class:`OSError` for the first that cannot be written. :func:`write` writes one
file after the run; when that still fails (the disk filled, the directory went away), it writes
the same content to a temporary file and names both, so what was computed is kept.

Example:
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> check({"--dot": str(folder / "plan.dot"), "--trace": None})
    >>> check({"--dot": str(folder / "no" / "plan.dot")})
    Traceback (most recent call last):
    ...
    OSError: --dot .../no/plan.dot: cannot write there: no directory .../no (nothing was run)
    >>> write(str(folder / "a.txt"), lambda path: pathlib.Path(path).write_text("x"))
    ('.../a.txt', 'wrote .../a.txt')
    >>> written, line = write(str(folder / "no" / "a.txt"), lambda path: pathlib.Path(path).write_text("x"))
    >>> line
    'nnscope: error: cannot write .../no/a.txt (No such file or directory); wrote /tmp/nnscope-a-....txt instead'
    >>> pathlib.Path(written).read_text()
    'x'
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Callable


def problem(path: str, replaced: bool = False) -> str | None:
    """Why ``path`` cannot be written, or None when it can (tried as described above).
    ``replaced``: the file is written beside ``path`` and moved into place (the trace
    exporters), so ``path`` must be a regular file or new, never a device or a link to one."""
    target = Path(path)
    parent = target.parent
    if not parent.is_dir():
        return f"no directory {parent}" if not parent.exists() else f"{parent} is not a directory"
    if target.is_dir():
        return "it is a directory"
    regular = target.exists() and stat.S_ISREG(target.stat().st_mode)
    if replaced and (target.is_symlink() or (target.exists() and not regular)):
        return "not a regular file (a trace is written beside it, then moved in its place)"
    try:
        if target.exists():
            if regular:  # a FIFO or device is taken as it is
                os.close(os.open(target, os.O_WRONLY | os.O_APPEND))
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            os.unlink(target)
    except OSError as error:
        return error.strerror or str(error)
    return None


def check(paths: dict[str, str | None], replaced: tuple[str, ...] = ()) -> None:
    """Check the output path of each flag (None: not asked for) before the run; the flags in
    ``replaced`` write their file beside it and move it into place (see :func:`problem`).

    Raises:
        OSError: ``<flag> <path>: cannot write there: <why> (nothing was run)``, one line.
    """
    for flag, path in paths.items():
        why = None if path is None else problem(path, flag in replaced)
        if why is not None:
            raise OSError(f"{flag} {path}: cannot write there: {why} (nothing was run)")


def write(path: str, writer: Callable[[str], object]) -> tuple[str | None, str]:
    """Call ``writer(path)``; return (``path``, ``wrote PATH``), or, when it raises OSError,
    write to a temporary file of the same suffix instead and return (that file, the error line
    naming both), or (None, the error line) when the temporary file fails too."""
    try:
        writer(path)
        return path, f"wrote {path}"
    except OSError as error:
        why = error.strerror or str(error)
    name = Path(path)
    fd, fallback = tempfile.mkstemp(suffix=name.suffix, prefix=f"nnscope-{name.stem}-")
    os.close(fd)
    os.chmod(fallback, 0o644)
    try:
        writer(fallback)
    except OSError as error:
        os.unlink(fallback)
        return None, (f"nnscope: error: cannot write {path} ({why}), nor a temporary file "
                      f"({error.strerror or error})")
    return fallback, f"nnscope: error: cannot write {path} ({why}); wrote {fallback} instead"
