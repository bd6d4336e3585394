"""Chrome JSON exporter, read back with json."""
import json
from decimal import Decimal

from nnscope.tracing.exporters import ExportResult, exporter_for_path, get_exporter
from nnscope.tracing.exporters.chrome_json import ChromeJsonExporter, microseconds
from nnscope.tracing.span import ThreadTrack, TraceData

NAMES = ["[NN_LA_PO]mobilenet", '[SW][NN_LC_PCO]conv "3x3" é', "HIDL::IDevice::prepareModel::client",
         "plain"]


def sample_trace():
    main = ThreadTrack(10, 10, "main", [(1_000_000_123, NAMES[0]), (1_000_000_500, NAMES[2]),
                                        (1_000_001_001, None), (1_000_002_000, None)])
    worker = ThreadTrack(10, 12, "worker \"w\"", [(1_000_000_600, NAMES[1]), (1_000_000_601, None),
                                                (1_000_000_700, NAMES[3])])  # never ended
    return TraceData({10: "bench"}, [main, worker])


def load(tmp_path, trace):
    path = tmp_path / "trace.json"
    assert exporter_for_path(path) is ChromeJsonExporter is get_exporter("chrome-json")
    assert ChromeJsonExporter(path).export(trace) is ExportResult.SUCCESS
    return json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)


def spans_of(events: list) -> dict[str, dict]:
    """name -> {"begin": B event, "end": ts of its E}: B/E pairs matched per thread."""
    spans, stacks = {}, {}
    for event in events:
        stack = stacks.setdefault((event["pid"], event["tid"]), [])
        if event["ph"] == "B":
            stack.append(event)
        elif event["ph"] == "E":
            begin = stack.pop()
            spans[begin["name"]] = {"begin": begin, "end": event["ts"]}
    assert not any(stacks.values())
    return spans


def test_document_metadata_and_spans(tmp_path):
    document = load(tmp_path, sample_trace())
    assert document["displayTimeUnit"] == "ns"
    events = document["traceEvents"]
    meta = [(e["name"], e["pid"], e.get("tid"), e["args"]["name"]) for e in events if e["ph"] == "M"]
    assert meta == [("process_name", 10, 0, "bench"), ("thread_name", 10, 10, "main"),
                    ("thread_name", 10, 12, 'worker "w"')]
    assert {e["ph"] for e in events} == {"M", "B", "E"}
    spans = spans_of(events)
    assert set(spans) == set(NAMES)
    outer = spans[NAMES[0]]
    assert (outer["begin"]["pid"], outer["begin"]["tid"]) == (10, 10)
    assert outer["begin"]["ts"] * 1000 == 1_000_000_123 and outer["end"] * 1000 == 1_000_002_000
    plain = spans[NAMES[3]]
    assert plain["end"] == plain["begin"]["ts"]  # closed at the thread's last event
    inner = spans[NAMES[2]]
    assert outer["begin"]["ts"] <= inner["begin"]["ts"] and inner["end"] <= outer["end"]


def test_events_are_merged_by_time_and_keep_the_recorders_order_at_equal_times(tmp_path):
    """A zero-length span ended where the next begins stays before it (an X event could not
    say so), and a switch is nested the AOSP way: B x, B [SW]y, E, E."""
    track = ThreadTrack(1, 2, "cpu", [
        (5_000, "[NN_LC_PE]run"), (5_000, "[NN_LC_PTR]op"), (5_000, None),
        (5_000, "[SW][NN_LC_PCO]op"), (7_000, None), (7_000, "[NN_LC_PTR]next"), (7_000, None),
        (7_000, "[NN_LC_PIO]zero"), (7_000, None), (9_000, None)])
    other = ThreadTrack(1, 3, "other", [(6_000, "[NN_LR_PE]mid"), (8_000, None)])
    events = [e for e in load(tmp_path, TraceData({1: "app"}, [track, other]))["traceEvents"]
              if e["ph"] != "M"]
    assert [(e["ph"], e.get("name"), e["ts"] * 1000, e["tid"]) for e in events] == [
        ("B", "[NN_LC_PE]run", 5_000, 2), ("B", "[NN_LC_PTR]op", 5_000, 2),
        ("B", "[SW][NN_LC_PCO]op", 5_000, 2), ("B", "[NN_LR_PE]mid", 6_000, 3),
        ("E", None, 7_000, 2), ("E", None, 7_000, 2),
        ("B", "[NN_LC_PTR]next", 7_000, 2), ("E", None, 7_000, 2),
        ("B", "[NN_LC_PIO]zero", 7_000, 2), ("E", None, 7_000, 2),
        ("E", None, 8_000, 3), ("E", None, 9_000, 2)]


def test_categories_and_args(tmp_path):
    spans = {e["name"]: e for e in load(tmp_path, sample_trace())["traceEvents"] if e["ph"] == "B"}
    assert spans[NAMES[0]]["cat"] == "LA"
    assert spans[NAMES[0]]["args"] == {"layer": "LA", "phase": "PO", "detail": "mobilenet"}
    assert spans[NAMES[1]]["args"] == {"layer": "LC", "phase": "PCO", "detail": 'conv "3x3" é',
                                       "marker": "[SW]"}
    assert (spans[NAMES[2]]["cat"], "args" in spans[NAMES[2]]) == ("hidl", False)
    assert spans[NAMES[3]]["cat"] == "other"


def test_empty_trace_is_valid_json(tmp_path):
    assert load(tmp_path, TraceData())["traceEvents"] == []


def test_microseconds_keep_nanoseconds():
    assert [microseconds(ns) for ns in (0, 999, 1_000, 1_234_567)] == ["0.000", "0.999", "1.000",
                                                                       "1234.567"]


def test_io_error_returns_failure_and_leaves_no_file(tmp_path, caplog):
    target = tmp_path / "is-a-directory.json"
    target.mkdir()
    assert ChromeJsonExporter(target).export(sample_trace()) is ExportResult.FAILURE
    assert "chrome-json export" in caplog.text
    assert [p.name for p in tmp_path.iterdir()] == ["is-a-directory.json"]
