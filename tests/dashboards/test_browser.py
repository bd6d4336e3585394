"""A real browser renders the page: Debian's headless Chromium runs the page's script.

``--dump-dom`` gives the DOM after the script ran: the body is marked rendered, the
charts have layer segments and the tables show the golden numbers; ``--screenshot``
gives a PNG that must not be blank. Skipped only when ``chromium`` is not on PATH (a failure
under ``CI=true``: CI installs Debian's ``chromium``).
"""
from __future__ import annotations

import struct
import subprocess
import zlib

import pytest

from nnscope import dashboards
from tests.dashboards.pages import GOLDEN_KINDS, dom_tables, golden_tables
from tests.support.paths import SYSTRACE_FIXTURES
from tests.support.programs import needs_chromium, require_program

OMR1 = SYSTRACE_FIXTURES / "omr1.html"
SYNTHETIC = SYSTRACE_FIXTURES / "synthetic" / "cpu.html"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]

pytestmark = needs_chromium


def chromium(tmp_path, page, *args, fragment="") -> subprocess.CompletedProcess:
    """Run headless Chromium on a page file with a fresh profile directory."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [require_program("chromium"), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri() + fragment]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def _report(tmp_path, trace):
    out = tmp_path / (trace.name + ".report.html")
    dashboards.write_report(trace, out)
    return out


@pytest.fixture(scope="module")
def omr1_dom(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("omr1")
    result = chromium(tmp_path, _report(tmp_path, OMR1), "--dump-dom")
    assert "Uncaught" not in result.stderr, result.stderr
    return result.stdout


def test_script_ran_and_drew_the_charts(omr1_dom):
    assert '<body data-rendered="true" data-mode="self"' in omr1_dom
    assert omr1_dom.count('<section class="run"') == 5
    assert omr1_dom.count('<svg class="chart"') == 10
    assert 'class="seg LD"' in omr1_dom and 'class="seg LA"' in omr1_dom
    assert omr1_dom.count('<button type="button" data-mode=') == 2


@pytest.mark.parametrize("flags", ["default", "total-times"])
def test_dom_tables_show_the_golden_numbers(omr1_dom, flags):
    golden = (SYSTRACE_FIXTURES / f"omr1.{flags}.txt").read_text()
    assert dom_tables(omr1_dom)[GOLDEN_KINDS[flags]] == golden_tables(golden)


def test_total_fragment_selects_total_times(tmp_path):
    dom = chromium(tmp_path, _report(tmp_path, SYNTHETIC), "--dump-dom", fragment="#total").stdout
    assert '<body data-rendered="true" data-mode="total"' in dom
    assert '<button type="button" data-mode="total" aria-pressed="true">' in dom


def test_warmup_and_benchmark_shown(tmp_path):
    dom = chromium(tmp_path, _report(tmp_path, SYNTHETIC), "--dump-dom").stdout
    tables = dom_tables(dom)
    assert len(tables[("warmup-benchmark", "self")]) == 2
    assert "Warmup (1 exec.)" in dom and "Benchmark (6 exec.)" in dom
    golden = (SYSTRACE_FIXTURES / "synthetic" / "cpu.per-execution.txt").read_text()
    assert tables[("per-execution", "self")] == golden_tables(golden)


def png_rows(data: bytes, rows: int) -> list:
    """The first ``rows`` unfiltered pixel rows of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        at += 12 + length
    width, _, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6)
    pixel = 3 if color == 2 else 4
    stride, raw = width * pixel, zlib.decompress(idat)
    out, previous = [], bytearray(stride)
    for y in range(rows):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - pixel] if x >= pixel else 0
            b, c = previous[x], previous[x - pixel] if x >= pixel else 0
            p = a + b - c
            near = min((abs(p - a), a), (abs(p - b), b), (abs(p - c), c), key=lambda t: t[0])[1]
            line[x] = (line[x] + (0, a, b, (a + b) // 2, near)[kind]) & 0xFF
        out.append([bytes(line[x:x + 3]) for x in range(0, stride, pixel)])
        previous = line
    return out


def test_screenshot_is_not_blank(tmp_path):
    shot = tmp_path / "omr1.png"
    result = chromium(tmp_path, _report(tmp_path, OMR1), f"--screenshot={shot}",
                      "--window-size=1280,900")
    assert shot.exists(), result.stderr
    data = shot.read_bytes()
    assert len(data) > 20_000
    colours = {pixel for row in png_rows(data, 160)[::4] for pixel in row}
    assert len(colours) > 20
