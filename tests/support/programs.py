"""External programs some tests need: Graphviz's ``dot`` and Chromium.

Every such test goes through :func:`require_program` (or the :data:`needs_dot` /
:data:`needs_chromium` marks), so a missing program skips with a reason naming it, and the
top-level ``tests/conftest.py`` can tell these skips apart: under ``CI=true`` (CI installs both
programs, see ``.ci/run``) such a skip becomes a failure.

Example:
    >>> dot = require_program("dot")            # doctest: +SKIP
    >>> subprocess.run([dot, "-Tsvg", "plan.dot"])  # doctest: +SKIP
"""
from __future__ import annotations

import shutil

import pytest

#: Every skip for a missing program starts with this; the CI check looks for it.
MISSING_PROGRAM = "missing program:"
#: The Debian package that provides each program.
PACKAGES = {"dot": "graphviz", "chromium": "chromium"}


def missing_reason(name: str) -> str:
    """The skip reason for an absent program, naming it and its package."""
    return (f"{MISSING_PROGRAM} {name} not found on PATH "
            f"(apt-get install {PACKAGES.get(name, name)})")


def require_program(name: str) -> str:
    """The program's path on PATH; skips the calling test when it is absent."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(missing_reason(name))
    return path


def needs_program(name: str) -> pytest.MarkDecorator:
    """A skip mark (for a test, a class or a module's ``pytestmark``) when ``name`` is absent."""
    return pytest.mark.skipif(shutil.which(name) is None, reason=missing_reason(name))


needs_dot = needs_program("dot")
needs_chromium = needs_program("chromium")
