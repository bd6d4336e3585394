"""Per-thread event buffers of the NNTRACE recorder, and reading them back as named tracks.

Each recording thread owns one :class:`_ThreadBuffer`, registered here once (under a
lock) on its first event; :mod:`tracing.tracer` then writes to its flat ``events`` list
without any lock. The list holds no per-event object: a begin is three items
``tag, detail, ts_ns`` (the tag a str, never an int), an end is one ``ts_ns`` int, and
each event is written by one C call, so a copy taken by another thread always ends on
an event boundary. :func:`snapshot` copies (or drains) every buffer of this process and
joins ``tag + detail`` into span names, setting notes (tuples: adopted contexts, failures)
apart; :func:`clear` empties them; :func:`process_name`
names the process the tracks come from. After a fork the
child starts with no buffers (the parent's stay the parent's).

Example:
    >>> events = ["[NN_LR_PE]", "ANeuralNetworksExecution_compute", 10, 25]
    >>> name_events(events, {})
    ([(10, '[NN_LR_PE]ANeuralNetworksExecution_compute'), (25, None)], 4)
"""
from __future__ import annotations

import os
import sys
import threading

from nnscope.tracing import propagation
from nnscope.tracing.span import ThreadTrack

_lock = threading.Lock()


class _ThreadBuffer:
    """The events of one thread, with the ids that name its track."""

    __slots__ = ("pid", "tid", "thread", "events", "open_memo")

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.tid = threading.get_native_id()
        self.thread = threading.current_thread()
        self.events: list = []  # flat: begin = tag, detail, ts_ns; end = ts_ns
        self.open_memo: tuple = ((0, None), None)  # see innermost_open

    def innermost_open(self) -> int | None:
        """:func:`propagation.innermost_begin` of ``events``, looked up again only when they
        changed since the last call (their length and last item): a thread that sends many
        requests outside any span does not read its whole look-back window for each."""
        events = self.events
        key = (len(events), events[-1] if events else None)
        memo = self.open_memo
        if memo[0] == key:
            return memo[1]
        start = propagation.innermost_begin(events)
        self.open_memo = (key, start)
        return start


_buffers: list[_ThreadBuffer] = []


def new_buffer() -> _ThreadBuffer:
    """A registered, empty buffer for the calling thread (call once per thread)."""
    buffer = _ThreadBuffer()
    with _lock:
        _buffers.append(buffer)
    return buffer


def name_events(events: list, cache: dict,
                 notes: list | None = None) -> tuple[list[tuple[int, str | None]], int]:
    """Decode a flat buffer prefix: the ``(ts, name or None)`` events, and how many items
    they took (less than ``len(events)`` only if the prefix ends inside a begin). Notes
    (tuples, see :func:`tracing.adopt`) go to ``notes`` as ``[kind, ts, value]``."""
    out = []
    append = out.append
    index, count = 0, len(events)
    while index < count:
        item = events[index]
        if type(item) is int:
            append((item, None))
            index += 1
            continue
        if type(item) is tuple:
            if notes is not None:
                notes.append(_note(item))
            index += 1
            continue
        if index + 3 > count:  # a begin not fully written (never by the factories)
            break
        detail, ts = events[index + 1], events[index + 2]
        key = (item, detail)
        name = cache.get(key)
        if name is None:
            name = cache[key] = item + detail
        append((ts, name))
        index += 3
    return out, index


def snapshot(drain: bool = False) -> list[ThreadTrack]:
    """Copy (or move out, with ``drain``) this process's events as named ThreadTracks."""
    with _lock:
        buffers = list(_buffers)
    cache: dict = {}
    tracks = []
    for buffer in buffers:
        events = buffer.events
        raw = events[:]  # one C call: a copy that ends on an event boundary
        notes: list = []
        named, used = name_events(raw, cache, notes)
        if drain:
            del events[:used]  # events written meanwhile stay in the buffer
        if named or notes:
            tracks.append(ThreadTrack(buffer.pid, buffer.tid, buffer.thread.name, named, notes))
    return tracks


def _note(item: tuple) -> list:
    """A recorded note as plain data: an adopted context in its W3C text form."""
    kind, ts, value = item
    if kind == "adopt" and value is not None:
        value = propagation.text(value)
    return [kind, ts, list(value) if type(value) is tuple else value]


def clear() -> None:
    """Empty all buffers and forget finished threads."""
    with _lock:
        for buffer in _buffers:
            buffer.events.clear()
        _buffers[:] = [b for b in _buffers if b.thread.is_alive()]


_process_name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c") \
    else "python"


def set_process_name(name: str) -> None:
    """Name this process in exported traces (default: the script's file name)."""
    global _process_name
    _process_name = str(name)


def process_name() -> str:
    """The name given by :func:`set_process_name` or the default."""
    return _process_name


def _after_fork_in_child() -> None:
    global _buffers, _lock
    _buffers = []
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
