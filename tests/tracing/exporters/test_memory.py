"""The in-memory exporter test double."""
from nnscope.tracing.exporters import ExportResult, get_exporter
from nnscope.tracing.exporters.memory import InMemoryExporter
from nnscope.tracing.span import ThreadTrack, TraceData


def trace(name):
    return TraceData({1: "p"}, [ThreadTrack(1, 1, "t", [(1, name), (2, None)])])


def test_keeps_traces_in_order_until_cleared():
    exporter = get_exporter("memory")()
    assert isinstance(exporter, InMemoryExporter) and exporter.last is None
    first, second = trace("a"), trace("b")
    assert exporter.export(first) is ExportResult.SUCCESS
    assert exporter.export(second) is ExportResult.SUCCESS
    assert exporter.traces == [first, second] and exporter.last is second
    exporter.clear()
    assert exporter.traces == []


def test_refuses_exports_after_shutdown(caplog):
    exporter = InMemoryExporter()
    exporter.shutdown()
    assert exporter.export(trace("a")) is ExportResult.FAILURE
    assert exporter.traces == [] and "after shutdown" in caplog.text
