"""JSON renderer: the report data (header and parse_systrace summary) as JSON text.

Example:
    >>> JSONRenderer().render({"version": 1, "meta": {}, "summary": [], "variants": {}})
    '{"meta": {}, "summary": [], "version": 1}\\n'
"""
from __future__ import annotations

import json

from nnscope.dashboards.renderers.base import Renderer


class JSONRenderer(Renderer):
    """Writes ``version``, ``meta`` and ``summary`` (the other variants are derived)."""

    output_file_extension = "json"

    def render(self, report: dict) -> str:
        data = {key: report[key] for key in ("version", "meta", "summary")}
        return json.dumps(data, sort_keys=True) + "\n"
