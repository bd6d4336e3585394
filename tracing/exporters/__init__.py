"""Trace exporters: one interface (export/flush/shutdown -> ExportResult) and a name registry.

Exporters log failures and return ``ExportResult.FAILURE``; they never raise into the runtime.
Built-in exporters are also published as entry points in group ``nnscope.trace_exporters``.

Example:
    >>> exporter = get_exporter("chrome-json")(path="trace.json")   # doctest: +SKIP
    >>> exporter.export(session.collect())                          # doctest: +SKIP
"""
from __future__ import annotations

import enum
import importlib
from abc import ABC, abstractmethod

from tracing.span import TraceData


class ExportResult(enum.Enum):
    SUCCESS = 0
    FAILURE = 1


class TraceExporter(ABC):
    """Writes a :class:`TraceData` somewhere. Subclasses set ``name`` and ``extensions``."""

    name: str = ""
    extensions: tuple[str, ...] = ()
    binary: bool = False

    @abstractmethod
    def export(self, trace: TraceData) -> ExportResult:
        """Write ``trace``; log and return FAILURE on error."""

    def flush(self) -> bool:
        return True

    def shutdown(self) -> None:
        return None


# name -> "module:Class"; modules are imported lazily (otel and perfetto are heavy; the
# .html page is the dashboards' report around the systrace block).
_REGISTRY = {
    "systrace": "tracing.exporters.systrace:SystraceTextExporter",
    "systrace-html": "dashboards.systrace_page:SystraceReportExporter",  # the report page
    "systrace-html-bare": "tracing.exporters.systrace:SystraceHtmlExporter",
    "chrome-json": "tracing.exporters.chrome_json:ChromeJsonExporter",
    "perfetto": "tracing.exporters.perfetto:PerfettoExporter",
    "otel": "tracing.exporters.otel:OtelExporter",
    "memory": "tracing.exporters.memory:InMemoryExporter",
}
# output file extension -> exporter name
_BY_EXTENSION = {
    ".txt": "systrace", ".ftrace": "systrace", ".html": "systrace-html",
    ".json": "chrome-json", ".perfetto-trace": "perfetto", ".pftrace": "perfetto", ".pb": "perfetto",
}


def exporter_names() -> list[str]:
    return sorted(_REGISTRY)


def get_exporter(name: str) -> type[TraceExporter]:
    """Return the exporter class registered as ``name``.

    Raises:
        ValueError: for an unknown name, listing the valid ones.
    """
    try:
        module_name, class_name = _REGISTRY[name].split(":")
    except KeyError:
        raise ValueError(f"unknown trace exporter {name!r}; valid: {', '.join(exporter_names())}") from None
    return getattr(importlib.import_module(module_name), class_name)


def exporter_for_path(path: str) -> type[TraceExporter]:
    """Guess the exporter from an output file name's extension."""
    lowered = str(path).lower()
    for extension, name in sorted(_BY_EXTENSION.items(), key=lambda kv: -len(kv[0])):
        if lowered.endswith(extension):
            return get_exporter(name)
    raise ValueError(f"cannot tell the trace format of {path!r}; use one of: "
                     f"{', '.join(sorted(_BY_EXTENSION))}")
