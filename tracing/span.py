"""Plain data of a recorded trace: per-thread begin/end events and the spans they make.

The recorder (``tracing.tracer``) appends ``(ts_ns, name)`` for a begin and
``(ts_ns, None)`` for an end to a :class:`ThreadTrack`; a ``[SW]`` switch is an
end followed by a begin. Exporters read a :class:`TraceData` and never the recorder;
those that write begin/end events write :func:`atrace_events`, the order AOSP's atrace
writes and parse_systrace reads.

Example:
    >>> track = ThreadTrack(pid=1, tid=1, name="main", events=[(10, "[NN_LR_PE]x"), (30, None)])
    >>> [(s.name, s.duration_ns) for s in TraceData({1: "app"}, [track]).spans()]
    [('[NN_LR_PE]x', 20)]
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Iterator

from nnscope.tracing.naming import SWITCH

#: One recorded event: (monotonic nanoseconds, span name) for a begin, (ns, None) for an end.
Event = tuple[int, "str | None"]


@dataclass(frozen=True, slots=True)
class Span:
    """A completed span. ``parent`` is the ``index`` of the enclosing span on the same thread."""

    name: str
    start_ns: int
    end_ns: int
    pid: int
    tid: int
    depth: int
    index: int
    parent: int | None
    #: W3C text context of the span in another thread or process this one runs for (set on
    #: the top-level spans of a thread inside :func:`tracing.adopt`), else None.
    remote_parent: str | None = None
    #: ``(result code, name)`` when the call the span times failed (:func:`tracing.fail`).
    error: tuple[int, str] | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(slots=True)
class ThreadTrack:
    """The events of one thread, in recording order."""

    pid: int
    tid: int
    name: str
    events: list = field(default_factory=list)
    #: ``[kind, ts_ns, value]`` in recording order: ``adopt`` (ts: when, value: W3C text
    #: context or None to stop) and ``error`` (ts: the failed span's begin, value: [code, name]).
    notes: list = field(default_factory=list)


@dataclass(slots=True)
class TraceData:
    """Everything an exporter needs: process names and thread tracks from all processes."""

    processes: dict[int, str] = field(default_factory=dict)
    threads: list[ThreadTrack] = field(default_factory=list)

    def span_count(self) -> int:
        return sum(1 for t in self.threads for _, name in t.events if name is not None)

    def spans(self) -> Iterator[Span]:
        """Yield completed spans thread by thread, each in end order.

        Begins never closed are closed at the thread's last timestamp; ends with
        no begin are dropped.
        """
        index = 0
        for track in self.threads:
            for span in _thread_spans(track, index):
                index = max(index, span.index + 1)
                yield span

    def merged_events(self) -> Iterator[tuple[int, int, int, "str | None"]]:
        """Yield ``(ts_ns, pid, tid, name)`` for all threads in timestamp order.

        Events of one thread keep their recording order (the merge is stable).
        """
        def keyed(track: ThreadTrack):
            for ts, name in track.events:
                yield ts, track.pid, track.tid, name
        return heapq.merge(*(keyed(t) for t in self.threads), key=lambda e: e[0])


def _thread_spans(track: ThreadTrack, first_index: int) -> Iterator[Span]:
    stack: list[tuple[int, str, int, str | None]] = []  # (start_ns, name, index, remote parent)
    next_index = first_index
    last_ts = 0
    adopts = sorted((n[1], n[2]) for n in track.notes if n[0] == "adopt") if track.notes else ()
    errors = {n[1]: tuple(n[2]) for n in track.notes if n[0] == "error"} if track.notes else {}
    position, adopted = 0, None
    for ts, name in track.events:
        last_ts = ts
        if name is not None:
            remote = None
            if not stack:
                while position < len(adopts) and adopts[position][0] <= ts:
                    adopted = adopts[position][1]
                    position += 1
                remote = adopted
            stack.append((ts, name, next_index, remote))
            next_index += 1
        elif stack:
            yield _closed(track, stack, ts, errors)
    while stack:
        yield _closed(track, stack, last_ts, errors)


def _closed(track: ThreadTrack, stack: list, end: int, errors: dict) -> Span:
    start, name, index, remote = stack.pop()
    parent = stack[-1][2] if stack else None
    return Span(name, start, end, track.pid, track.tid, len(stack), index, parent, remote,
                errors.get(start))


def atrace_events(events: list) -> Iterator[Event]:
    """Yield a thread's events balanced and in the order atrace writes them.

    Ends without a begin are dropped and begins never ended end at the last timestamp
    (as in :meth:`TraceData.spans`). The recorder stores a switch as an end and a ``[SW]``
    begin at the same time; AOSP's ``NNTRACE_*_SWITCH`` instead opens a nested ``[SW]``
    scope, and both scopes end together, which is what parse_systrace expects
    (``B x``, ``B [SW]y``, ``E``, ``E``). Every other event keeps its recording order.
    """
    extra: list[int] = []  # per open span: how many switched-away spans its end also closes
    carry = 0
    last = len(events) - 1
    for index, (ts, name) in enumerate(events):
        if name is not None:
            extra.append(carry)
            carry = 0
            yield ts, name
        elif not extra:
            continue
        elif index < last and events[index + 1][0] == ts \
                and (events[index + 1][1] or "").startswith(SWITCH):
            carry = extra.pop() + 1
        else:
            for _ in range(1 + extra.pop()):
                yield ts, None
    if extra:
        end = events[-1][0]
        for _ in range(len(extra) + sum(extra)):
            yield end, None
