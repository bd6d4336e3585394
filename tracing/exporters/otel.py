"""OpenTelemetry exporter: turns every span of a :class:`TraceData` into an OTel SDK span.

Each span keeps its real start and end time (CLOCK_MONOTONIC nanoseconds moved to
the epoch by one offset, ``time.time_ns() - time.monotonic_ns()``, measured once per
exporter), its parent and these attributes. The parent is the enclosing span of its thread
or, for a thread's top-level span, the span it runs for in another thread or process (the
context it adopted, ``tracing.exporters._links``): a driver's ``HIDL::...::server`` span is a
child of the runtime's ``HIDL::...::client`` span that sent the request, so one run is one trace.
HIDL marks get kind CLIENT / SERVER; a span whose call failed gets status ERROR with
``error.type`` (the result code's name) and ``nn.result_code``.

===================  ==========================================
``nn.layer``         layer code (``LR``), NNTRACE names only
``nn.phase``         phase code (``PE``), NNTRACE names only
``nn.detail``        detail text, NNTRACE names only
``nn.marker``        ``[SW]`` / ``[SUB]`` when present
``process.pid``      semantic convention
``process.title``    the process name from ``TraceData.processes``
``thread.id``        semantic convention
``thread.name``      semantic convention
``error.type``       result code name, failed calls only
``nn.result_code``   result code, failed calls only
===================  ==========================================

If the application has a valid current OTel span at export time, top-level spans
become its children. Where spans go (``tracer_provider``, ``span_exporter`` and
``endpoint`` exclude each other; the environment variable counts only without them):

1. ``span_exporter=``: our own providers, one per service (resource ``service.name=nnscope``
   for the application, ``nnscope-driver/<name>`` for each driver process), each with a
   ``BatchSpanProcessor`` around it;
2. ``tracer_provider=``: the application's provider (its resource names every span's
   service; ``process.title`` still tells the processes apart);
3. ``endpoint=`` or ``$OTEL_EXPORTER_OTLP_ENDPOINT``: our own providers (as 1.) sending to an
   OTLP/HTTP ``OTLPSpanExporter``;
4. the global tracer provider.

Our batch processor is flushed every 1024 spans, so a large trace never overflows
its queue. Every export ends with ``force_flush``; exporter failures are logged and reported
as ``ExportResult.FAILURE``, never raised. :func:`send` first opens a TCP connection to the
collector (:func:`unreachable`, at most ``PROBE_TIMEOUT_S``): with nothing listening it gives
up at once instead of after the OTLP exporter's retries (about 7 s per batch).

Example:
    >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    >>> memory = InMemorySpanExporter()
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:
    ...     with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...         pass
    >>> OtelExporter(span_exporter=memory).export(session.collect())
    <ExportResult.SUCCESS: 0>
    >>> [s.name for s in memory.get_finished_spans()]
    ['[NN_LR_PE]ANeuralNetworksExecution_compute']
"""
from __future__ import annotations

import logging
import os
import socket
import time
import urllib.request
from typing import Sequence
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.environment_variables import OTEL_EXPORTER_OTLP_ENDPOINT
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from opentelemetry.trace import Status, StatusCode

from nnscope.tracing.exporters import ExportResult, TraceExporter, _links
from nnscope.tracing.naming import parse_name
from nnscope.tracing.span import Span, TraceData

_log = logging.getLogger(__name__)

SERVICE = "nnscope"
#: A driver process is named ``<driver>-driver`` (``runtime.drivers.__main__``).
DRIVER_SUFFIX = "-driver"
#: Instrumentation scope of the spans we create.
SCOPE = "nnscope.tracing"
#: Our BatchSpanProcessor queue; we flush before it can fill, so no span is dropped.
_QUEUE_SIZE = 2048
_FLUSH_EVERY = _QUEUE_SIZE // 2
_FLUSH_TIMEOUT_MS = 30_000
#: How long :func:`unreachable` waits for the collector to accept a TCP connection.
PROBE_TIMEOUT_S = 2.0
#: Loggers that :func:`send` holds back (ours included: the caller reports in one line).
_SDK_LOGGERS = ("opentelemetry", __name__)


class OtelExporter(TraceExporter):
    """Replays a recorded trace as OpenTelemetry spans."""

    name = "otel"

    def __init__(self, tracer_provider: otel_trace.TracerProvider | None = None,
                 span_exporter: SpanExporter | None = None, *,
                 endpoint: str | None = None, clock_offset_ns: int | None = None) -> None:
        """Choose where spans go (see the module docstring for the order).

        Args:
            tracer_provider: an application ``TracerProvider`` to create the spans with.
            span_exporter: an OTel ``SpanExporter`` fed by our own provider.
            endpoint: OTLP/HTTP base URL (``http://host:4318``); defaults to
                ``$OTEL_EXPORTER_OTLP_ENDPOINT``, read here, once.
            clock_offset_ns: epoch minus CLOCK_MONOTONIC in ns; measured now when None.

        Raises:
            ValueError: when more than one of the three destinations is given.
        """
        if sum(x is not None for x in (tracer_provider, span_exporter, endpoint)) > 1:
            raise ValueError("give at most one of tracer_provider, span_exporter, endpoint")
        if clock_offset_ns is None:
            clock_offset_ns = time.time_ns() - time.monotonic_ns()
        self.clock_offset_ns = clock_offset_ns
        self._app_provider = tracer_provider
        self._watch: _ResultWatch | None = None
        if span_exporter is None and tracer_provider is None:
            if endpoint or os.environ.get(OTEL_EXPORTER_OTLP_ENDPOINT):
                span_exporter = _otlp_exporter(endpoint)
        self._services: dict[str, TracerProvider] = {}
        self._synchronous = False
        if span_exporter is not None:
            self._watch = _ResultWatch(span_exporter)

    def export(self, trace: TraceData) -> ExportResult:
        """Create, end and flush one OTel span per span of ``trace``; never raises."""
        try:
            if self._watch is not None:
                self._watch.reset()
            count = self._replay(trace)
            if not self.flush():
                _log.error("otel export: flush of %d spans failed or timed out", count)
                return ExportResult.FAILURE
        except Exception:  # exporters never raise into the runtime
            _log.exception("otel export failed")
            return ExportResult.FAILURE
        if self._watch is not None and self._watch.failed:
            _log.error("otel export: span exporter %s reported failure",
                       type(self._watch.inner).__name__)
            return ExportResult.FAILURE
        return ExportResult.SUCCESS

    def flush(self) -> bool:
        """Force-flush the providers in use; False on timeout or error."""
        ok = True
        for provider in list(self._services.values()) or [self._provider()]:
            force_flush = getattr(provider, "force_flush", None)
            if force_flush is None:
                continue
            try:
                ok = force_flush(_FLUSH_TIMEOUT_MS) is not False and ok
            except Exception:
                _log.exception("otel flush failed")
                ok = False
        return ok

    def shutdown(self) -> None:
        """Shut down our own providers and their exporter; the application's is left alone."""
        for provider in self._services.values():
            try:
                provider.shutdown()
            except Exception:
                _log.exception("otel shutdown failed")

    def _provider(self) -> otel_trace.TracerProvider:
        if self._watch is not None:
            return self._services.get(SERVICE) or self._services.setdefault(
                SERVICE, _own_provider(self._watch, SERVICE, self._synchronous))
        return self._app_provider or otel_trace.get_tracer_provider()

    def _replay(self, trace: TraceData) -> int:
        root = _root_context()
        thread_names = {(t.pid, t.tid): t.name for t in trace.threads}
        spans = list(trace.spans())  # each thread's spans in end order: children first
        parent_of = _links.parents(spans)
        started: dict[int, otel_trace.Span] = {}
        for span in _links.parents_first(spans, parent_of):
            parent = started.get(parent_of.get(span.index, -1))
            process = trace.processes.get(span.pid, "")
            started[span.index] = self._tracer(service_name(process)).start_span(
                span.name,
                context=root if parent is None else otel_trace.set_span_in_context(parent),
                kind=span_kind(span.name),
                start_time=span.start_ns + self.clock_offset_ns,
                attributes=span_attributes(span, process,
                                           thread_names.get((span.pid, span.tid), "")))
            if span.error is not None:
                started[span.index].set_status(Status(StatusCode.ERROR, span.error[1]))
        for ended, span in enumerate(spans, 1):
            started.pop(span.index).end(end_time=span.end_ns + self.clock_offset_ns)
            if ended % _FLUSH_EVERY == 0:
                self.flush()
        return len(spans)

    def _tracer(self, service: str) -> otel_trace.Tracer:
        """Our provider of ``service`` (its resource names it), else the one in use."""
        if self._watch is None:
            return self._provider().get_tracer(SCOPE)
        provider = self._services.get(service)
        if provider is None:
            provider = self._services[service] = _own_provider(self._watch, service,
                                                               self._synchronous)
        return provider.get_tracer(SCOPE)


def unreachable(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why nothing can take a trace at the OTLP/HTTP ``endpoint`` (``"connection refused"``,
    ``"no answer in 2 s"``, ...), or None when a TCP connection to it opens within ``timeout_s``.

    The connection goes where the HTTP request would: to the endpoint's host and port (80 or
    443 by scheme), or to the proxy of ``$http_proxy``/``$https_proxy`` unless ``$no_proxy``
    names the host.

    Example:
        >>> import socket
        >>> with socket.socket() as s:
        ...     s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]  # bound, not listening
        >>> unreachable(f"http://127.0.0.1:{port}")
        'connection refused'
    """
    url = urlsplit(endpoint)
    proxy = urllib.request.getproxies().get(url.scheme)
    if proxy and not urllib.request.proxy_bypass(url.hostname or ""):
        url = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return f"bad port in {endpoint}"
    try:
        socket.create_connection((url.hostname or "localhost", port), timeout_s).close()
    except ConnectionRefusedError:
        return "connection refused"
    except socket.gaierror as error:
        return f"unknown host {url.hostname} ({error.strerror})"
    except (socket.timeout, TimeoutError):
        return f"no answer in {timeout_s:g} s"
    except OSError as error:
        return error.strerror or str(error)
    return None


def send(trace: TraceData, endpoint: str, timeout_s: float = 10.0) -> ExportResult:
    """Send ``trace`` to the OTLP/HTTP collector at ``endpoint`` and shut the exporter down;
    FAILURE at once when nothing listens there (:func:`unreachable`).

    The OpenTelemetry SDK's own log lines (retries, connection errors) are held back: the
    caller reports the result in one line.
    """
    if unreachable(endpoint) is not None:
        return ExportResult.FAILURE
    quiet = [logging.getLogger(name) for name in _SDK_LOGGERS]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.CRITICAL)
    try:
        exporter = OtelExporter(span_exporter=_otlp_exporter(endpoint, timeout_s))
        exporter._synchronous = True  # no threads: it also runs at exit (NNSCOPE_TRACE=otlp)
        try:
            return exporter.export(trace)
        finally:
            exporter.shutdown()
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)


def service_name(process_name: str) -> str:
    """``service.name`` of a process: ``nnscope-driver/<name>`` for a driver process (named
    ``<name>-driver``), else ``nnscope``."""
    if process_name.endswith(DRIVER_SUFFIX) and len(process_name) > len(DRIVER_SUFFIX):
        return f"{SERVICE}-driver/{process_name[:-len(DRIVER_SUFFIX)]}"
    return SERVICE


def span_kind(name: str) -> otel_trace.SpanKind:
    """CLIENT for the caller's side of a HAL call (``HIDL::...::client``), SERVER for the
    callee's, INTERNAL otherwise."""
    if name.startswith("HIDL::"):
        if name.endswith("::client"):
            return otel_trace.SpanKind.CLIENT
        if name.endswith("::server"):
            return otel_trace.SpanKind.SERVER
    return otel_trace.SpanKind.INTERNAL


def span_attributes(span: Span, process_name: str = "",
                    thread_name: str = "") -> dict[str, str | int]:
    """Return the OTel attributes of ``span``.

    Args:
        span: the recorded span.
        process_name: its process's name, stored as ``process.title`` when not empty.
        thread_name: its thread's name, stored as ``thread.name`` when not empty.
    """
    attributes: dict[str, str | int] = {"process.pid": span.pid, "thread.id": span.tid}
    if process_name:
        attributes["process.title"] = process_name
    if thread_name:
        attributes["thread.name"] = thread_name
    if span.error is not None:
        attributes["error.type"] = span.error[1]
        attributes["nn.result_code"] = span.error[0]
    parsed = parse_name(span.name)
    if parsed is not None:
        attributes["nn.layer"] = parsed.layer.value
        attributes["nn.phase"] = parsed.phase.value
        attributes["nn.detail"] = parsed.detail
        if parsed.marker:
            attributes["nn.marker"] = parsed.marker
    return attributes


def _root_context() -> otel_context.Context | None:
    """The application's current context when it has a valid span, else a fresh root."""
    current = otel_trace.get_current_span()
    if current.get_span_context().is_valid:
        return otel_context.get_current()
    return otel_context.Context()


class _ResultWatch(SpanExporter):
    """Passes spans to ``inner`` and remembers whether any export failed or raised."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.failed = self.closed = False

    def reset(self) -> None:
        self.failed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:
            _log.exception("span exporter %s raised", type(self.inner).__name__)
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.failed = True
        return result

    def shutdown(self) -> None:
        if not self.closed:  # one inner exporter behind several providers
            self.closed = True
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _own_provider(exporter: SpanExporter, service: str = SERVICE,
                  synchronous: bool = False) -> TracerProvider:
    if synchronous:  # no resource detectors, no processor thread
        provider = TracerProvider(resource=Resource({SERVICE_NAME: service}))
        provider.add_span_processor(_BatchOnFlush(exporter))
        return provider
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    provider.add_span_processor(BatchSpanProcessor(
        exporter, max_queue_size=_QUEUE_SIZE, max_export_batch_size=512))
    return provider


class _BatchOnFlush(SpanProcessor):
    """Keeps ended spans and exports them, 512 at a time, on the caller's thread at flush."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter, self._spans = exporter, []

    def on_end(self, span: ReadableSpan) -> None:
        self._spans.append(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        spans, self._spans = self._spans, []
        ok = True
        for first in range(0, len(spans), 512):
            ok = self._exporter.export(spans[first:first + 512]) is SpanExportResult.SUCCESS and ok
        return ok

    def shutdown(self) -> None:
        self.force_flush()
        self._exporter.shutdown()


def _otlp_exporter(endpoint: str | None, timeout_s: float | None = None) -> SpanExporter:
    """An OTLP/HTTP exporter posting to ``<endpoint>/v1/traces``.

    With no ``endpoint`` the exporter reads the ``OTEL_EXPORTER_OTLP_*`` variables
    itself (so ``..._TRACES_ENDPOINT`` and headers keep their standard meaning).
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if endpoint is None:
        return OTLPSpanExporter()
    return OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces", timeout=timeout_s)
