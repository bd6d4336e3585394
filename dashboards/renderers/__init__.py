"""Renderers by name: ``html`` (the dashboard page) and ``json`` (the report data).

:func:`get_renderer` returns a renderer class by name and lists the valid names for an
unknown one; :func:`renderer_for_path` guesses from an output file's extension.

Example:
    >>> get_renderer("json").output_file_extension
    'json'
    >>> renderer_for_path("out/report.html").__name__
    'HTMLRenderer'
"""
from __future__ import annotations

import os

from nnscope.dashboards.renderers.base import Renderer
from nnscope.dashboards.renderers.html import HTMLRenderer
from nnscope.dashboards.renderers.jsonrenderer import JSONRenderer

__all__ = ["Renderer", "HTMLRenderer", "JSONRenderer", "RENDERERS", "get_renderer",
           "renderer_for_path"]

RENDERERS = {"html": HTMLRenderer, "json": JSONRenderer}


def get_renderer(name: str) -> type:
    """The renderer class registered as ``name``; unknown names raise ``ValueError``."""
    try:
        return RENDERERS[name]
    except KeyError:
        raise ValueError(f"unknown renderer {name!r}; valid: {', '.join(RENDERERS)}") from None


def renderer_for_path(path, default: str = "html") -> type:
    """The renderer whose extension matches ``path`` (``default`` when none does)."""
    extension = os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    for renderer in RENDERERS.values():
        if renderer.output_file_extension == extension:
            return renderer
    return get_renderer(default)
