"""Build time of the dashboard page of a large trace.

Generates (into a temporary directory) the 78 MB trace of
``tests/support/gen_systrace.py --seed 11 --scenario mixed --runs 40 --execs 400`` (about
770,000 marks, 380,000 spans), then builds its HTML report (``build_report`` + the HTML
renderer: summary, timeline, profile, latency) in a fresh subprocess, timing the build
and its parts: spans (one pass over the rows), views (lanes, profile, latency), and the
whole page. When Chromium is installed, the page is also opened headless with its
self-test (``#selftest``) to record the script's load time and the time of one full
timeline redraw zoomed out and zoomed in. Prints the figures, writes
``benchmarks/results/dashboard_build.json`` and prints a final JSON line. The target is
``page_s <= 10`` (issue 14).

``--repeat N`` keeps the best of N builds (machines here are shared and loaded).

Example:
    $ python benchmarks/dashboard_build.py --repeat 3
"""
from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import write_results

REPO = Path(__file__).resolve().parents[1]
GEN = REPO / "tests" / "support" / "gen_systrace.py"
TARGET_S = 10.0
BUILD = """
import json, sys, time
t0 = time.perf_counter()
from nnscope.dashboards.report import build_report
from nnscope.dashboards.renderers.html import HTMLRenderer
from nnscope.dashboards._spans import collect_spans
from nnscope.dashboards._timeline import trace_views
from nnscope.parse_systrace.readers import open_rows
t1 = time.perf_counter()
page = HTMLRenderer().render(build_report(sys.argv[1]))
t2 = time.perf_counter()
open(sys.argv[2], "w", encoding="utf-8").write(page)
t3 = time.perf_counter()
source = open_rows(sys.argv[1])
spans = collect_spans(source)
t4 = time.perf_counter()
views = trace_views(sys.argv[1], source.format, spans)
t5 = time.perf_counter()
print(json.dumps(dict(import_s=t1 - t0, page_s=t2 - t1, write_s=t3 - t2, spans_s=t4 - t3,
                      views_s=t5 - t4, spans=len(spans), lanes=len(views["timeline"]["lanes"]),
                      page_bytes=len(page.encode()))))
"""


def build_once(trace: Path, out: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", BUILD, str(trace), str(out)], cwd=REPO,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def browser_figures(page: Path, profile: Path) -> dict:
    """Script load and redraw times of ``page`` in headless Chromium (empty if absent)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        return {}
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                           f"--user-data-dir={profile}", "--dump-dom",
                           page.as_uri() + "#selftest"], capture_output=True, text=True,
                          timeout=600)
    found = re.findall(r'<pre id="nnscope-selftest">(\{.*?)</pre>', done.stdout, re.S)
    if not found:
        return {}
    data = json.loads(html.unescape(found[0]))
    return dict(scripts_done_ms=round(data["scriptsDoneMs"], 1),
                redraw_ms=round(data["frameMs"], 1),
                redraw_zoomed_ms=round(data["frameMsZoomed"], 1),
                spans_drawn=data["spansDrawn"], errors=len(data["errors"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="best of N builds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace, out = Path(tmp) / "mixed.html", Path(tmp) / "mixed.report.html"
        subprocess.run([sys.executable, str(GEN), "--seed", "11", "--scenario", "mixed",
                        "--runs", "40", "--execs", "400", "-o", str(trace)], check=True)
        size = trace.stat().st_size
        runs = [build_once(trace, out) for _ in range(max(args.repeat, 1))]
        browser = browser_figures(out, Path(tmp) / "profile")
    best = min(runs, key=lambda run: run["page_s"])
    print(f"trace {size / 1e6:.1f} MB, {best['spans']:,} spans, {best['lanes']} lanes")
    print(f"page built in {best['page_s']:.2f} s (target <= {TARGET_S:.0f} s; spans pass "
          f"{best['spans_s']:.2f} s, views {best['views_s']:.2f} s), "
          f"page {best['page_bytes'] / 1e6:.1f} MB")
    if browser:
        print(f"chromium: scripts done {browser['scripts_done_ms']:.0f} ms after navigation, "
              f"full redraw {browser['redraw_ms']:.1f} ms zoomed out "
              f"({browser['spans_drawn']:,} rectangles), {browser['redraw_zoomed_ms']:.1f} ms "
              f"zoomed in x4")
    write_results("dashboard_build", dict(
        trace_bytes=size, spans=best["spans"], lanes=best["lanes"],
        page_s=round(best["page_s"], 3), spans_s=round(best["spans_s"], 3),
        views_s=round(best["views_s"], 3), page_bytes=best["page_bytes"],
        repeat=len(runs), all_page_s=[round(run["page_s"], 3) for run in runs],
        target_s=TARGET_S, within_target=best["page_s"] <= TARGET_S, browser=browser))


if __name__ == "__main__":
    main()
