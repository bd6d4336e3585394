"""Suite-wide rule: under ``CI=true`` no test may skip for a missing program.

CI installs Graphviz and Chromium (``.ci/run``), so there a skip whose reason starts with
:data:`tests.support.programs.MISSING_PROGRAM` means the CI setup is broken: the test's report
becomes a failure, and the session fails even if such a skip happened outside a test (e.g. at
module collection).
"""
from __future__ import annotations

import os

import pytest

from tests.support.programs import MISSING_PROGRAM

#: Environment variable set by CI systems (GitHub Actions, GitLab, ``.ci/run``).
CI = "CI"


def in_ci() -> bool:
    """True when ``$CI`` is set to a true value (``true``, ``1``, ``yes``)."""
    return os.environ.get(CI, "").strip().lower() in ("true", "1", "yes")


def skip_reason(report) -> str:
    """The reason of a skipped report, or ``""``."""
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


def missing_program_skip(report) -> str:
    """The reason when ``report`` is a skip for a missing program, else ``""``."""
    reason = skip_reason(report)
    return reason if MISSING_PROGRAM in reason else ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    reason = missing_program_skip(report)
    if reason and in_ci():
        report.outcome = "failed"
        report.longrepr = f"CI={os.environ[CI]} but the test skipped: {reason}"


def pytest_sessionfinish(session, exitstatus):
    if not in_ci():
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    reasons = sorted({reason for report in skipped if (reason := missing_program_skip(report))})
    if not reasons:
        return
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    reporter.write_line(f"CI: {len(reasons)} missing-program skip(s): {'; '.join(reasons)}", red=True)


def pytest_addoption(parser):
    group = parser.getgroup("random graphs", "tests/runtime/test_random_graph.py")
    group.addoption("--random-graph-seeds", type=int, default=500, metavar="N",
                    help="run the random-graph test on seeds 0..N-1 (default 500)")
    group.addoption("--random-graph-seed", type=int, default=None, metavar="SEED",
                    help="run the random-graph test on this one seed")


def pytest_terminal_summary(terminalreporter):
    """The per-operation CTS tables that tests/runtime/cts/test_cts_full.py recorded."""
    tables = [value for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
              for name, value in getattr(report, "user_properties", ()) if name == "cts_table"]
    if tables:
        terminalreporter.section("CTS per operation (passed, failed, skipped)")
        for table in sorted(tables):
            terminalreporter.write_line(table)
