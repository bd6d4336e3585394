"""Modules stay under ~400 lines (STYLE: layer = package, phase = module; CI counts lines)."""
from tests.support.paths import REPO

PACKAGES = ("runtime", "tracing", "parse_systrace", "vlog", "timing", "dashboards", "tests", "benchmarks")
LIMIT = 420  # "~400": a little slack, no more


def test_every_module_is_under_the_line_limit():
    sizes = {path.relative_to(REPO).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for package in PACKAGES for path in (REPO / package).rglob("*.py")}
    assert len(sizes) > 100
    assert {name: lines for name, lines in sizes.items() if lines > LIMIT} == {}
