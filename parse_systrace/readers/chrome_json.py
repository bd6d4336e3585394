"""Chrome JSON trace reader: ``traceEvents`` B/E/X events and ``systemTraceEvents`` ftrace text.

Accepts ``{"traceEvents": [...], "systemTraceEvents": "..."}`` (either key may be
missing, not both) or a bare event list (a missing closing ``]`` is tolerated, as in
chrome://tracing). ``B``/``E`` events become begin/end rows; an ``X`` (complete) event
becomes a begin at ``ts`` and an end at ``ts + dur``. ``ts``/``dur`` are microseconds
and are kept exact (``Decimal``) until the final conversion to float seconds, so that
``1034700742666`` µs gives exactly ``float("1034700.742666")``. ``pid`` is the tgid,
``tid`` the thread; other phases (``M``, ``i``, ``C``...) are ignored. The text in
``systemTraceEvents`` goes through the ftrace text reader and is merged in by time.

Rows come out in timestamp order, and the sort is stable: events that tie on time keep
their file order, unless nesting decides. At equal times on one thread: ends of ``X``
events that started earlier, then ``B``/``E`` events in file order, then ``X`` begins
(longest first, so parents enclose children; equal ones in file order, parent first
as Chrome writes them), then zero-length ``X`` events (begin, end) in file order. An
``X`` event carries no order against one that starts with it, so a zero-length one is
read inside, as chrome://tracing and Perfetto read it; a trace that needs another order
at equal times writes ``B``/``E`` events, as nnscope's exporter does.

The whole document is loaded with :func:`json.loads` (JSON cannot be streamed with
the standard library), so memory grows with the file.

Example:
    >>> import io
    >>> doc = b'[{"ph": "X", "name": "[NN_LR_PE]x", "ts": 1000, "dur": 500, "pid": 7, "tid": 8}]'
    >>> list(read_chrome_json(io.BytesIO(doc)))
    [(0.001, 8, 7, '[NN_LR_PE]x', 1), (0.0015, 8, 7, None, 1)]
"""
from __future__ import annotations

import heapq
import io
import json
from decimal import Decimal
from typing import BinaryIO, Iterator

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.readers import register

_END_OF_EARLIER_X, _FILE_ORDER, _X_BEGIN, _ZERO_X = range(4)
_SOURCE = "Chrome JSON"
_BLANK = b" \t\r\n\xef\xbb\xbf"  # JSON whitespace and a UTF-8 byte order mark


def sniff(head: bytes) -> bool:
    """Whether ``head`` looks like JSON: the first non-blank byte is ``{`` or ``[``."""
    text = head.lstrip(_BLANK)
    return text[:1] in (b"{", b"[")


def read_chrome_json(binary_file: BinaryIO) -> Iterator[tuple]:
    """Yield ``(ts, tid, tgid, name, where)`` rows of a Chrome JSON trace in time order."""
    document = _load(binary_file.read())
    events, system_text = _parts(document)
    rows = _event_rows(events)
    if system_text is None:
        return iter(rows)
    system_rows = _system_rows(system_text)
    return heapq.merge(rows, system_rows, key=lambda row: row[0])


def _load(data: bytes):
    try:
        return _decode(data)
    except json.JSONDecodeError as error:
        repaired = _close_bare_list(data)
        if repaired is not None:
            try:
                return _decode(repaired)
            except (json.JSONDecodeError, ValueError, RecursionError):
                pass
        raise TraceFormatError(f"line {error.lineno}", f"malformed JSON: {error.msg}") from None
    except UnicodeDecodeError:
        raise TraceFormatError(_SOURCE, "JSON is not valid UTF-8/16/32 text") from None
    except RecursionError:
        raise TraceFormatError(_SOURCE, "JSON nested too deeply") from None
    except ValueError as error:  # a NaN/Infinity constant, or an absurdly long number
        raise TraceFormatError(_SOURCE, f"malformed JSON: {error}") from None


def _decode(data: bytes):
    return json.loads(data, parse_float=Decimal, parse_constant=_reject_constant)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a valid timestamp or value")


def _close_bare_list(data: bytes) -> bytes | None:
    """Chrome allows a bare event list to end without ``]`` (and with a trailing comma)."""
    text = data.strip()
    if not text.lstrip(_BLANK).startswith(b"[") or text.endswith(b"]"):
        return None
    return text.rstrip(b",") + b"]"


def _parts(document) -> tuple[list, str | None]:
    if isinstance(document, list):
        return document, None
    if not isinstance(document, dict):
        raise TraceFormatError(_SOURCE, "top level is neither an object nor an event list")
    events = document.get("traceEvents")
    system_text = document.get("systemTraceEvents")
    if events is None and system_text is None:
        raise TraceFormatError(_SOURCE, "object has neither traceEvents nor systemTraceEvents")
    if events is not None and not isinstance(events, list):
        raise TraceFormatError(_SOURCE, "traceEvents is not a list")
    if system_text is not None and not isinstance(system_text, str):
        raise TraceFormatError(_SOURCE, "systemTraceEvents is not a string")
    return events or [], system_text


def _event_rows(events: list) -> list[tuple]:
    keyed = []
    for index, event in enumerate(events, start=1):
        keyed.extend(_keyed_rows(event, index))
    keyed.sort(key=lambda item: item[0])
    return [row for _, row in keyed]


def _keyed_rows(event, index: int) -> list[tuple]:
    """Rows of one event, each as ``(sort key, row)``; empty for phases we ignore."""
    where = f"event {index}"
    if not isinstance(event, dict):
        raise TraceFormatError(where, "event is not an object")
    phase = event.get("ph")
    if not isinstance(phase, str):
        raise TraceFormatError(where, "missing or non-string 'ph'")
    if phase not in ("B", "E", "X"):
        return []
    ts = _number(event, "ts", where)
    tid, tgid = _integer(event, "tid", where), _integer(event, "pid", where)
    if phase == "E":
        return [((ts, _FILE_ORDER, 0, index), (_seconds(ts), tid, tgid, None, index))]
    name = _name(event, where)
    begin = (_seconds(ts), tid, tgid, name, index)
    if phase == "B":
        return [((ts, _FILE_ORDER, 0, index), begin)]
    dur = _number(event, "dur", where)
    if dur < 0:
        raise TraceFormatError(where, "negative 'dur'")
    end = (_seconds(ts + dur), tid, tgid, None, index)
    if dur == 0:
        return [((ts, _ZERO_X, index, 0), begin), ((ts, _ZERO_X, index, 1), end)]
    return [((ts, _X_BEGIN, -dur, index), begin),
            ((ts + dur, _END_OF_EARLIER_X, 0, index), end)]


def _number(event: dict, key: str, where: str):
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise TraceFormatError(where, f"missing or non-numeric '{key}'")
    if not _finite_float(value):
        raise TraceFormatError(where, f"'{key}' out of range")
    return value


def _finite_float(value) -> bool:
    try:
        return abs(float(value)) < float("inf")
    except OverflowError:
        return False


def _integer(event: dict, key: str, where: str) -> int:
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceFormatError(where, f"missing or non-integer '{key}'")
    return value


def _name(event: dict, where: str) -> str:
    name = event.get("name")
    if not isinstance(name, str):
        raise TraceFormatError(where, "missing or non-string 'name'")
    return name


def _seconds(microseconds) -> float:
    """Exact µs -> correctly rounded float seconds (what ``float(text)`` gives in systrace)."""
    return float(Decimal(microseconds).scaleb(-6))


def _system_rows(text: str) -> Iterator[tuple]:
    """Rows of the ftrace text, ``where`` naming its line inside ``systemTraceEvents``."""
    from nnscope.parse_systrace.readers.systrace import read_ftrace

    rows = read_ftrace(io.BytesIO(text.encode("utf-8", "surrogatepass")))
    try:
        for ts, tid, tgid, name, line in rows:
            yield ts, tid, tgid, name, f"systemTraceEvents line {line}"
    except TraceFormatError as error:
        raise TraceFormatError(f"systemTraceEvents {error.where}", error.reason) from None


register("chrome_json", read_chrome_json, sniff, unit="event", before="systrace")
