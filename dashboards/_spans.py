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
    >>> from nnscope.parse_systrace.readers import open_rows
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:  # a small trace to look at
    ...     with tracing.application(tracing.Phase.OVERALL, "mobilenet"):
    ...         with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...             pass
    >>> tmp = tempfile.TemporaryDirectory()  # not the current directory
    >>> trace = os.path.join(tmp.name, "trace.html"); _ = session.export(trace)
    >>> spans = collect_spans(open_rows(trace))
    >>> spans.lane_keys[0] == (os.getpid(), os.getpid()), spans.names[spans.name[0]]
    (True, '[NN_LA_PO]mobilenet')
    >>> tmp.cleanup()
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from nnscope.tracing.naming import parse_name

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
    tids, tgids, stamps, begins, names = [], [], [], [], []
    for first_line, rows in source.raw_batches():
        if first_line is None:
            rows = [row for _, row in rows]
        if not rows:
            continue
        tid, tgid, ts, kind, name = zip(*rows)
        tids.append(_numbers(tid, np.int64))
        tgids.append(_numbers(tgid, np.int64))
        stamps.append(_numbers(ts, np.float64))
        begin = np.array([bool(k) for k in kind]) if first_line is None else \
            np.array(kind, dtype="S1") == b"B"
        begins.append(begin)
        names += itertools.compress(name, begin.tolist())
    tid, tgid, ts, begin = (np.concatenate(parts) if parts else np.zeros(0, dtype)
                            for parts, dtype in ((tids, np.int64), (tgids, np.int64),
                                                 (stamps, np.float64), (begins, bool)))
    table = {}
    name_of_begin = np.array([table.setdefault(n, len(table)) for n in names], dtype=np.int32)
    table = {_text(name): index for name, index in table.items()}
    keys, lane = np.unique(tgid * (1 << 32) + tid, return_inverse=True)
    lane_keys = [(int(key >> 32), int(key & 0xFFFFFFFF)) for key in keys]
    begin_name = np.full(len(ts), -1, dtype=np.int32)
    begin_name[begin] = name_of_begin
    columns, open_at_end = _pair(lane.astype(np.int64), ts, begin, begin_name)
    spans = _sorted(*columns, list(table), lane_keys)
    spans.marks, spans.open_at_end = len(ts), open_at_end
    nn = np.array(["[NN_" in name for name in spans.names] or [False])
    spans.counts = dict(marks=len(ts), spans=int(begin.sum()),
                        nn_spans=int(nn[name_of_begin].sum()) if len(names) else 0,
                        processes=len(np.unique(tgid)), threads=len(np.unique(tid)))
    return spans


def _numbers(values: tuple, dtype) -> np.ndarray:
    """A numpy column from a tuple of numbers or of their ASCII bytes (parsed in C)."""
    if values and isinstance(values[0], bytes):
        if dtype is np.int64:
            return np.fromstring(b" ".join(values), dtype=dtype, sep=" ")
        return np.fromiter(map(float, values), dtype, len(values))  # exactly float(text)
    return np.array(values, dtype=dtype)


def _text(name) -> str:
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


def _pair(lane, ts, begin, begin_name) -> tuple:
    """Match each end row with the last open begin row of its thread (vectorised).

    Rows are grouped by thread (time order kept); a begin at nesting level L pairs with
    the next end that returns the thread to level L. Threads whose first rows are ends
    without a begin (a trace cut mid-span) drop those ends first."""
    order = np.argsort(lane, kind="stable")
    lane, ts, begin, begin_name = lane[order], ts[order], begin[order], begin_name[order]
    keep = _drop_orphan_ends(lane, begin)
    lane, ts, begin, begin_name = lane[keep], ts[keep], begin[keep], begin_name[keep]
    step = np.where(begin, 1, -1)
    depth_after = np.cumsum(step)
    lane_base = np.zeros(len(lane), dtype=np.int64)
    if len(lane):
        firsts = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1]])
        base = np.r_[0, depth_after[firsts[1:] - 1]] if len(firsts) > 1 else np.array([0])
        lane_base = np.repeat(base, np.diff(np.r_[firsts, len(lane)]))
    level = depth_after - lane_base - begin.astype(np.int64)
    group = np.lexsort((np.arange(len(lane)), level, lane))
    g_begin, g_lane, g_level = begin[group], lane[group], level[group]
    pairs = np.flatnonzero(g_begin[:-1] & ~g_begin[1:] & (g_lane[:-1] == g_lane[1:]) &
                           (g_level[:-1] == g_level[1:]))
    b, e = group[pairs], group[pairs + 1]
    paired = np.zeros(len(lane), dtype=bool)
    paired[b] = True
    unpaired = np.flatnonzero(begin & ~paired)
    last = ts.max() if len(ts) else 0.0
    start = np.r_[ts[b], ts[unpaired]]
    end = np.r_[ts[e], np.maximum(ts[unpaired], last)]
    columns = (start, end, np.r_[lane[b], lane[unpaired]], np.r_[level[b], level[unpaired]],
               np.r_[begin_name[b], begin_name[unpaired]])
    return columns, len(unpaired)


def _drop_orphan_ends(lane, begin) -> np.ndarray:
    """Mask of the rows to keep: ends that find no open begin on their thread are dropped."""
    keep = np.ones(len(lane), dtype=bool)
    if not len(lane):
        return keep
    step = np.where(begin, 1, -1)
    firsts = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1]])
    bounds = np.r_[firsts, len(lane)]
    for a, z in zip(bounds[:-1], bounds[1:]):
        if np.cumsum(step[a:z]).min() >= 0:
            continue
        depth = 0
        for i in range(a, z):
            if begin[i]:
                depth += 1
            elif depth:
                depth -= 1
            else:
                keep[i] = False
    return keep


def _sorted(starts, ends, lanes, depths, names, name_list, lane_keys) -> Spans:
    start = np.asarray(starts, dtype=np.float64)
    end = np.asarray(ends, dtype=np.float64)
    lane = np.asarray(lanes, dtype=np.int32)
    depth = np.asarray(depths, dtype=np.int32)
    name = np.asarray(names, dtype=np.int32)
    order = np.lexsort((start, depth, lane))
    return Spans(start[order], end[order], lane[order], depth[order], name[order],
                 name_list, lane_keys)
