"""An OTLP/HTTP receiver on 127.0.0.1 for tests: decodes ``ExportTraceServiceRequest`` bodies
with the official ``opentelemetry-proto`` messages and keeps every span with its service name.

Example:
    >>> with OtlpReceiver() as receiver:                 # doctest: +SKIP
    ...     run(["nnscope", "run", "--otlp", receiver.endpoint])
    >>> len(receiver.spans)                              # doctest: +SKIP
"""
from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

CLIENT, SERVER = ProtoSpan.SPAN_KIND_CLIENT, ProtoSpan.SPAN_KIND_SERVER


@dataclass(frozen=True)
class Received:
    """One span as it arrived: its service and the decoded protobuf span."""

    service: str
    span: ProtoSpan

    def attribute(self, key: str):
        for item in self.span.attributes:
            if item.key == key:
                value = item.value
                return value.string_value if value.HasField("string_value") else value.int_value
        return None


class OtlpReceiver:
    """``POST /v1/traces`` on an ephemeral 127.0.0.1 port; ``spans`` holds what arrived."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._keep(self.path, request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                return None

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _keep(self, path: str, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.paths.append(path)
            for resource_spans in request.resource_spans:
                service = next((a.value.string_value for a in resource_spans.resource.attributes
                                if a.key == "service.name"), "")
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(Received(service, span) for span in scope_spans.spans)

    def __enter__(self) -> "OtlpReceiver":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def check_one_trace(received) -> dict:
    """Assert the one-trace properties; return the spans by id."""
    by_id = {r.span.span_id: r for r in received}
    assert len(by_id) == len(received)
    assert len({r.span.trace_id for r in received}) == 1
    roots = [r for r in received if not r.span.parent_span_id]
    assert [r.span.name for r in roots] == [roots[0].span.name]
    assert roots[0].span.name.startswith("[NN_LA_PO]") and roots[0].service == "nnscope"
    assert [r.span.name for r in received
            if r.span.parent_span_id and r.span.parent_span_id not in by_id] == []
    return by_id


def ancestors(by_id, received):
    span = received.span
    while span.parent_span_id:
        parent = by_id[span.parent_span_id]
        yield parent
        span = parent.span


def closed_port_endpoint() -> str:
    """An endpoint on 127.0.0.1 where nothing listens (a port bound, then released)."""
    import socket  # noqa: PLC0415

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
