"""Spans of a trace as columns: begin/end marks paired per thread, one pass over the rows.

:func:`collect_spans` reads the rows of :func:`parse_systrace.readers.open_rows` once and
pairs each end mark with the last open begin mark of the same thread. The result is a
:class:`Spans` of numpy columns sorted by lane, depth and start (so that, within one lane
and depth, spans never overlap and both starts and ends are ascending), plus the counts
the page header shows (marks, spans, processes, threads), so the file is read only once
for both.

Spans still open at the end of the trace end at the last timestamp (``open_at_end``
counts them). Each name gets a layer code from the NNTRACE contract (``HIDL::`` transport
marks are IPC, untagged spans ``LO``).

Example:
    >>> from parse_systrace.readers import open_rows
    >>> spans = collect_spans(open_rows("trace.html"))            # doctest: +SKIP
    >>> spans.lane_keys[0], spans.names[spans.name[0]]            # doctest: +SKIP
    ((1234, 1234), '[NN_LA_PO]mobilenet')
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracing.naming import parse_name

#: Layer codes the timeline colours; anything else is drawn as "Other".
LAYER_CODES = ("LA", "LR", "LI", "LD", "LC", "LO")


@dataclass
class Spans:
    """Paired spans of one trace (times in seconds, as the trace has them)."""

    start: np.ndarray
    end: np.ndarray
    lane: np.ndarray
    depth: np.ndarray
    name: np.ndarray
    names: list
    lane_keys: list  # lane index -> (tgid, tid)
    marks: int = 0
    open_at_end: int = 0
    counts: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.start)


def layer_of(name: str) -> str:
    """The contract layer of a span name (``HIDL::`` marks: IPC; untagged: ``LO``)."""
    parsed = parse_name(name)
    if parsed is not None:
        code = parsed.layer.value
        return code if code in LAYER_CODES else "LO"
    return "LI" if name.startswith("HIDL::") else "LO"


def phase_of(name: str) -> str:
    """The contract phase code of a span name, or ``""`` when it has no tag."""
    parsed = parse_name(name)
    return parsed.phase.value if parsed is not None else ""


def detail_of(name: str) -> str:
    """The detail text of a tagged name (the name itself when untagged)."""
    parsed = parse_name(name)
    return parsed.detail if parsed is not None else name


def collect_spans(source) -> Spans:
    """Pair the begin/end rows of ``source`` (a ``RowSource``) into :class:`Spans`."""
    names, lanes, stacks = {}, {}, []
    starts, ends, lane_of, depths, name_ids = [], [], [], [], []
    marks, last = 0, 0.0
    for batch in source.batches():
        marks += len(batch)
        for ts, tid, tgid, name, _ in batch:
            lane = lanes.get((tgid, tid))
            if lane is None:
                lane = lanes[(tgid, tid)] = len(stacks)
                stacks.append([])
            stack = stacks[lane]
            if name is not None:
                ident = names.get(name)
                if ident is None:
                    ident = names[name] = len(names)
                stack.append((ts, ident))
            elif stack:
                begin, ident = stack.pop()
                starts.append(begin)
                ends.append(ts)
                lane_of.append(lane)
                depths.append(len(stack))
                name_ids.append(ident)
        if batch:
            last = max(last, batch[-1][0])
    open_at_end = 0
    for lane, stack in enumerate(stacks):
        while stack:
            begin, ident = stack.pop()
            starts.append(begin)
            ends.append(max(last, begin))
            lane_of.append(lane)
            depths.append(len(stack))
            name_ids.append(ident)
            open_at_end += 1
    spans = _sorted(starts, ends, lane_of, depths, name_ids, list(names), list(lanes))
    spans.marks, spans.open_at_end = marks, open_at_end
    nn_names = np.array(["[NN_" in name for name in spans.names] or [False])
    nn_spans = int(nn_names[spans.name].sum()) if len(spans) else 0
    keys = spans.lane_keys
    spans.counts = dict(marks=marks, spans=len(spans), nn_spans=nn_spans,
                        processes=len({tgid for tgid, _ in keys}),
                        threads=len({tid for _, tid in keys}))
    return spans


def _sorted(starts, ends, lanes, depths, names, name_list, lane_keys) -> Spans:
    start = np.asarray(starts, dtype=np.float64)
    end = np.asarray(ends, dtype=np.float64)
    lane = np.asarray(lanes, dtype=np.int32)
    depth = np.asarray(depths, dtype=np.int32)
    name = np.asarray(names, dtype=np.int32)
    order = np.lexsort((start, depth, lane))
    return Spans(start[order], end[order], lane[order], depth[order], name[order],
                 name_list, lane_keys)
