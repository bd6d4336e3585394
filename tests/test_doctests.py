"""Every ``>>>`` example in the package's docstrings runs and shows its real output.

Modules are walked and imported under their installed ``nnscope.`` names only: pytest's
``--doctest-modules`` would import them a second time as ``runtime.ops.x``, which registers
every operation twice. One case per module that has examples; a failure shows the doctest report.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil
import sys

import pytest

PACKAGES = ("runtime", "tracing", "vlog", "timing", "parse_systrace", "dashboards")

OPTION_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _excluded(name: str) -> bool:
    """``__main__`` modules are CLIs: importing one parses ``sys.argv`` or starts a program.
    No other module is left out: a line that would run Graphviz, start every driver or need a
    file outside the repo is ``# doctest: +SKIP`` in its docstring, with the reason."""
    return name.rpartition(".")[2] == "__main__"


def _raise(name: str) -> None:
    """``walk_packages`` would skip a package that fails to import; fail instead."""
    raise ImportError(f"cannot import {name}")


def _module_names() -> list[str]:
    names = []
    for package in PACKAGES:
        root = importlib.import_module(f"nnscope.{package}")
        names.append(root.__name__)
        walk = pkgutil.walk_packages(root.__path__, f"{root.__name__}.", onerror=_raise)
        names.extend(info.name for info in walk)
    return [name for name in names if not _excluded(name)]


def _doctests(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    return [test for test in doctest.DocTestFinder().find(module, name) if test.examples]


MODULES_WITH_EXAMPLES = [name for name in _module_names() if _doctests(name)]


def test_modules_were_found():
    assert len(MODULES_WITH_EXAMPLES) > 100, MODULES_WITH_EXAMPLES


def _bare_imports(before: set[str]) -> list[str]:
    """Modules imported since ``before`` under a pre-rename name (``import runtime``): pytest's
    ``pythonpath = .`` lets that work here, but not in an installed ``nnscope``."""
    return sorted(name for name in set(sys.modules) - before if name.partition(".")[0] in PACKAGES)


@pytest.mark.parametrize("name", MODULES_WITH_EXAMPLES, ids=MODULES_WITH_EXAMPLES)
def test_docstring_examples(name):
    runner = doctest.DocTestRunner(optionflags=OPTION_FLAGS)
    report: list[str] = []
    before = set(sys.modules)
    for test in _doctests(name):
        runner.run(test, out=report.append)
    assert not runner.failures, "".join(report)
    assert not _bare_imports(before), f"examples import without the nnscope. prefix: {_bare_imports(before)}"
