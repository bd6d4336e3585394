"""The fast paths of the systrace reader read a block exactly as the line-by-line parser does.

:func:`parse_systrace.readers._fastrows.raw_rows` takes a block only when one regex matches
every line; what it then gives must be what :func:`parse_systrace.readers.systrace._parse_lines`
gives for the same lines (which is the established tool's reading), whatever the spacing, the
task names, the flags and the mark names. Lines it does not take go to that parser.
"""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.readers import _fastrows, systrace

_GAPS = st.sampled_from([" ", "  ", "\t", " \t"])
_TASK = st.text(alphabet="ab-1 \t(", min_size=1, max_size=18)
_FLAGS = st.text(alphabet=".1d-\t()5", min_size=1, max_size=8)
_NAME = st.one_of(st.text(alphabet="xN_[]-( )0:", max_size=12),
                  st.just("a 2.5: tracing_mark_write: E"), st.just("[NN_LA_PO]m"))


@st.composite
def mark_line(draw) -> str:
    lead = draw(st.sampled_from(["", " ", "        ", "\t", " \t "]))
    pid, tgid = draw(st.integers(1, 99999)), draw(st.integers(1, 99999))
    head = (f"{lead}{draw(_TASK)}-{pid}{draw(_GAPS)}({draw(st.sampled_from(['', ' ', chr(9)]))}"
            f"{tgid}) [00{draw(st.integers(0, 7))}] {draw(_FLAGS)}"
            f"{draw(st.sampled_from([' ', '  ', chr(9)]))}{draw(st.integers(0, 9))}.{pid:06d}")
    mark = draw(st.sampled_from(["B|{t}|{n}", "E", "E|{t}"])).format(t=tgid, n=draw(_NAME))
    return f"{head}: tracing_mark_write: {mark}\n"


def _line_parser(block: bytes):
    try:
        return [row[:4] for row in systrace._parse_lines(block, 0, {})]
    except TraceFormatError:
        return None


def _as_rows(found: list) -> list:
    return [(float(ts), int(tid), int(tgid), name.decode("utf-8", "replace") if kind else None)
            for tid, tgid, ts, kind, name in found]


#: A tab in the flags: the line parser's task (16 characters at most) reaches ``-5\t(6) ``.
TAB_IN_FLAGS = "ab-1 (2) [000] x-5\t(6)  0.000001: tracing_mark_write: B|2|n\n"


@settings(max_examples=400, deadline=None)
@given(st.lists(mark_line(), min_size=1, max_size=6))
@example([TAB_IN_FLAGS])
def test_a_block_taken_by_the_fast_path_reads_as_line_by_line(lines):
    block = "".join(lines).encode()
    found = _fastrows.raw_rows(block)
    if found is not None:
        assert _as_rows(found) == _line_parser(block)


def test_usual_columns_and_other_spacing_both_read():
    usual = b"        bench-11-21342 (21342) [006] ...1  1452.380410: tracing_mark_write: B|21342|f\n"
    tabbed = usual.replace(b"        ", b"\t").replace(b" (", b"\t(")
    for block in (usual, tabbed):
        assert _as_rows(_fastrows.raw_rows(block)) == _line_parser(block)
        assert _as_rows(_fastrows.raw_rows(block)) == [(1452.38041, 21342, 21342, "f")]
