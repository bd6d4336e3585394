"""The ``.html`` systrace export as a page a person can read: the nnscope report around the trace.

A systrace HTML from a device opens as a trace viewer; ours opens as the dashboard report
(timeline, per-operation profile, latency, timing summary) of the same trace, with the
systrace ``trace-data`` block embedded first in the body, byte for byte as
:class:`tracing.exporters.systrace.SystraceHtmlExporter` writes it. Parsers read the rows
from the column-header line to the next ``</script>`` (AOSP's ``get_trace_part`` and ours),
and nothing before the block contains that header, so their summaries do not change.
When no report can be made of the trace (for instance a trace that parse_systrace rejects), the page is the
bare trace and a warning says why.

Example:
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:  # a small trace to look at
    ...     with tracing.application(tracing.Phase.OVERALL, "mobilenet"):
    ...         with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...             pass
    >>> tmp = tempfile.TemporaryDirectory()  # not the current directory
    >>> SystraceReportExporter(os.path.join(tmp.name, "trace.html")).export(session.collect())
    <ExportResult.SUCCESS: 0>
    >>> tmp.cleanup()
"""
from __future__ import annotations

import logging
import os
import shutil

from nnscope.dashboards.renderers.html import HTMLRenderer
from nnscope.dashboards.report import build_report
from nnscope.tracing.exporters import ExportResult
from nnscope.tracing.exporters.systrace import SystraceHtmlExporter

_log = logging.getLogger(__name__)
#: Where the report page's body starts (the trace block goes right after it).
BODY = '<body data-rendered="false" data-mode="self">\n'
_BARE_HEAD = b"<body>\n"
_BARE_TAIL = b"</body>\n</html>\n"


class SystraceReportExporter(SystraceHtmlExporter):
    """Writes the report page of a trace with its systrace ``trace-data`` block (``.html``)."""

    name = "systrace-html"
    extensions = (".html",)

    def export(self, trace) -> ExportResult:
        """Write ``trace``; log and return FAILURE on an I/O error."""
        bare = f"{self.path}.{os.getpid()}.trace.tmp"
        if SystraceHtmlExporter(bare).export(trace) is not ExportResult.SUCCESS:
            return ExportResult.FAILURE
        try:
            page = report_page(bare, os.path.basename(self.path), trace.processes)
        except Exception as error:  # noqa: BLE001 - the trace itself is still written
            _log.warning("%s: no report page for this trace (%s); wrote the bare systrace",
                         self.path, error)
            return _move(bare, self.path)
        try:
            return _write_page(self.path, page, bare)
        finally:
            _unlink(bare)


def report_page(trace_path: str, file_name: str, process_names=None) -> str:
    """The report page of ``trace_path`` (a systrace HTML), titled with ``file_name``; the
    recorder's ``process_names`` (pid -> name) name the lanes (systrace rows cannot)."""
    report = build_report(trace_path, process_names=process_names)
    report["meta"]["file"] = file_name
    page = HTMLRenderer().render(report)
    if page.count(BODY) != 1:
        raise ValueError("the report page has no body to hold the trace")
    return page


def _write_page(path: str, page: str, bare: str) -> ExportResult:
    """``page`` with the trace block of the bare systrace HTML ``bare`` after ``<body>``."""
    at = page.index(BODY) + len(BODY)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(bare, "rb") as source, open(temporary, "wb") as out:
            out.write(page[:at].encode("utf-8"))
            _copy_block(source, out, os.fstat(source.fileno()).st_size)
            out.write(page[at:].encode("utf-8"))
        os.replace(temporary, path)
    except (OSError, ValueError) as error:
        _log.error("systrace-html export to %s failed: %s", path, error)
        _unlink(temporary)
        return ExportResult.FAILURE
    return ExportResult.SUCCESS


def _copy_block(source, out, size: int) -> None:
    """Copy what lies between the bare page's ``<body>`` line and its closing tags."""
    head = source.read(4096)
    start = head.find(_BARE_HEAD)
    if start < 0:
        raise ValueError("the systrace page has no <body>")
    start += len(_BARE_HEAD)
    source.seek(start)
    remaining = size - start - len(_BARE_TAIL)
    while remaining > 0:
        chunk = source.read(min(remaining, 1 << 20))
        if not chunk:
            raise ValueError("the systrace page ended early")
        out.write(chunk)
        remaining -= len(chunk)
    if source.read() != _BARE_TAIL:
        raise ValueError("the systrace page does not end as written")


def _move(source: str, target: str) -> ExportResult:
    try:
        shutil.move(source, target)
    except OSError as error:
        _log.error("systrace-html export to %s failed: %s", target, error)
        _unlink(source)
        return ExportResult.FAILURE
    return ExportResult.SUCCESS


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
