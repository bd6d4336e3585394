"""Our package modules as ``ast`` sees them, for the tests that read the source tree
(``tests/test_import_graph.py``, ``tests/test_module_rules.py``).

Modules are named as installed: ``./runtime/model.py`` is ``nnscope.runtime.model`` and
``./runtime/cli/__init__.py`` is ``nnscope.runtime.cli``. Tests and benchmarks are not modules
of ours here.

Example:
    >>> import ast
    >>> node = ast.parse("from ..hal import types").body[0]
    >>> imported_base(node, containing_package("nnscope.runtime.ops.executor", False))
    'nnscope.runtime.hal'
"""
from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO

PACKAGES = ("runtime", "tracing", "parse_systrace", "vlog", "timing", "dashboards")


def modules() -> dict[str, Path]:
    """Every module of :data:`PACKAGES`, by installed name, with its file."""
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(("nnscope", *path.relative_to(REPO).with_suffix("").parts))
            found[name.removesuffix(".__init__")] = path
    return found


def containing_package(name: str, is_package: bool) -> str:
    """The package relative imports of module ``name`` start from (itself, for an ``__init__``)."""
    return name if is_package else name.rpartition(".")[0]


def imported_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module an ``ast.ImportFrom`` in ``package`` names (``from ..x import y``)."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
    return ".".join([*parts, *([node.module] if node.module else [])])
