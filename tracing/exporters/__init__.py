"""Trace exporters: one interface (export/flush/shutdown -> ExportResult) and a name registry.

Exporters log failures and return ``ExportResult.FAILURE``; they never raise into the runtime.
Every exporter is an entry point of group ``nnscope.trace_exporters`` (the one registry:
``pyproject.toml`` lists them, the dashboards' report page among them).

Example:
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:
    ...     with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...         pass
    >>> with tempfile.TemporaryDirectory() as tmp:  # path="trace.json" would write into cwd
    ...     exporter = get_exporter("chrome-json")(path=os.path.join(tmp, "trace.json"))
    ...     exporter.export(session.collect())
    <ExportResult.SUCCESS: 0>
"""
from __future__ import annotations

import enum
import functools
import importlib.metadata
from abc import ABC, abstractmethod

from nnscope.tracing.span import TraceData


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


#: The entry-point group every exporter is registered in (``pyproject.toml``): the one registry,
#: so that another package (the dashboards' report page) adds one without tracing importing it.
#: Modules load on first use (otel and perfetto are heavy).
ENTRY_POINT_GROUP = "nnscope.trace_exporters"


@functools.lru_cache(maxsize=1)
def _registry() -> dict:
    return {entry.name: entry for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


# output file extension -> exporter name
_BY_EXTENSION = {
    ".txt": "systrace", ".ftrace": "systrace", ".html": "systrace-html",
    ".json": "chrome-json", ".perfetto-trace": "perfetto", ".pftrace": "perfetto", ".pb": "perfetto",
}


#: OpenTelemetry's default OTLP/HTTP endpoint.
OTLP_DEFAULT_ENDPOINT = "http://localhost:4318"


def otlp_endpoint(spec: str | None, environ=None) -> str | None:
    """The OTLP/HTTP base URL that ``spec`` asks for, or None when it asks for no OTLP.

    ``spec`` is ``--otlp``'s value or ``NNSCOPE_TRACE``: ``otlp`` or an empty value means
    ``$OTEL_EXPORTER_OTLP_ENDPOINT``, else OpenTelemetry's default ``http://localhost:4318``;
    ``otlp://HOST:PORT`` means ``http://HOST:PORT``; an ``http(s)://`` URL is taken as is.

    Raises:
        ValueError: for ``otlp://`` without a host, or a URL of another scheme.
    """
    import os  # noqa: PLC0415 - only on this path

    if spec is None or (spec and not spec.startswith(("otlp", "http://", "https://"))):
        return None
    environ = os.environ if environ is None else environ
    if spec in ("", "otlp"):
        return environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or OTLP_DEFAULT_ENDPOINT
    if spec.startswith("otlp://"):
        spec = "http://" + spec[len("otlp://"):]
    elif not spec.startswith(("http://", "https://")):
        raise ValueError(f"{spec!r} is no OTLP endpoint (otlp, otlp://HOST:PORT or http://...)")
    if not spec.split("://", 1)[1].strip("/"):
        raise ValueError(f"OTLP endpoint {spec!r} has no host")
    return spec.rstrip("/")


def exporter_names() -> list[str]:
    return sorted(_registry())


def get_exporter(name: str) -> type[TraceExporter]:
    """Return the exporter class registered as ``name``.

    Raises:
        ValueError: for an unknown name, listing the valid ones.
    """
    entry = _registry().get(name)
    if entry is None:
        valid = ", ".join(exporter_names()) or f"none (nnscope is not installed: no {ENTRY_POINT_GROUP} entry points)"
        raise ValueError(f"unknown trace exporter {name!r}; valid: {valid}")
    try:
        return entry.load()
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] in ("nnscope", "tracing", "dashboards"):
            raise
        raise ValueError(missing_extra(f"the {name} exporter", error.name, EXTRAS.get(name, name))) from None


#: exporter name -> the extra of ``pyproject.toml`` that installs what it imports
EXTRAS = {"otel": "otlp", "perfetto": "perfetto"}


def missing_extra(what: str, module: str, extra: str) -> str:
    """One line saying that ``what`` needs ``module`` and the install command that brings it."""
    return f"{what} needs the {module.split('.')[0]} package: pip install 'nnscope[{extra}]'"


def exporter_for_path(path: str) -> type[TraceExporter]:
    """Guess the exporter from an output file name's extension."""
    lowered = str(path).lower()
    for extension, name in sorted(_BY_EXTENSION.items(), key=lambda kv: -len(kv[0])):
        if lowered.endswith(extension):
            return get_exporter(name)
    raise ValueError(f"cannot tell the trace format of {path!r}; use one of: "
                     f"{', '.join(sorted(_BY_EXTENSION))}")
