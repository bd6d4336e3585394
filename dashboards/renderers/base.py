"""The renderer interface: report data in, one document out.

A renderer turns the data of :func:`dashboards.report.build_report` into text. Each
format has its own module and is registered by name in :mod:`dashboards.renderers`.

Example:
    >>> class Upper(Renderer):
    ...     output_file_extension = "txt"
    ...     def render(self, report):
    ...         return report["meta"]["file"].upper()
    >>> Upper().render({"meta": {"file": "trace.html"}})
    'TRACE.HTML'
"""
from __future__ import annotations


class Renderer:
    """Base class: :meth:`render` returns the whole document as a string."""

    #: File name extension of the output, without the dot.
    output_file_extension: str = "txt"
    #: Whether :meth:`render` returns bytes to be written as is.
    output_is_binary: bool = False

    def render(self, report: dict) -> str:
        """The document for ``report`` (the dict of :func:`~dashboards.report.build_report`)."""
        raise NotImplementedError
