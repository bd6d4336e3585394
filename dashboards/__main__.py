"""Command line: ``python -m dashboards TRACE [-o report.html] [--json]``.

Writes the HTML report next to the trace (``TRACE.report.html``) unless ``-o`` names
another file; ``--json`` prints the report data (header and parse_systrace's JSON
summary) on stdout, or writes it to ``-o``. The renderer is also guessed from the ``-o``
extension (``.json``). Unreadable input is one line on stderr and exit status 2.

Example:
    $ python -m dashboards trace.html                  # -> trace.html.report.html
    $ nnscope-dashboard trace.json.gz -o /tmp/r.html
"""
from __future__ import annotations

import argparse
import sys

from dashboards.renderers import get_renderer, renderer_for_path
from dashboards.report import build_report
from parse_systrace.errors import TraceFormatError

PROG = "dashboards"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=(
        "Self-contained HTML report of the NNAPI timing summary of a trace."))
    parser.add_argument("trace", help="systrace HTML, ftrace text, Chrome JSON, Perfetto (gzip ok)")
    parser.add_argument("-o", "--output", help="output file (default: TRACE.report.html)")
    parser.add_argument("--json", action="store_true",
                        help="write the report data as JSON (stdout unless -o is given)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.json:
        renderer = get_renderer("json")
    else:
        renderer = renderer_for_path(args.output) if args.output else get_renderer("html")
    try:
        text = renderer().render(build_report(args.trace))
    except TraceFormatError as error:
        sys.stderr.write(f"{PROG}: error: {args.trace}:{error}\n")
        return 2
    if args.json and not args.output:
        sys.stdout.write(text)
        return 0
    out = args.output or f"{args.trace}.report.html"
    try:
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as error:
        sys.stderr.write(f"{PROG}: error: cannot write {out}: {error.strerror or error}\n")
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
