"""Chrome JSON reader: B/E/X events, ordering at equal times, systemTraceEvents, bad input."""
import io
import json

import pytest

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.readers import open_rows
from nnscope.parse_systrace.readers.chrome_json import read_chrome_json, sniff


def rows_of(document) -> list[tuple]:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    return list(read_chrome_json(io.BytesIO(data)))


def marks(rows) -> list[tuple]:
    """(ts, tid, name) without tgid and where."""
    return [(ts, tid, name) for ts, tid, _, name, _ in rows]


def x(name, ts, dur, tid=1, pid=1):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}


def test_begin_end_events_become_rows_with_event_index_and_exact_seconds():
    doc = {"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "t"}},
        {"ph": "B", "name": "[NN_LR_PE]f", "ts": 1034700742666, "pid": 7, "tid": 8},
        {"ph": "E", "ts": 1034700742999.5, "pid": 7, "tid": 8},
    ]}
    assert rows_of(doc) == [(float("1034700.742666"), 8, 7, "[NN_LR_PE]f", 2),
                            (float("1034700.7429995"), 8, 7, None, 3)]


def test_fractional_microseconds_convert_exactly_like_the_text_seconds():
    doc = [{"ph": "B", "name": "a", "ts": 12743897028173.988, "pid": 1, "tid": 1}]
    assert rows_of(doc)[0][0] == float("12743897.028173988")


def test_complete_events_written_at_their_end_are_nested_parent_first():
    doc = [x("child", 10, 5), x("sibling", 20, 5), x("parent", 10, 20)]
    assert marks(rows_of(doc)) == [
        (1e-05, 1, "parent"), (1e-05, 1, "child"), (1.5e-05, 1, None),
        (2e-05, 1, "sibling"), (2.5e-05, 1, None), (3e-05, 1, None)]


def test_end_of_one_complete_event_precedes_a_begin_at_the_same_time():
    rows = marks(rows_of([x("second", 20, 5), x("first", 10, 10)]))
    assert rows == [(1e-05, 1, "first"), (2e-05, 1, None),
                    (2e-05, 1, "second"), (2.5e-05, 1, None)]


def test_zero_length_complete_event_nests_in_an_enclosing_one_starting_with_it():
    rows = marks(rows_of([x("zero", 10, 0), x("outer", 10, 5)]))
    assert rows == [(1e-05, 1, "outer"), (1e-05, 1, "zero"), (1e-05, 1, None),
                    (1.5e-05, 1, None)]


def test_begin_end_events_keep_file_order_at_equal_times():
    doc = [{"ph": "B", "name": "a", "ts": 5, "pid": 1, "tid": 1},
           {"ph": "E", "ts": 5, "pid": 1, "tid": 1},
           {"ph": "B", "name": "b", "ts": 5, "pid": 1, "tid": 1},
           {"ph": "E", "ts": 5, "pid": 1, "tid": 1}]
    assert [name for _, _, name in marks(rows_of(doc))] == ["a", None, "b", None]


def test_threads_are_merged_by_time_and_each_sorted():
    doc = [{"ph": "B", "name": "late", "ts": 30, "pid": 1, "tid": 1},
           {"ph": "B", "name": "early", "ts": 10, "pid": 2, "tid": 2},
           {"ph": "B", "name": "t1-first", "ts": 20, "pid": 1, "tid": 1}]
    assert [name for _, _, name in marks(rows_of(doc))] == ["early", "t1-first", "late"]


def test_bare_list_without_closing_bracket_is_accepted():
    data = b'[{"ph": "B", "name": "a", "ts": 1, "pid": 1, "tid": 1},\n'
    assert marks(rows_of(data)) == [(1e-06, 1, "a")]


def test_system_trace_events_are_read_as_ftrace_text_and_merged_by_time():
    text = ("# tracer: nop\n"
            "  app-3 (3) [000] ...1 0.000015: tracing_mark_write: B|3|[NN_LA_PO]m\n"
            "  app-3 (3) [000] ...1 0.000040: tracing_mark_write: E|3\n")
    doc = {"traceEvents": [x("json", 20, 10, tid=9, pid=9)], "systemTraceEvents": text}
    assert marks(rows_of(doc)) == [(1.5e-05, 3, "[NN_LA_PO]m"), (2e-05, 9, "json"),
                                   (3e-05, 9, None), (4e-05, 3, None)]


def test_json_is_detected_from_content_before_the_text_formats():
    text = "  app-3 (3) [000] ...1 0.5: tracing_mark_write: B|3|x\n"
    data = json.dumps({"systemTraceEvents": text, "trace-data": 1}).encode()
    source = open_rows(io.BytesIO(data))
    assert source.format == "chrome_json"
    assert marks(source.rows()) == [(0.5, 3, "x")]


@pytest.mark.parametrize("head, expected", [
    (b'{"traceEvents": []}', True), (b"\xef\xbb\xbf  [", True), (b"\n\t{", True),
    (b"# tracer: nop", False), (b"<html>", False), (b"\x0a\x02", False), (b"", False)])
def test_sniff(head, expected):
    assert sniff(head) is expected


BAD_DOCUMENTS = {
    "malformed": (b'{"traceEvents": [', "malformed JSON"),
    "not utf": (b"[\xff\xfe\xfd]", "UTF"),
    "scalar": (b"42", "neither an object nor an event list"),
    "no keys": (b'{"foo": []}', "neither traceEvents nor systemTraceEvents"),
    "events not list": (b'{"traceEvents": {}}', "traceEvents is not a list"),
    "system not str": (b'{"systemTraceEvents": 5}', "systemTraceEvents is not a string"),
    "event not object": (b"[1]", "event 1: event is not an object"),
    "no ph": (b'[{"ts": 1}]', "event 1: missing or non-string 'ph'"),
    "ts string": (b'[{"ph": "B", "name": "a", "ts": "1", "pid": 1, "tid": 1}]', "'ts'"),
    "ts bool": (b'[{"ph": "E", "ts": true, "pid": 1, "tid": 1}]', "'ts'"),
    "ts nan": (b'[{"ph": "E", "ts": NaN, "pid": 1, "tid": 1}]', "NaN"),
    "ts huge": (b'[{"ph": "E", "ts": 1e999, "pid": 1, "tid": 1}]', "'ts' out of range"),
    "pid float": (b'[{"ph": "E", "ts": 1, "pid": 1.5, "tid": 1}]', "'pid'"),
    "no tid": (b'[{"ph": "E", "ts": 1, "pid": 1}]', "'tid'"),
    "name number": (b'[{"ph": "B", "name": 3, "ts": 1, "pid": 1, "tid": 1}]', "'name'"),
    "no dur": (b'[{"ph": "X", "name": "a", "ts": 1, "pid": 1, "tid": 1}]', "'dur'"),
    "negative dur": (b'[{"ph": "X", "name": "a", "ts": 1, "dur": -1, "pid": 1, "tid": 1}]',
                     "negative 'dur'"),
    "deep": (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(BAD_DOCUMENTS))
def test_bad_documents_raise_trace_format_error(case):
    data, message = BAD_DOCUMENTS[case]
    with pytest.raises(TraceFormatError) as caught:
        rows_of(data)
    assert message in str(caught.value)


def test_system_trace_events_rows_and_errors_name_their_line():
    text = "# tracer: nop\n  app-3 (3) [000] ...1 0.5: tracing_mark_write: B|3|x\n"
    assert rows_of({"systemTraceEvents": text})[0][4] == "systemTraceEvents line 2"
    bad = text + "  app-3 (3) [000] ...1 zz: tracing_mark_write: E|3\n"
    with pytest.raises(TraceFormatError, match="^systemTraceEvents line 3: cannot parse"):
        rows_of({"systemTraceEvents": bad})
