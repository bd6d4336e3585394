"""Systrace HTML and ftrace text reader (current and old TGID-less row layouts).

Rows are read from the kernel text trace: from the column-header line
(``#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION`` or the old layout
without ``TGID``) up to the next line containing ``</script>`` or the end of the file.
A plain ftrace text without a header line is read from its first line; an HTML page
without one holds no trace, which is an unknown format (:data:`NO_TRACE`). Only
``tracing_mark_write: B|...`` / ``E|...`` rows become rows; a line that mentions
``[NN_``, ``HIDL::IDevice`` or ``tracing_mark_write: B``/``E`` but cannot be parsed raises
:class:`~parse_systrace.errors.TraceFormatError`. The file is read in large binary
chunks and each chunk is split into lines by one regular expression.

Example:
    >>> import io
    >>> old = (b"#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION\\n"
    ...        b"   bench-1-9483 [005] ...1  1.500000: tracing_mark_write: B|9483|[NN_LR_PP]f\\n"
    ...        b"   bench-1-9483 [005] ...1  1.500010: tracing_mark_write: E\\n")
    >>> list(read_ftrace(io.BytesIO(old)))
    [(1.5, 9483, 9483, '[NN_LR_PP]f', 2), (1.50001, 9483, 9483, None, 3)]
"""
from __future__ import annotations

import re
import sys
from collections.abc import Iterator

from nnscope.parse_systrace.errors import TraceFormatError, Unchecked
from nnscope.parse_systrace.readers._fastrows import comments, raw_rows, tracking_rows

TYPE_CHECKING = False  # typing is not imported at run time (start-up)
if TYPE_CHECKING:
    from typing import BinaryIO

HEADERS = (b"#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION",
           b"#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION")
END = b"</script>"
#: An HTML page without the systrace column header holds no trace: its format is unknown.
NO_TRACE = ("unrecognised trace format: an HTML page with no systrace trace data "
            "(no trace-data section with an ftrace column header)")
CHUNK = 1 << 22

_CURRENT = (rb"[^\S\n]*[^ \n][^\n]{1,15}-(\d+)[^\S\n]+\([^\S\n]*([-0-9]+)\) [^\n]* "
            rb"(\d+\.\d+): tracing_mark_write: ([BE][^\n]*)")
_OLD = rb"[^\S\n]*[^ \n][^\n]{1,15}-(\d+) [^\n]* (\d+\.\d+): tracing_mark_write: ([BE][^\n]*)"
_BAD = rb"([^\n]*(?:\[NN_|HIDL::IDevice|tracing_mark_write: [BE])[^\n]*)"
#: One match per line: groups tid, tgid, ts, mark (current) | tid, ts, mark (old) | bad line.
LINE_RE = re.compile(rb"^(?:%s$|%s$|%s$|[^\n]*$)" % (_CURRENT, _OLD, _BAD), re.M)
_MARK_TGID = re.compile(rb"[BE]\|(\d+)")


def sniff_html(head: bytes) -> bool:
    """A systrace HTML page (the text trace sits in a ``trace-data`` script)."""
    lowered = head[:4096].lstrip().lower()
    return lowered.startswith((b"<!doctype html", b"<html")) or b"trace-data" in head


def sniff_text(head: bytes) -> bool:
    """An ftrace text dump: a ``# tracer:`` banner, a column header or mark rows."""
    stripped = head.lstrip()
    return (stripped.startswith(b"# tracer:") or any(h in head for h in HEADERS)
            or b"tracing_mark_write: " in head)


def read_html(binary: BinaryIO) -> Iterator[tuple]:
    """Rows of a systrace HTML file (see the module docstring)."""
    for batch in read_batches_html(binary):
        yield from batch


def read_ftrace(binary: BinaryIO) -> Iterator[tuple]:
    """Rows of an ftrace text file (see the module docstring)."""
    for batch in read_batches_text(binary):
        yield from batch


def read_batches_html(binary: BinaryIO) -> Iterator[list]:
    """Rows of a systrace HTML file, in lists."""
    return _batches(binary, require_header=True)


def read_batches_text(binary: BinaryIO) -> Iterator[list]:
    """Rows of an ftrace text file, in lists."""
    return _batches(binary, require_header=False)


def read_tracking_html(binary: BinaryIO, checked: bool = True, span=None) -> Iterator[tuple]:
    """Begin rows naming ``[NN`` or ``HIDL::IDevice`` of a systrace HTML (ts is None)."""
    return _tracking(binary, require_header=True, checked=checked, span=span)


def read_tracking_text(binary: BinaryIO, checked: bool = True, span=None) -> Iterator[tuple]:
    """Begin rows naming ``[NN`` or ``HIDL::IDevice`` of an ftrace text (ts is None)."""
    return _tracking(binary, require_header=False, checked=checked, span=span)


def _tracking(binary: BinaryIO, require_header: bool, checked: bool, span=None):
    """``span``: ``(start, stop)`` reads only those bytes (see :func:`_trace_blocks`; then
    rows of a thread that an earlier part tracked with the same process may be given
    again; their rows do not depend on the rows before them)."""
    state: dict = {}
    known: dict = {}  # tid -> tgid as pass 1 will have it (skips repeated [NN rows)
    for base, data, lines in _trace_blocks(binary, require_header, *(span or ())):
        skip = comments(data)
        head = data.count(b"\n", 0, skip)
        rows = tracking_rows(_after(data, skip), base + head, known, checked, lines - head)
        if rows is None:
            rows = [row for row in _parse_lines(data, base, state) if row[3] is not None
                    and ("[NN" in row[3] or "HIDL::IDevice" in row[3])]
        for row in rows:
            name = row[3]
            if "[NN" in name or ("HIDL::IDevice" in name and "::server" in name):
                known[row[1]] = row[2]
        yield from rows


def read_raw_html(binary: BinaryIO, checked: bool = True, span=None) -> Iterator[tuple]:
    """Rows of a systrace HTML in the engine's raw form (see :func:`_raw`)."""
    return _raw(binary, require_header=True, checked=checked, span=span)


def read_raw_text(binary: BinaryIO, checked: bool = True, span=None) -> Iterator[tuple]:
    """Rows of an ftrace text in the engine's raw form (see :func:`_raw`)."""
    return _raw(binary, require_header=False, checked=checked, span=span)


def _raw(binary: BinaryIO, require_header: bool, checked: bool, span=None):
    """Yield ``(first_line, [(tid, tgid, ts, kind, name), ...])`` blocks of byte groups
    (one row per line from ``first_line``), or ``(None, [(line, (tid, tgid, ts, kind,
    name)), ...])`` with converted values for blocks parsed line by line. ``span``:
    ``(start, stop)``, only those bytes (see :func:`_trace_blocks`); line numbers then
    count from ``start``, and an old-layout ``E`` row that takes its process id from an
    earlier row of its thread may get another one than in a full read."""
    state: dict = {}
    for base, data, lines in _trace_blocks(binary, require_header, *(span or ())):
        skip = comments(data)
        head = data.count(b"\n", 0, skip)
        found = raw_rows(_after(data, skip), checked, lines - head)
        if found is not None:
            yield base + head + 1, found
            continue
        rows = _parse_lines(data, base, state)
        yield None, [(where, (tid, tgid, ts, b"" if name is None else b"B", name))
                     for ts, tid, tgid, name, where in rows]


def begin_rows_from(binary: BinaryIO, start: int, needle: str) -> Iterator[tuple]:
    """``(offset, tid)`` of each begin row from the first line start at or after byte
    ``start`` on whose name holds ``needle``, as the line-by-line parser reads it; ``offset``
    is its line's start. ``binary`` is a file (it is mapped): the lines are found by a byte
    search in the page cache, and the rows of the lines between are neither read nor parsed."""
    import mmap  # here, not at start-up: only a split read searches

    pattern = needle.encode()
    try:
        mapped = mmap.mmap(binary.fileno(), 0, access=mmap.ACCESS_READ)
    except ValueError:  # an empty file (emptied, perhaps, since its size was read): no rows
        return
    with mapped as data:
        if start:
            start = data.find(b"\n", start - 1) + 1 or len(data)
        hit = data.find(pattern, start)
        while hit >= 0:
            begin = data.rfind(b"\n", start, hit) + 1 or start
            end = data.find(b"\n", hit) + 1 or len(data)
            for _, tid, _, name, _ in _parse_lines(data[begin:end].rstrip(b"\n") + b"\n", 0, {}):
                if name is not None and needle in name:
                    yield begin, tid
            hit = data.find(pattern, end)


def _batches(binary: BinaryIO, require_header: bool) -> Iterator[list]:
    state = {}  # tid -> last tgid seen on that thread
    for base, data, _ in _trace_blocks(binary, require_header):
        yield _parse_block(data, base, state)


def _trace_blocks(binary: BinaryIO, require_header: bool, start: int = 0,
                 stop=None) -> Iterator[tuple]:
    """Yield ``(lines_before, data, lines)`` blocks of whole lines inside the trace part.

    ``data`` (a bytearray) is read into again two blocks later (see :class:`_Buffers`):
    use it before taking the block after next. ``start`` / ``stop`` (line starts, for a
    split read): from ``start`` (the trace part's rows, no header looked for) up to
    ``stop``; a trace part that ends before ``stop`` raises
    :class:`~parse_systrace.errors.Unchecked` (its rows after ``stop`` would not be the
    trace's)."""
    carry, lines_before, started, position = b"", 0, bool(start), start
    if start:
        binary.seek(start)
    buffers = _Buffers(binary)
    while True:
        data, got = buffers.read(carry, CHUNK if stop is None else min(CHUNK, stop - position))
        position += got
        if got:
            cut = data.rfind(b"\n") + 1
            carry = bytes(data[cut:])
            del data[cut:]
        elif not carry:
            if require_header and not started:
                raise TraceFormatError("file", NO_TRACE)
            return
        else:
            data, carry = carry + b"\n", b""
        if not started:
            start = _header_start(data)
            if start < 0:
                if require_header:
                    lines_before += data.count(b"\n")
                    continue
                start = 0  # plain text: no header in the first block, rows from line 1
            lines_before += data.count(b"\n", 0, start)
            data, started = _after(data, start), True
        end = _find_end(data)
        if end >= 0:
            if stop is not None:
                raise Unchecked()  # the trace part ends before the split
            data = data[:data.rfind(b"\n", 0, end) + 1]
        lines = data.count(b"\n")
        if data:
            yield lines_before, data, lines
        lines_before += lines
        if end >= 0 or not got:
            return


class _Buffers:
    """Two bytearrays read into in turn: a block is read without a copy into the one
    the block before last used (kept intact for as long as a caller holds it: then
    a new one is made), after the carried start of its first line."""

    def __init__(self, binary: BinaryIO) -> None:
        self._binary = binary
        self._pair = [bytearray(), bytearray()]
        self._turn = 0

    def read(self, carry: bytes, size: int) -> tuple:
        """``(carry and up to size bytes read after it, how many were read)``."""
        self._turn ^= 1
        buffer = self._pair[self._turn]
        if not buffer or sys.getrefcount(buffer) > _OWN_REFERENCES:  # a caller kept it
            return self._new(carry, size)
        kept = len(carry)
        if len(buffer) < kept + size:
            buffer += bytes(kept + size - len(buffer))  # the last carry's few bytes
        buffer[:kept] = carry
        view = memoryview(buffer)[kept:kept + size]
        got = self._binary.readinto(view) or 0
        view.release()
        del buffer[kept + got:]
        return buffer, got

    def _new(self, carry: bytes, size: int) -> tuple:
        """A new buffer, as long as what is read (a small file's block touches no more
        memory than its bytes: a zeroed buffer of the full block size would)."""
        data = self._binary.read(size)
        buffer = self._pair[self._turn] = bytearray(carry)
        buffer += data
        return buffer, len(data)


def _own_references() -> int:
    """What getrefcount gives in :meth:`_Buffers.read` for a buffer no caller holds: a
    slot in the pair and the local name (and the argument, where this Python counts it)."""
    pair = [bytearray()]
    buffer = pair[0]
    return sys.getrefcount(buffer)


_OWN_REFERENCES = _own_references()


def _after(data, skip: int):
    """``data`` from ``skip`` on (itself when ``skip`` is 0: a bytearray's slice copies)."""
    return data[skip:] if skip else data


def _find_end(data: bytes) -> int:
    """``data.find(END)``, from the first ``<`` (a memchr scan: most blocks have none)."""
    first = data.find(END[:1])
    return first if first < 0 else data.find(END, first)


def _header_start(data: bytes) -> int:
    found = [p for p in (data.find(h) for h in HEADERS) if p >= 0]
    if not found:
        return -1
    return data.rfind(b"\n", 0, min(found)) + 1


def _parse_fast(data: bytes, base: int):
    """Rows of a block made only of current-format mark rows, or None when it is not."""
    skip = comments(data)
    found = raw_rows(_after(data, skip))
    if found is None:
        return None
    base += data.count(b"\n", 0, skip)
    lines = len(found)
    tids, tgids, stamps, kinds, names = zip(*found)
    names = [name.decode("utf-8", "replace") if kind else None
             for kind, name in zip(kinds, names)]
    return list(zip(map(float, stamps), map(int, tids), map(int, tgids), names,
                    range(base + 1, base + lines + 1)))


def _parse_block(data: bytes, base: int, last_tgid: dict) -> list:
    fast = _parse_fast(data, base)
    return _parse_lines(data, base, last_tgid) if fast is None else fast


def _parse_lines(data: bytes, base: int, last_tgid: dict) -> list:
    """Rows of a block, line by line (any layout; raises on unreadable mark lines)."""
    rows = []
    append = rows.append
    lineno = base
    matches = LINE_RE.findall(data)
    matches.pop()  # the empty match after the final newline
    for tid, tgid, ts, mark, otid, ots, omark, bad in matches:
        lineno += 1
        if tid:
            tid = int(tid)
            if tgid == b"-----":
                tgid = _tgid_from_mark(mark, tid, last_tgid, lineno)
            else:
                tgid = int(tgid)
        elif otid:
            tid, ts, mark = int(otid), ots, omark
            tgid = _tgid_from_mark(mark, tid, last_tgid, lineno)
        elif bad:
            raise TraceFormatError(f"line {lineno}", "cannot parse trace row: "
                                   + bad.strip()[:120].decode("utf-8", "replace"))
        else:
            continue
        last_tgid[tid] = tgid
        append((float(ts), tid, tgid, _name(mark), lineno))
    return rows


def _tgid_from_mark(mark: bytes, tid: int, last_tgid: dict, lineno: int) -> int:
    match = _MARK_TGID.match(mark)
    if match:
        return int(match.group(1))
    if mark[:1] == b"E":
        return last_tgid.get(tid, tid)
    raise TraceFormatError(f"line {lineno}", "begin mark without a process id: "
                           + mark[:120].decode("utf-8", "replace"))


def _name(mark: bytes):
    if mark[:1] == b"E":
        return None
    parts = mark.split(b"|", 2)
    text = parts[2] if len(parts) == 3 else mark[2:] if mark[1:2] == b"|" else mark[1:]
    return text.decode("utf-8", "replace")
