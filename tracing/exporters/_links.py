"""Parents across threads and processes: which span each top-level span of a thread runs for.

A thread's top-level span may carry the W3C context of the span it runs for (``Span.remote_parent``:
a driver's server span, the client span of the IPC call; a worker thread's first span, the span
that started it). The context names its parent by id (``tracing.propagation.span_id`` of the
parent's pid, tid and begin timestamp); :func:`parents` computes that id for every span of the
trace and looks the contexts up. Nothing is matched by time: a context whose span is not in the
trace (another recording, a dropped file) leaves its span a root.

Example:
    >>> import threading
    >>> from nnscope import tracing
    >>> def worker(parent):  # a thread that runs for the span in ``parent``
    ...     with tracing.adopt(parent), tracing.runtime(tracing.Phase.EXECUTION, "worker"):
    ...         pass
    >>> with tracing.TraceSession() as session:
    ...     with tracing.runtime(tracing.Phase.EXECUTION, "compute"):
    ...         thread = threading.Thread(target=worker, args=(tracing.context(),))
    ...         thread.start(); thread.join()
    >>> spans = list(session.collect().spans())
    >>> parents(spans)
    {1: 0}
    >>> [(span.index, span.name) for span in spans]
    [(0, '[NN_LR_PE]compute'), (1, '[NN_LR_PE]worker')]
"""
from __future__ import annotations

from typing import Iterable

from nnscope.tracing import propagation
from nnscope.tracing.span import Span


def parents(spans: Iterable[Span]) -> dict[int, int]:
    """``span.index -> parent index`` for every span with a parent (same thread or linked)."""
    spans = list(spans)
    wanted: dict[bytes, list[int]] = {}
    out: dict[int, int] = {}
    for span in spans:
        if span.parent is not None:
            out[span.index] = span.parent
        elif span.remote_parent is not None:
            try:
                parent_id = propagation.parse_text(span.remote_parent).span_id
            except ValueError:
                continue
            wanted.setdefault(parent_id, []).append(span.index)
    if wanted:
        keys: dict[tuple[int, int], int] = {}
        for span in spans:
            thread = (span.pid, span.tid)
            key = keys.get(thread)
            if key is None:
                key = keys[thread] = propagation.thread_key(*thread)
            children = wanted.get(propagation.span_id(span.pid, span.tid, span.start_ns, key))
            for child in children or ():
                if child != span.index:
                    out[child] = span.index
    return out


def parents_first(spans: list[Span], parent_of: dict[int, int]) -> list[Span]:
    """``spans`` ordered so that every parent comes before its children (by begin otherwise);
    a cycle (never produced by the recorder) is broken by dropping its link."""
    by_index = {span.index: span for span in spans}
    ordered: list[Span] = []
    placed: set[int] = set()
    for span in sorted(spans, key=lambda s: (s.start_ns, s.depth)):
        chain = []
        current: int | None = span.index
        while current is not None and current not in placed and current not in chain:
            chain.append(current)
            current = parent_of.get(current)
            if current is not None and current not in by_index:
                current = None
        if current is not None and current in chain:  # a cycle: cut it at its first span
            parent_of.pop(current, None)
        for index in reversed(chain):
            placed.add(index)
            ordered.append(by_index[index])
    return ordered
