"""InMemoryExporter: the test double that keeps every exported trace.

Example:
    >>> from nnscope.tracing.span import ThreadTrack, TraceData
    >>> exporter = InMemoryExporter()
    >>> exporter.export(TraceData({1: "app"}, [ThreadTrack(1, 1, "main", [(5, "x"), (9, None)])]))
    <ExportResult.SUCCESS: 0>
    >>> exporter.traces[0].span_count()
    1
"""
from __future__ import annotations

import logging
import os

from nnscope.tracing.exporters import ExportResult, TraceExporter
from nnscope.tracing.span import TraceData

_log = logging.getLogger(__name__)


class InMemoryExporter(TraceExporter):
    """Keeps the exported :class:`TraceData` objects in :attr:`traces`, in export order."""

    name = "memory"

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        """Create an empty exporter; ``path`` is accepted for registry symmetry and ignored."""
        self.traces: list[TraceData] = []
        self._stopped = False

    def export(self, trace: TraceData) -> ExportResult:
        """Keep ``trace``; FAILURE (logged) after :meth:`shutdown`."""
        if self._stopped:
            _log.warning("InMemoryExporter.export called after shutdown")
            return ExportResult.FAILURE
        self.traces.append(trace)
        return ExportResult.SUCCESS

    @property
    def last(self) -> TraceData | None:
        """The most recent trace, or None."""
        return self.traces[-1] if self.traces else None

    def clear(self) -> None:
        """Forget the kept traces."""
        self.traces.clear()

    def shutdown(self) -> None:
        """Refuse further exports."""
        self._stopped = True
