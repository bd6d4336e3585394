"""OtelExporter: spans, attributes, parents and times through the OTel SDK and a real OTLP/HTTP receiver."""
from __future__ import annotations

import gzip
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nnscope.tracing.exporters import ExportResult, get_exporter
from nnscope.tracing.exporters.otel import OtelExporter
from nnscope.tracing.span import ThreadTrack, TraceData
from tests.support.sample_traces import APP, DRIVER, app_main_track

OFFSET = 1_700_000_000_000_000_000  # epoch ns at monotonic 0, injected


def _trace() -> TraceData:
    main = app_main_track()
    driver = ThreadTrack(DRIVER, DRIVER + 1, "hwbinder", [
        (1_160, "[NN_LD_PE]SampleDriver::execute"),
        (1_180, "[SUB][NN_LC_PCO]conv2dFloat32"),
        (1_880, None),
        (1_890, None),
    ])
    return TraceData({APP: "com.example.app", DRIVER: "nn-sample-driver"}, [main, driver])


def _by_name(spans) -> dict:
    return {span.name: span for span in spans}


@pytest.fixture
def memory():
    return InMemorySpanExporter()


def _export_to_memory(memory, trace=None) -> dict:
    exporter = OtelExporter(span_exporter=memory, clock_offset_ns=OFFSET)
    assert exporter.export(trace or _trace()) is ExportResult.SUCCESS
    exporter.shutdown()
    return _by_name(memory.get_finished_spans())


def test_registry_finds_exporter():
    assert get_exporter("otel") is OtelExporter


def test_names_times_and_resource(memory):
    spans = _export_to_memory(memory)
    data = _trace()
    assert set(spans) == {s.name for s in data.spans()}
    for span in data.spans():
        otel_span = spans[span.name]
        assert (otel_span.start_time, otel_span.end_time) == (span.start_ns + OFFSET, span.end_ns + OFFSET)
        service = "nnscope-driver/nn-sample" if span.pid == DRIVER else "nnscope"
        assert otel_span.resource.attributes["service.name"] == service
        assert otel_span.instrumentation_scope.name == "nnscope.tracing"


def test_attributes(memory):
    spans = _export_to_memory(memory)
    assert dict(spans["[SUB][NN_LC_PCO]conv2dFloat32"].attributes) == {
        "nn.layer": "LC", "nn.phase": "PCO", "nn.detail": "conv2dFloat32", "nn.marker": "[SUB]",
        "process.pid": DRIVER, "process.title": "nn-sample-driver",
        "thread.id": DRIVER + 1, "thread.name": "hwbinder",
    }
    compute = spans["[NN_LR_PE]ANeuralNetworksExecution_compute"].attributes
    assert "nn.marker" not in compute and compute["nn.layer"] == "LR"
    hidl = spans["HIDL::IPreparedModel::execute::client"].attributes
    assert not any(key.startswith("nn.") for key in hidl)
    assert hidl["thread.name"] == "main" and hidl["process.pid"] == APP


def test_parents_follow_the_trace(memory):
    spans = _export_to_memory(memory)
    compute = spans["[NN_LR_PE]ANeuralNetworksExecution_compute"]
    ipc = spans["[NN_LI_PE]IPreparedModel::execute"]
    client = spans["HIDL::IPreparedModel::execute::client"]
    driver = spans["[NN_LD_PE]SampleDriver::execute"]
    conv = spans["[SUB][NN_LC_PCO]conv2dFloat32"]
    assert compute.parent is None and driver.parent is None
    assert ipc.parent.span_id == compute.context.span_id
    assert client.parent.span_id == ipc.context.span_id
    assert conv.parent.span_id == driver.context.span_id
    assert len({ipc.context.trace_id, client.context.trace_id, compute.context.trace_id}) == 1
    assert driver.context.trace_id != compute.context.trace_id  # separate roots


def test_current_application_span_becomes_parent(memory):
    app_memory = InMemorySpanExporter()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(app_memory))
    with app_provider.get_tracer("app").start_as_current_span("benchmark") as app_span:
        spans = _export_to_memory(memory)
    app_context = app_span.get_span_context()
    for name in ("[NN_LR_PE]ANeuralNetworksExecution_compute", "[NN_LD_PE]SampleDriver::execute"):
        assert spans[name].parent.span_id == app_context.span_id
        assert spans[name].context.trace_id == app_context.trace_id
    ipc = spans["[NN_LI_PE]IPreparedModel::execute"]
    assert ipc.parent.span_id == spans["[NN_LR_PE]ANeuralNetworksExecution_compute"].context.span_id
    assert [s.name for s in app_memory.get_finished_spans()] == ["benchmark"]


def test_application_tracer_provider_receives_spans():
    app_memory = InMemorySpanExporter()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(app_memory))
    exporter = OtelExporter(tracer_provider=app_provider, clock_offset_ns=OFFSET)
    assert exporter.export(_trace()) is ExportResult.SUCCESS
    exporter.shutdown()  # leaves the application's provider running
    assert len(app_memory.get_finished_spans()) == 5
    app_provider.get_tracer("app").start_span("after").end()
    assert len(app_memory.get_finished_spans()) == 6


def test_global_provider_used_by_default(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    app_memory = InMemorySpanExporter()
    app_provider = TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(app_memory))
    monkeypatch.setattr(otel_trace, "get_tracer_provider", lambda: app_provider)
    assert OtelExporter().export(_trace()) is ExportResult.SUCCESS
    assert len(app_memory.get_finished_spans()) == 5


class _SlowMemory(InMemorySpanExporter):
    """A collector slower than span creation: a plain BatchSpanProcessor would drop spans."""

    def export(self, spans):
        time.sleep(0.02)
        return super().export(spans)


def test_large_trace_loses_no_span():
    events = []
    for i in range(5_000):
        events += [(10 * i, f"[NN_LC_PCO]op{i}"), (10 * i + 5, None)]
    trace = TraceData({1: "p"}, [ThreadTrack(1, 1, "t", events)])
    assert len(_export_to_memory(_SlowMemory(), trace)) == 5_000


class _Failing(SpanExporter):
    def __init__(self, raises: bool) -> None:
        self.raises = raises

    def export(self, spans):
        if self.raises:
            raise ConnectionError("collector down")
        return SpanExportResult.FAILURE


@pytest.mark.parametrize("raises", [False, True])
def test_exporter_failure_is_logged_not_raised(raises, caplog):
    exporter = OtelExporter(span_exporter=_Failing(raises))
    with caplog.at_level(logging.ERROR, logger="nnscope.tracing.exporters.otel"):
        assert exporter.export(_trace()) is ExportResult.FAILURE
    assert "_Failing" in caplog.text
    exporter.shutdown()


def test_failure_does_not_stick(memory):
    flaky = _Failing(raises=False)
    exporter = OtelExporter(span_exporter=flaky)
    assert exporter.export(_trace()) is ExportResult.FAILURE
    flaky.export = memory.export
    assert exporter.export(_trace()) is ExportResult.SUCCESS
    exporter.shutdown()  # its batch thread must not outlive the test (_parallel forks only alone)
    assert len(memory.get_finished_spans()) == 5


def test_conflicting_destinations_rejected(memory):
    with pytest.raises(ValueError, match="at most one"):
        OtelExporter(tracer_provider=TracerProvider(), span_exporter=memory)


# --- a real OTLP/HTTP receiver -------------------------------------------------------------


class _Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1 that keeps every decoded request."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server naming)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.paths.append(self.path)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def spans(self) -> list:
        return [span for request in self.requests for resource_spans in request.resource_spans
                for scope_spans in resource_spans.scope_spans for span in scope_spans.spans]

    def services(self) -> set:
        return {a.value.string_value for request in self.requests
                for rs in request.resource_spans for a in rs.resource.attributes
                if a.key == "service.name"}


@pytest.fixture
def receiver():
    receiver = _Receiver()
    receiver.thread.start()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def _attributes(span) -> dict:
    return {a.key: (a.value.string_value or a.value.int_value) for a in span.attributes}


def _check_received(receiver: _Receiver) -> None:
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    assert receiver.services() == {"nnscope", "nnscope-driver/nn-sample"}
    spans = _by_name(receiver.spans())
    assert set(spans) == {s.name for s in _trace().spans()}
    compute = spans["[NN_LR_PE]ANeuralNetworksExecution_compute"]
    ipc = spans["[NN_LI_PE]IPreparedModel::execute"]
    conv = spans["[SUB][NN_LC_PCO]conv2dFloat32"]
    assert compute.parent_span_id == b""
    assert ipc.parent_span_id == compute.span_id and ipc.trace_id == compute.trace_id
    assert conv.parent_span_id == spans["[NN_LD_PE]SampleDriver::execute"].span_id
    assert (conv.start_time_unix_nano, conv.end_time_unix_nano) == (1_180 + OFFSET, 1_880 + OFFSET)
    assert _attributes(conv) == {
        "nn.layer": "LC", "nn.phase": "PCO", "nn.detail": "conv2dFloat32", "nn.marker": "[SUB]",
        "process.pid": DRIVER, "process.title": "nn-sample-driver",
        "thread.id": DRIVER + 1, "thread.name": "hwbinder",
    }


def test_otlp_endpoint_from_environment(receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    exporter = OtelExporter(clock_offset_ns=OFFSET)
    assert exporter.export(_trace()) is ExportResult.SUCCESS
    _check_received(receiver)  # force_flush already delivered everything
    exporter.shutdown()


def test_otlp_endpoint_argument(receiver, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    exporter = OtelExporter(endpoint=receiver.url + "/", clock_offset_ns=OFFSET)
    assert exporter.export(_trace()) is ExportResult.SUCCESS
    _check_received(receiver)
    exporter.shutdown()


def test_otlp_rejection_is_failure(monkeypatch, caplog):
    rejecting = _Receiver(status=400)
    rejecting.thread.start()
    try:
        exporter = OtelExporter(endpoint=rejecting.url)
        with caplog.at_level(logging.ERROR, logger="nnscope.tracing.exporters.otel"):
            assert exporter.export(_trace()) is ExportResult.FAILURE
        assert len(rejecting.spans()) == 5  # it was delivered, then refused
        assert "OTLPSpanExporter" in caplog.text
        exporter.shutdown()
    finally:
        rejecting.server.shutdown()
        rejecting.server.server_close()
