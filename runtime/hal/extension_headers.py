"""The extension "headers" this process knows: the names an extension gives its operand and
operation types (what an application compiles against, e.g. ``FibonacciExtension.h``), used to
print ``com.example.fibonacci:FIBONACCI`` instead of a number in logs and graph dumps.

Example:
    >>> header = register_header(ExtensionHeader("com.example.demo", {0: "DEMO_INT"}, {}))
    >>> KNOWN_EXTENSIONS["com.example.demo"].operand_types[0]
    'DEMO_INT'
    >>> del KNOWN_EXTENSIONS["com.example.demo"]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class ExtensionHeader:
    """The names an extension's header gives its types (what an application compiles against)."""

    name: str
    operand_types: Mapping[int, str]
    operation_types: Mapping[int, str]


#: Extension headers known by name (for logs and graph dumps); extended by :func:`register_header`.
KNOWN_EXTENSIONS: dict[str, ExtensionHeader] = {}


def register_header(header: ExtensionHeader) -> ExtensionHeader:
    KNOWN_EXTENSIONS[header.name] = header
    return header
