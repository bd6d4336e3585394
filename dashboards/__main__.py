"""Command line: ``python -m nnscope.dashboards INPUT [-o report.html] [--graph plan.dot]
[--delegation delegation.json] [--json]``.

INPUT is a trace (any format parse_systrace reads), a ``nnscope bench --json`` report or
a ``parse_systrace fleet summary/compare --json`` file (``--compare`` adds a comparison to a
summary), told apart by content. Writes the HTML report next to the input
(``INPUT.report.html``) unless ``-o`` names another file. For a trace, ``--graph`` adds the partition graph (the
``.dot`` file of ``nnscope run --dot``) and ``--json`` prints the report data (header and
parse_systrace's JSON summary) on stdout, or writes it to ``-o``; ``--delegation`` adds the
Delegation section of a delegate-mode run (its delegation report as JSON: the ``"delegation"``
of ``nnscope run model.tflite --json``, see :mod:`dashboards.delegation`); the renderer is also
guessed from the ``-o`` extension (``.json``). Unreadable input is one line on stderr
and exit status 2.

A partial trace (a run cut off: a thread still inside an NNAPI scope when the trace ends, the
"Incomplete trace" of parse_systrace) still gets its page, which says at the top that it is
partial and what its figures cover (the complete runs); the command then exits 3, with one line
on stderr, unless ``--partial`` accepts partial traces (exit 0), so a script does not take a
half trace for a whole one. parse_systrace does the same.

Example:
    $ python -m nnscope.dashboards trace.html                  # -> trace.html.report.html
    $ nnscope-dashboard run.json --graph plan.dot -o /tmp/r.html
    $ nnscope-dashboard bench.json -o bench.html
    $ nnscope-dashboard run.json --delegation delegation.json -o run.html  # a .tflite, delegate mode
    $ nnscope-dashboard fleet-summary.json --compare fleet-compare.json -o fleet.html
    $ nnscope-dashboard cut.html --partial -o cut.report.html   # a partial trace, exit 0
"""
from __future__ import annotations

import argparse
import os
import re
import sys

from nnscope.dashboards.bench import BenchFormatError, is_bench_file, load_bench
from nnscope.dashboards.delegation import DelegationFormatError, load_delegation
from nnscope.dashboards.fleet import is_fleet_file, load_fleet, render_fleet_page
from nnscope.dashboards.renderers import get_renderer, renderer_for_path
from nnscope.dashboards.renderers.bench_html import BenchHTMLRenderer
from nnscope.dashboards.report import build_report
from nnscope.parse_systrace.errors import TraceFormatError

PROG = "nnscope-dashboard"  # the console script (also python -m nnscope.dashboards)
#: Exit status of a partial trace's page without ``--partial`` (2 is unreadable input).
PARTIAL_EXIT = 3
EPILOG = """\
exit status: 0 written; 1 the output cannot be written; 2 bad usage or unreadable input;
3 the trace is partial (a run cut off; the page, marked partial, is written): --partial accepts
partial traces and exits 0."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=(
        "Self-contained HTML report of the NNAPI timing summary of a trace."), epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", metavar="INPUT", help="systrace HTML, ftrace text, Chrome JSON, "
                        "Perfetto (gzip ok), or a nnscope bench JSON report")
    parser.add_argument("-o", "--output", help="output file (default: TRACE.report.html)")
    parser.add_argument("--json", action="store_true",
                        help="write the report data as JSON (stdout unless -o is given)")
    parser.add_argument("--graph", metavar="PLAN.dot",
                        help="partition graph to show (written by `nnscope run --dot`)")
    parser.add_argument("--delegation", metavar="DELEGATION.json",
                        help="the delegation report of a delegate-mode run (the \"delegation\" of "
                             "`nnscope run model.tflite --json`): adds the Delegation section")
    parser.add_argument("--compare", metavar="COMPARE.json", help="with a fleet summary "
                        "(parse_systrace fleet summary --json): the comparison to show too")
    parser.add_argument("--partial", action="store_true",
                        help="accept a partial trace (runs cut off): exit 0 instead of 3; the page "
                             "says it is partial either way")
    return parser


def render(args) -> tuple[str, int]:
    """The document for the parsed arguments and how many runs of the trace were cut off (0 for
    a bench or fleet file); raises the input's format error."""
    if is_fleet_file(args.trace):  # parse_systrace fleet summary/compare --json
        summary, comparison = load_fleet(args.trace)
        comparison = load_fleet(args.compare)[1] if args.compare else comparison
        return render_fleet_page(summary, comparison, os.path.basename(args.trace)), 0
    if is_bench_file(args.trace):
        if args.json:
            raise BenchFormatError("--json: a bench report is already JSON")
        if args.graph:
            raise BenchFormatError("--graph: a bench report has no partition graph (give it "
                                   "with the trace of `nnscope run --dot`)")
        if args.delegation:
            raise BenchFormatError("--delegation: a bench report has no delegation report (give "
                                   "it with the trace of `nnscope run model.tflite`)")
        return BenchHTMLRenderer(args.trace).render(load_bench(args.trace)), 0
    if args.json:
        renderer = get_renderer("json")
    else:
        renderer = renderer_for_path(args.output) if args.output else get_renderer("html")
    delegation = load_delegation(args.delegation) if args.delegation else None
    report = build_report(args.trace, args.graph, delegation=delegation)
    return renderer().render(report), report["meta"]["incomplete_runs"]


def graph_problem(path: str) -> str | None:
    """Why ``path`` cannot be the ``--graph`` file (None when it is a Graphviz digraph)."""
    if not os.path.isfile(path):
        return "no such file"
    try:
        with open(path, encoding="utf-8") as handle:
            head = handle.read(4096)
    except (OSError, UnicodeDecodeError) as error:
        return f"cannot read: {getattr(error, 'strerror', None) or error}"
    if not re.match(r"\s*(strict\s+)?digraph\b", head):
        return "not a Graphviz digraph (write one with `nnscope run --dot plan.dot`)"
    return None


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    problem = graph_problem(args.graph) if args.graph else None
    if problem:
        sys.stderr.write(f"{PROG}: error: --graph {args.graph}: {problem}\n")
        return 2
    try:
        text, cut = render(args)
    except TraceFormatError as error:  # "FILE: line 12: why", or "FILE: cannot open: why"
        where = "" if error.where == "file" else f"{error.where}: "
        sys.stderr.write(f"{PROG}: error: {args.trace}: {where}{error.reason}\n")
        return 2
    except (BenchFormatError, UnicodeDecodeError) as error:
        sys.stderr.write(f"{PROG}: error: {args.trace}: {error}\n")
        return 2
    except DelegationFormatError as error:
        sys.stderr.write(f"{PROG}: error: --delegation {args.delegation}: {error}\n")
        return 2
    if args.json and not args.output:
        sys.stdout.write(text)
        return _partial(args, cut)
    out = args.output or f"{args.trace}.report.html"
    try:
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        sys.stderr.write(f"{PROG}: error: cannot write {out}: {error.strerror or error}\n")
        return 1
    print(out)
    return _partial(args, cut)


def _partial(args, cut: int) -> int:
    """0, or :data:`PARTIAL_EXIT` and one line when ``cut`` runs were cut off without ``--partial``."""
    if not cut or args.partial:
        return 0
    sys.stderr.write(f"{PROG}: {args.trace}: partial trace: {cut} run{'s' if cut > 1 else ''} cut off, "
                     f"left out of the timing tables (the page says so); --partial accepts partial traces\n")
    return PARTIAL_EXIT


if __name__ == "__main__":
    sys.exit(main())
