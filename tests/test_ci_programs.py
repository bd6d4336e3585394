"""The missing-program rule of ``tests/conftest.py``, run on a tiny inner test suite.

Outside CI a test needing an absent program skips with a reason naming it; under ``CI=true`` the
same skip is a failure, whether it comes from :func:`require_program` or a ``needs_program`` mark.
"""
import pytest

from tests.support.programs import MISSING_PROGRAM, missing_reason

pytest_plugins = ["pytester"]

ABSENT = "nnscope-no-such-program"
INNER_CONFTEST = "from tests.conftest import pytest_runtest_makereport, pytest_sessionfinish\n"
INNER_TESTS = f"""
from tests.support.programs import needs_program, require_program

def test_calls_require_program():
    require_program("{ABSENT}")

@needs_program("{ABSENT}")
def test_marked():
    pass

def test_unrelated():
    assert True
"""


def _run(pytester, monkeypatch, ci: str | None):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    return pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:xdist", "-rs")


def test_missing_program_skips_naming_it_outside_ci(pytester, monkeypatch):
    result = _run(pytester, monkeypatch, ci=None)
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"*{missing_reason(ABSENT)}*"])


@pytest.mark.parametrize("ci", ["true", "1"])
def test_missing_program_fails_under_ci(pytester, monkeypatch, ci):
    result = _run(pytester, monkeypatch, ci=ci)
    result.assert_outcomes(passed=1, failed=1, errors=1)  # the mark's skip happens at setup
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"CI={ci} but the test skipped: {MISSING_PROGRAM} {ABSENT}*"] * 2)


def test_other_skips_still_skip_under_ci(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner="import pytest\n\ndef test_x():\n    pytest.skip('not today')\n")
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:xdist")
    result.assert_outcomes(skipped=1)
    assert result.ret == 0


def test_module_level_missing_program_skip_fails_the_session_under_ci(pytester, monkeypatch):
    monkeypatch.setenv("CI", "true")
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=f"""
import pytest
from tests.support.programs import missing_reason
pytest.skip(missing_reason("{ABSENT}"), allow_module_level=True)
""")
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"CI: 1 missing-program skip(s): {MISSING_PROGRAM} {ABSENT}*"])
