"""Span pairing: the vectorised pairing equals a plain per-thread stack over the rows."""
from __future__ import annotations

import pytest

from nnscope.dashboards._spans import collect_spans, layer_of
from nnscope.parse_systrace.readers import open_rows
from tests.support.paths import SYSTRACE_FIXTURES

TRACES = [SYSTRACE_FIXTURES / "omr1.html", SYSTRACE_FIXTURES / "omr1_incomplete.html",
          SYSTRACE_FIXTURES / "synthetic" / "cpu.html"]


def stack_pairs(path) -> list:
    """The reference: one stack per (tgid, tid); open spans end at the last timestamp."""
    stacks, out, last = {}, [], 0.0
    for ts, tid, tgid, name, _ in open_rows(path).rows():
        last = max(last, ts)
        stack = stacks.setdefault((tgid, tid), [])
        if name is not None:
            stack.append((ts, name))
        elif stack:
            begin, name = stack.pop()
            out.append((tgid, tid, len(stack), begin, ts, name))
    for (tgid, tid), stack in stacks.items():
        while stack:
            begin, name = stack.pop()
            out.append((tgid, tid, len(stack), begin, max(last, begin), name))
    return sorted(out)


def pairs(spans) -> list:
    return sorted((*spans.lane_keys[lane], int(depth), float(a), float(b), spans.names[name])
                  for a, b, lane, depth, name in zip(spans.start, spans.end, spans.lane,
                                                     spans.depth, spans.name))


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.name)
def test_pairs_match_a_stack_per_thread(trace):
    spans = collect_spans(open_rows(trace))
    assert pairs(spans) == stack_pairs(trace)


def test_chrome_json_of_nnscope_run(nnscope_run):
    spans = collect_spans(open_rows(nnscope_run.trace))
    assert pairs(spans) == stack_pairs(nnscope_run.trace)
    assert spans.open_at_end == 0 and spans.counts["spans"] == len(spans)


def test_orphan_ends_and_open_spans(tmp_path):
    lines = ["# tracer: nop"]
    marks = [(7, 1.0, "E|7"), (7, 1.1, "B|7|[NN_LA_PO]m"), (7, 1.2, "B|7|[NN_LR_PC]c"),
             (7, 1.3, "E|7"), (8, 1.35, "E|8"), (7, 1.4, "B|7|[NN_LR_PE]e")]
    for tid, ts, mark in marks:
        lines.append(f"  app-{tid} (7) [000] ...1 {ts:.6f}: tracing_mark_write: {mark}")
    trace = tmp_path / "cut.txt"
    trace.write_text("\n".join(lines) + "\n")
    spans = collect_spans(open_rows(trace))
    assert pairs(spans) == stack_pairs(trace) == [
        (7, 7, 0, 1.1, 1.4, "[NN_LA_PO]m"), (7, 7, 1, 1.2, 1.3, "[NN_LR_PC]c"),
        (7, 7, 1, 1.4, 1.4, "[NN_LR_PE]e")]
    assert spans.open_at_end == 2
    assert spans.counts == dict(marks=6, spans=3, nn_spans=3, processes=1, threads=2)


@pytest.mark.parametrize("name, layer", [
    ("[NN_LA_PO]m", "LA"), ("[SW][NN_LC_PCO]conv2dFloat32", "LC"),
    ("HIDL::IDevice::prepareModel::server", "LI"), ("[NN_LU_PU]validateModel", "LO"),
    ("surfaceflinger frame", "LO")])
def test_layer_of(name, layer):
    assert layer_of(name) == layer
