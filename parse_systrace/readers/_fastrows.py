"""Fast paths of the systrace/ftrace reader for blocks made only of current-format marks.

Most blocks of a real trace are nothing but ``TASK-PID (TGID) [CPU] FLAGS TS:
tracing_mark_write: B|...`` / ``E|...`` rows. For such a block:

- :func:`raw_rows` runs one ``findall`` (a C loop; a second, more general one when the
  block is not in the usual column layout) whose pattern runs from a line's start through
  its newline, so each match starts where the last one ended; it returns the raw byte
  groups ``(tid, tgid, ts, kind, name)`` of every row, or None when the block is not of
  that kind (the caller then parses it line by line).
- :func:`tracking_rows` (the first pass) validates the block with one possessive regex
  match (no objects made per row) and then looks only for the rows that can change
  which threads are tracked: ``[NN`` rows of a thread not yet tracked with that process
  (a negative lookahead skips the known ones in C), ``HIDL::IDevice`` rows and the first
  ``NN_LR`` row. Each hit line is parsed exactly like :func:`raw_rows` would.

Rows are read as the line-by-line parser reads them; a block with any other line goes
to that parser.

Example:
    >>> block = b"  app-12 (12) [000] ...1 5.000001: tracing_mark_write: B|12|[NN_LA_PO]x\\n"
    >>> raw_rows(block)
    [(b'12', b'12', b'5.000001', b'B', b'[NN_LA_PO]x')]
    >>> raw_rows(block.replace(b"B|12|[NN_LA_PO]x", b"E|12"))
    [(b'12', b'12', b'5.000001', b'', b'')]
    >>> [row[1:4] for row in tracking_rows(block, 0, {})]
    [(12, 12, '[NN_LA_PO]x')]
"""
from __future__ import annotations

import re
from functools import lru_cache

from nnscope.parse_systrace.errors import Unchecked

_WS = rb"[^\S\n]"
#: A current-format row as the line-by-line parser reads it (task of 2-16 characters,
#: the last ``-PID`` in it; marks ``B|tgid|name``, ``E`` or ``E|tgid`` only), from a
#: line's start to its newline: groups tid, tgid, ts, ``B`` or empty, name. A line that
#: is not one is skipped whole (``^``: the search only matches at line starts).
_ROW_RE = re.compile(rb"^%s*[^ \n][^\n]{1,15}-(\d+)%s+\(%s*(\d+)\) [^\n]* (\d+\.\d+): "
                     rb"tracing_mark_write: (?:(B)\|\d+\|([^\n]*)|E(?:\|\d+)?)\n"
                     % (_WS, _WS, _WS), re.M)
#: The same rows in the usual column layout (``[CPU] FLAGS  TS``, spaces only between the
#: columns), which the regex engine matches quicker: tried first. On a line with one mark
#: it gives what :data:`_ROW_RE` gives (the flags hold no whitespace, so no later
#: ``-PID (TGID)`` can be in them); a line it does not take goes to :data:`_ROW_RE`. Its
#: repeats are possessive (``*+``, ``++``): giving back could not make a line match.
_COLUMNS_RE = re.compile(rb"^ *+[^ \n][^\n]{1,15}-(\d++) ++\( *+(\d++)\) \[\d++\] \S++ ++"
                         rb"(\d++\.\d++): tracing_mark_write: (?:(B)\|\d++\|([^\n]*+)|E(?:\|\d++)?+)\n",
                         re.M)
#: The same rows without groups, every line of a block.
_VALID_RE = re.compile(rb"(?:%s*[^ \n][^\n]{1,15}-\d+%s+\(%s*\d+\) [^\n]* \d+\.\d+: "
                       rb"tracing_mark_write: (?:B\|\d+\|[^\n]*|E(?:\|\d+)?)\n)*+"
                       % (_WS, _WS, _WS))
_TRIGGERS = (b"[NN_", b"HIDL::IDevice", b"tracing_mark_write: B", b"tracing_mark_write: E")
_MARK = b"tracing_mark_write: "
_NO_TGID = b"-----"
_NN_TAIL = rb"[^\n]* \d+\.\d+: tracing_mark_write: B\|\d+\|[^\n]*?\[NN"


def comments(data: bytes) -> int:
    """Length of the leading ``#`` lines of ``data`` (0 if one mentions a mark)."""
    end = 0
    while data.startswith(b"#", end):
        end = data.index(b"\n", end) + 1
    head = data[:end]
    return 0 if any(trigger in head for trigger in _TRIGGERS) else end


def _simple(data: bytes, lines=None) -> int:
    """The line count of ``data`` (``lines`` when known) if every line may be a
    current-format mark row (a cheap C check: one mark per line), else 0."""
    lines = data.count(b"\n") if lines is None else lines
    return lines if data.count(_MARK) == lines else 0


def raw_rows(data: bytes, checked: bool = True, lines=None):
    """``[(tid, tgid, ts, kind, name), ...]`` as bytes (kind ``b"B"`` or ``b""`` for an
    end), one per line, or None. Unchecked: raise :class:`Unchecked` for a block that
    ``tracking_rows(..., checked=False)`` took unvalidated and that is not all rows.
    ``lines``: the line count of ``data`` when known."""
    lines = _simple(data, lines)
    if not lines:
        return None
    found = _COLUMNS_RE.findall(data)
    if len(found) == lines:
        return found
    if _NO_TGID in data:  # rows that take their TGID from the mark: parsed line by line
        return None
    found = _ROW_RE.findall(data)
    if len(found) == lines:
        return found
    if not checked:
        raise Unchecked()
    return None


def tracking_rows(data: bytes, base: int, tracked: dict, checked: bool = True, lines=None):
    """The rows of ``data`` that can change pass 1's result, in order, or None.

    ``tracked`` maps the tids tracked so far (ints) to their process ids; rows
    ``(None, tid, tgid, name, line)``. With ``checked=False`` the block's lines are not
    all validated (pass 2 reads it with :func:`raw_rows` and must raise
    :class:`~parse_systrace.errors.Unchecked` when that fails).
    """
    if (not _simple(data, lines) or _NO_TGID in data
            or (checked and _VALID_RE.fullmatch(data) is None)):
        return None
    hits = {}
    _new_nn_rows(data, dict(tracked), hits)
    for needle in (b"HIDL::IDevice", b"NN_LR"):
        _needle_rows(data, needle, hits, first_only=needle == b"NN_LR")
    rows = []
    line, counted = base + 1, 0  # line number of the row starting at offset ``counted``
    for start in sorted(hits):
        row = hits[start]
        if row is not None:
            tid, tgid, _, kind, name = row
            line += data.count(b"\n", counted, start)
            counted = start
            rows.append((None, int(tid), int(tgid), name.decode("utf-8", "replace"), line))
    return rows


def _line_at(data: bytes, position: int) -> tuple:
    start = data.rfind(b"\n", 0, position) + 1
    line = data[start:data.index(b"\n", position) + 1]
    row = _ROW_RE.findall(line)  # empty only in an unchecked invalid block
    return start, (row[0] if row and row[0][3] else None)


def _new_nn_rows(data: bytes, known: dict, hits: dict) -> None:
    """``[NN`` rows whose (tid, tgid) differs from the thread's current one."""
    position = 0
    while True:
        match = _nn_pattern(tuple(known.items())).search(data, position)
        if match is None:
            return
        start, row = _line_at(data, match.start())
        position = data.index(b"\n", match.start()) + 1
        if row is not None and b"[NN" in row[4] and known.get(int(row[0])) != int(row[1]):
            hits[start] = row
            known[int(row[0])] = int(row[1])


@lru_cache(maxsize=256)
def _nn_pattern(known: tuple):
    skip = b"|".join(b"0*%d%s+\\(%s*0*%d\\)" % (tid, _WS, _WS, tgid) for tid, tgid in known)
    return re.compile(rb"-%s\d+%s+\(%s*\d+\) %s" % (
        b"(?!(?:%s) )" % skip if skip else b"", _WS, _WS, _NN_TAIL))


def _needle_rows(data: bytes, needle: bytes, hits: dict, first_only: bool) -> None:
    position = data.find(needle)
    while position >= 0:
        start, row = _line_at(data, position)
        if row is not None and needle in row[4] and (not first_only or b"[NN" in row[4]):
            hits[start] = row
            if first_only:
                return
        position = data.find(needle, data.index(b"\n", position) + 1)
