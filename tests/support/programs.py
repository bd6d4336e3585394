"""External programs some tests need: Graphviz's ``dot`` and Chromium (and LiteRT, the
``sample-litert`` driver's engine, a Python package treated alike).

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


def litert_missing_reason() -> str:
    """The skip reason when LiteRT (``ai-edge-litert``, the ``litert`` extra) is not installed;
    it starts with :data:`MISSING_PROGRAM`, so under ``CI=true`` such a skip fails the run."""
    return f"{MISSING_PROGRAM} LiteRT (python package ai-edge-litert) is not installed " \
           "(pip install -e '.[litert]')"


def _has_litert() -> bool:
    from nnscope.runtime.drivers.registry import litert_available  # noqa: PLC0415
    return litert_available()


#: Skip mark of the tests that need LiteRT (the ``sample-litert`` driver).
needs_litert = pytest.mark.skipif(not _has_litert(), reason=litert_missing_reason())



def cpu_kernel_drivers_env() -> dict[str, str]:
    """``NNSCOPE_DRIVERS`` naming every sample driver but ``sample-litert``: for the tests of
    multi-step plans and per-operation CPU spans, which sample-litert (one step, one invoke)
    would replace with one opaque step. Pass it to a subprocess's environment."""
    from nnscope.runtime.drivers.registry import LITERT, available  # noqa: PLC0415
    return {"NNSCOPE_DRIVERS": ",".join(name for name in available() if name != LITERT)}
