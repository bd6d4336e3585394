"""The systrace/ftrace reader's blocks: read into two reused buffers, never changed under a
caller that keeps one (``readers.systrace._trace_blocks``)."""
from __future__ import annotations

import io

import pytest

from nnscope.parse_systrace.readers import systrace
from tests.support.paths import SYSTRACE_FIXTURES

HEADER = b"#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n"


def _rows(count: int) -> bytes:
    return b"".join(b"  app-%d (%d) [000] ...1 %d.%06d: tracing_mark_write: B|%d|[NN_LA_PO]%s\n"
                    % (i % 7, i % 7, i, i, i % 7, b"x" * (i % 90)) for i in range(count))


@pytest.mark.parametrize("chunk", [16, 64, 200, 4096])
def test_kept_blocks_stay_as_read(monkeypatch, chunk):
    """Every block kept by the caller (the bytearrays themselves) still holds what was read:
    joined they give the trace, whatever the block size."""
    monkeypatch.setattr(systrace, "CHUNK", chunk)
    body = _rows(300)
    kept = [(lines_before, data, lines) for lines_before, data, lines
            in systrace._trace_blocks(io.BytesIO(HEADER + body), False)]
    assert b"".join(data for _, data, _ in kept) == HEADER + body
    assert [before for before, _, _ in kept] == \
        [sum(lines for _, _, lines in kept[:i]) for i in range(len(kept))]


def test_blocks_used_one_at_a_time_read_the_same_rows(monkeypatch):
    """A caller that drops each block (the buffers are reused) reads the rows of a caller that
    keeps them all."""
    trace = (SYSTRACE_FIXTURES / "omr1.html").read_bytes()
    monkeypatch.setattr(systrace, "CHUNK", 1 << 12)
    streamed = list(systrace.read_html(io.BytesIO(trace)))
    kept = [block for block in systrace._trace_blocks(io.BytesIO(trace), True)]
    rows = [row for base, data, _ in kept for row in systrace._parse_block(data, base, {})]
    assert streamed == rows and len(rows) > 100
