"""Systrace exporters, read back with a regex that follows the atrace row grammar."""
import re
from collections import defaultdict

import pytest

from tests.support.paths import SYSTRACE_FIXTURES
from nnscope.tracing.exporters import ExportResult, exporter_for_path, get_exporter
from nnscope.tracing.exporters.systrace import (COLUMN_HEADER, SystraceHtmlExporter, SystraceTextExporter,
                                        atrace_order)
from nnscope.tracing.span import ThreadTrack, TraceData

# TASK-PID (TGID) [CPU] FLAGS SECONDS.MICROS: tracing_mark_write: B|TGID|NAME  or  E|TGID
ROW = re.compile(r"^\s*(?P<task>.{1,16})-(?P<pid>\d+)\s+\(\s*(?P<tgid>\d+|-----)\)\s+\[(?P<cpu>\d{3})\]"
                 r"\s+(?P<flags>\S{4})\s+(?P<sec>\d+)\.(?P<us>\d{6}): tracing_mark_write: "
                 r"(?:B\|(?P<btgid>\d+)\|(?P<name>.*)|E\|(?P<etgid>\d+))$")

APP, DRIVER = 4242, 777
PO, PE = "[NN_LA_PO]mobilenet", "[NN_LR_PE]ANeuralNetworksExecution_compute"


def sample_trace():
    """Two processes; times chosen so that microsecond truncation collapses neighbours."""
    main = ThreadTrack(APP, APP, "bench main thread", [
        (5_000_000_000_999, PO), (5_000_000_001_000, PE),
        (5_000_000_002_500, "[NN_LI_PE]execute"), (5_000_000_002_501, "HIDL::IPreparedModel::execute::client"),
        (5_000_000_009_000, None), (5_000_000_009_000, None), (5_000_000_009_999, None),
        (5_000_000_010_000, None)])
    worker = ThreadTrack(APP, APP + 3, "NeuralNetworks", [
        (5_000_000_001_500, "[NN_LC_PTR]conv2dFloat32"), (5_000_000_001_999, None),
        (5_000_000_001_999, "[SW][NN_LC_PCO]conv2dFloat32"), (5_000_000_004_000, None)])
    server = ThreadTrack(DRIVER, DRIVER + 1, "HwBinder:777_1", [
        (5_000_000_002_900, "HIDL::IPreparedModel::execute::server"),
        (5_000_000_003_000, "[NN_LD_PE]SampleDriver::execute"), (5_000_000_008_000, None),
        (5_000_000_008_100, None)])
    return TraceData({APP: "bench", DRIVER: "driver"}, [main, worker, server])


def parse_rows(text):
    lines = text.splitlines()
    start = lines.index(COLUMN_HEADER) + 1
    rows = []
    for line in lines[start:]:
        if line.startswith("#"):
            continue
        if "</script>" in line:
            break
        match = ROW.match(line)
        assert match, line
        rows.append(match)
    return rows


def check_rows(rows, trace):
    assert len(rows) == sum(len(t.events) for t in trace.threads)
    times = [int(r["sec"]) * 1_000_000 + int(r["us"]) for r in rows]
    assert times == sorted(times)
    stacks = defaultdict(list)
    for row, ts in zip(rows, times):
        tgid, tid = int(row["tgid"]), int(row["pid"])
        assert int(row["btgid"] or row["etgid"]) == tgid
        if row["name"] is not None:
            parent = stacks[tid][-1] if stacks[tid] else None
            assert parent is None or parent[1] <= ts
            stacks[tid].append((row["name"], ts))
        else:
            name, begin = stacks[tid].pop()
            assert begin <= ts
    assert not any(stacks.values())
    expected = {(t.pid, t.tid): [n for _, n in atrace_order(t.events)] for t in trace.threads}
    got = defaultdict(list)
    for row in rows:
        got[(int(row["tgid"]), int(row["pid"]))].append(row["name"])
    assert dict(got) == expected


def test_grammar_regex_reads_the_real_fixture():
    text = (SYSTRACE_FIXTURES / "omr1.html").read_text(errors="replace")
    block = text[text.index(COLUMN_HEADER):]
    marks = [line for line in block.splitlines()[:4000] if ": tracing_mark_write: B|" in line
             or ": tracing_mark_write: E|" in line]
    assert marks and all(ROW.match(line) for line in marks)


def test_text_rows_follow_the_grammar(tmp_path):
    trace = sample_trace()
    path = tmp_path / "trace.txt"
    assert exporter_for_path(path) is SystraceTextExporter
    assert SystraceTextExporter(path).export(trace) is ExportResult.SUCCESS
    text = path.read_text()
    assert text.startswith("# tracer: nop\n")
    assert "entries-in-buffer/entries-written: 16/16" in text
    rows = parse_rows(text)
    check_rows(rows, trace)
    first = rows[0]
    assert (first["task"].strip(), first["sec"], first["us"]) == ("bench main thre", "5000", "000000")
    assert first.group(0) == ("  bench main thre-4242 ( 4242) [000] ...1  5000.000000: "
                              "tracing_mark_write: B|4242|[NN_LA_PO]mobilenet")


def test_html_embeds_the_rows_in_a_trace_data_block(tmp_path):
    trace = sample_trace()
    trace.threads[0].events[0] = (trace.threads[0].events[0][0], "[NN_LA_PO]a</script>b\nc")
    path = tmp_path / "trace.html"
    assert get_exporter("systrace-html-bare") is SystraceHtmlExporter  # .html: the report page
    assert SystraceHtmlExporter(path).export(trace) is ExportResult.SUCCESS
    text = path.read_text()
    assert text.count('<script class="trace-data" type="application/text">') == 1
    assert text.count("</script>") == 1
    rows = parse_rows(text[text.index('class="trace-data"'):])
    assert rows[0]["name"] == "[NN_LA_PO]a<\\/script>b c"
    assert len(rows) == 16


def test_io_error_returns_failure_and_logs(tmp_path, caplog):
    result = SystraceTextExporter(tmp_path / "missing" / "trace.txt").export(sample_trace())
    assert result is ExportResult.FAILURE
    assert "systrace export" in caplog.text


@pytest.mark.parametrize("ns,text", [(0, "    0.000000"), (1_999, "    0.000001"),
                                     (1_034_718_303_435_999, "1034718.303435")])
def test_timestamps_truncate_to_microseconds(ns, text):
    from nnscope.tracing.exporters.systrace import timestamp
    assert timestamp(ns) == text


@pytest.mark.parametrize("ns", [0, 999_999_999, 9_999_999_999_999, 10_000_000_000_000,
                                1_034_718_303_435_999])
def test_rows_format_timestamps_like_timestamp(ns):
    from nnscope.tracing.exporters.systrace import ftrace_rows, timestamp
    trace = TraceData({1: "p"}, [ThreadTrack(1, 2, "t", [(ns, "x"), (ns, None)])])
    rows = list(ftrace_rows(trace))
    assert [row.split(": tracing_mark_write")[0][-len(timestamp(ns)):] for row in rows] == \
        [timestamp(ns)] * 2
    assert all(ROW.match(row) for row in rows)


def test_switches_are_written_as_nested_begins_like_aosp(tmp_path):
    trace = sample_trace()
    SystraceTextExporter(tmp_path / "t.txt").export(trace)
    worker = [(r["name"], r["us"]) for r in parse_rows((tmp_path / "t.txt").read_text())
              if int(r["pid"]) == APP + 3]
    assert worker == [("[NN_LC_PTR]conv2dFloat32", "000001"), ("[SW][NN_LC_PCO]conv2dFloat32", "000001"),
                      (None, "000004"), (None, "000004")]


def test_atrace_order_of_double_and_unfinished_switches_balanced():
    events = [(1, "[NN_LR_PE]run"), (2, "[NN_LC_PTR]op"), (3, None), (3, "[SW][NN_LC_PCO]op"),
              (4, None), (4, "[SW][NN_LC_PR]op"), (5, None), (6, None),
              (7, "[NN_LC_PTR]next"), (8, None), (8, "[SW][NN_LC_PCO]next")]
    assert list(atrace_order(events)) == [
        (1, "[NN_LR_PE]run"), (2, "[NN_LC_PTR]op"), (3, "[SW][NN_LC_PCO]op"),
        (4, "[SW][NN_LC_PR]op"), (5, None), (5, None), (5, None), (6, None),
        (7, "[NN_LC_PTR]next"), (8, "[SW][NN_LC_PCO]next"), (8, None), (8, None)]
    # ends without a begin are dropped, begins never ended end at the last time
    assert list(atrace_order([(1, None), (2, "a"), (3, None), (4, None), (5, "b")])) == [
        (2, "a"), (3, None), (5, "b"), (5, None)]
    # an end and a begin that only happen to share a time stay as they are
    plain = [(1, "a"), (2, None), (2, "b"), (3, None)]
    assert list(atrace_order(plain)) == plain
