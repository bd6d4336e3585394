"""Two rules on how our modules are cut (STYLE 1 and 14), read with ``ast`` over the packages
of :data:`tests.support.modules.PACKAGES` (not ``tests/``, not ``benchmarks/``):

* **No module imports another module's private name.** ``from X import _name`` and
  ``X._name`` (``X`` bound by an import: ``import nnscope.x.y as X``, ``from nnscope.x import
  y``, ``import nnscope.x.y`` then ``nnscope.x.y._name``) are offences where ``X`` is one of our
  modules and ``_name`` starts with one underscore and is not itself a module of ours.
  Importing a private *module* is fine (``from nnscope.runtime import _steps``), and so are
  dunder names (``__version__``). A module that needs another's private name is one module
  with it, or the name is public. No module is exempt.
* **A module over** :data:`LIMIT` **lines says why it is one.** Its module docstring contains
  the marker :data:`MARKER` ("One module because ..."), followed by the reason.

Each rule fails listing every offender; a self-test feeds each checker a synthetic offender,
so neither passes because it checks nothing.
"""
from __future__ import annotations

import ast
from typing import Collection

from tests.support.modules import containing_package, imported_base, modules
from tests.support.paths import REPO

LIMIT = 800
"""Lines (``str.splitlines``) a module may have without saying why it is one."""
MARKER = "one module because"
"""What a longer module's docstring says (any case, across line breaks), then its reason."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _dotted(node: ast.Attribute) -> tuple[str, list[str]] | None:
    """``a.b.c`` -> ``("a", ["b", "c"])``; None unless the chain starts at a plain name."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node.id, attributes[::-1]) if isinstance(node, ast.Name) else None


def private_imports(source: str, name: str, is_package: bool, ours: Collection[str]) -> list[str]:
    """Each private name module ``name`` takes from another of ``ours``, as ``"X._name"``."""
    tree = ast.parse(source)
    package = containing_package(name, is_package)
    bound: dict[str, str] = {}  # local name -> our module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = imported_base(node, package)
            for alias in node.names:
                if f"{base}.{alias.name}" in ours:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif base in ours and base != name and _private(alias.name):
                    found.append(f"{base}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in ours:
                    bound[alias.asname] = alias.name
                elif not alias.asname:
                    root = alias.name.partition(".")[0]
                    bound[root] = root
    for node in ast.walk(tree):
        chain = _dotted(node) if isinstance(node, ast.Attribute) else None
        if chain is None or chain[0] not in bound:
            continue
        module = bound[chain[0]]
        for attribute in chain[1]:
            if f"{module}.{attribute}" not in ours:
                if module in ours and module != name and _private(attribute):
                    found.append(f"{module}.{attribute}")
                break
            module = f"{module}.{attribute}"
    return sorted(set(found))


def needs_reason(source: str) -> bool:
    """True for a module over :data:`LIMIT` lines whose docstring lacks :data:`MARKER`."""
    if len(source.splitlines()) <= LIMIT:
        return False
    doc = ast.get_docstring(ast.parse(source)) or ""
    return MARKER not in " ".join(doc.split()).lower()


def _grouped(names: list[str]) -> str:
    """``["m._a", "m._b"]`` -> ``"m: _a, _b"``."""
    by_module: dict[str, list[str]] = {}
    for dotted in names:
        module, _, name = dotted.rpartition(".")
        by_module.setdefault(module, []).append(name)
    return "; ".join(f"{module}: {', '.join(found)}" for module, found in by_module.items())


def test_no_module_imports_another_modules_private_name():
    ours = modules()
    offences = {}
    for name, path in sorted(ours.items()):
        found = private_imports(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", ours)
        if found:
            offences[path.relative_to(REPO).as_posix()] = found
    assert len(ours) > 100
    assert not offences, "private names imported from another module (make them public, or " \
        "merge the modules):\n" + "\n".join(f"  {path}: {_grouped(names)}" for path, names in offences.items())


def test_every_long_module_says_why_it_is_one():
    ours = modules()
    long = sorted(path.relative_to(REPO).as_posix() for path in ours.values() if needs_reason(path.read_text(encoding="utf-8")))
    assert not long, f"over {LIMIT} lines without '{MARKER} ...' in the module docstring:\n  " + \
        "\n  ".join(long)


_OURS = {"nnscope.runtime", "nnscope.runtime.model", "nnscope.runtime._steps", "nnscope.runtime.cli",
         "nnscope.runtime.cli.run", "nnscope.tracing", "nnscope.tracing._buffer"}


def test_the_private_name_checker_finds_each_form():
    source = ("from nnscope.runtime.model import Model, _helper, __version__\n"
              "from ..model import _relative\n"
              "import nnscope.tracing._buffer as buffer\n"
              "import nnscope.runtime.model\n"
              "from nnscope.tracing import _buffer\n"
              "def f():\n"
              "    buffer._clear(); nnscope.runtime.model._dotted(); _buffer._snapshot()\n")
    assert private_imports(source, "nnscope.runtime.cli.run", False, _OURS) == [
        "nnscope.runtime.model._dotted", "nnscope.runtime.model._helper",
        "nnscope.runtime.model._relative", "nnscope.tracing._buffer._clear",
        "nnscope.tracing._buffer._snapshot"]


def test_private_modules_and_public_names_are_fine():
    source = ("from nnscope.runtime import _steps\n"
              "from nnscope.tracing import _buffer\n"
              "from nnscope.runtime.model import Model, __version__\n"
              "import numpy\n"
              "from numpy import _globals\n"
              "_buffer.snapshot(); _steps.run(); numpy._NoValue; self._private\n")
    assert private_imports(source, "nnscope.runtime.cli.run", False, _OURS) == []
    assert private_imports("from nnscope.runtime.model import _own\n", "nnscope.runtime.model",
                           False, _OURS) == []


def test_the_length_checker_wants_the_marker_over_the_limit():
    body = "x = 1\n" * LIMIT
    assert not needs_reason('"""Short."""\n' + "x = 1\n" * (LIMIT - 1))
    assert needs_reason('"""Long."""\n' + body)
    assert not needs_reason('"""Long.\n\nOne module\nbecause it is the codec."""\n' + body)
