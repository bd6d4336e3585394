"""Command line: ``parse_systrace [--total-times] [--per-execution] [--json] ... FILE``.

Prints the established tool's tables (or JSON) on stdout, its warnings on stderr, and
reports unreadable input as one line ``parse_systrace: error: <file>:<where>: <reason>``
with exit status 2. A partial trace (a run cut off, "Incomplete trace, not able to print all
statistics" as the established tool warns) prints what is complete and exits 3 unless
``--partial`` accepts partial traces (exit 0), as ``nnscope-dashboard`` does.

Beyond the established tool (see ``EPILOG``): other trace formats, newer HAL names, a
tolerant mode, per-process summaries, and Runtime/Execution counting synchronous
``ANeuralNetworksExecution_compute`` / ``_burstCompute`` calls.

``parse_systrace fleet ...`` runs :mod:`parse_systrace.fleet` (many traces, on Dask).

Example:
    $ parse_systrace --per-execution trace.html
    $ python -m nnscope.parse_systrace --json --tolerant trace.txt
"""
from __future__ import annotations

import argparse
import os
import sys

from nnscope.parse_systrace import iter_summaries
from nnscope.parse_systrace._detail import render_detail
from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.render import json_object, render_text


EPILOG = """\
Compatible with the AOSP systrace_parser's output. Where we go beyond it: Chrome JSON and
Perfetto input; newer HAL names (execute_1_3, executeSynchronously, executeFenced, burst);
--tolerant and --per-process; and Runtime/Execution also counts the synchronous
ANeuralNetworksExecution_compute and ANeuralNetworksExecution_burstCompute calls, which the
established tool leaves out (its Runtime self-time then goes negative).

exit status: 0 done; 1 stdout closed; 2 bad usage or unreadable trace; 3 the trace is partial (a
run cut off: "Incomplete trace"; the complete runs are printed): --partial accepts partial
traces and exits 0."""
#: Exit status of a partial trace without ``--partial`` (2 is an unreadable one).
PARTIAL_EXIT = 3


def _help_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter as wide as the terminal, as shutil.get_terminal_size finds it
    (argparse asks shutil, whose import and its compression modules cost ~2 ms of every
    start: it builds a formatter per argument)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
        except (AttributeError, ValueError, OSError):
            columns = 80
    return argparse.RawDescriptionHelpFormatter(prog, width=columns - 2)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parse_systrace", description=(
        "NNAPI timing summary of a systrace (HTML, ftrace text, Chrome JSON, Perfetto)."),
        epilog=EPILOG, formatter_class=_help_formatter)
    parser.add_argument("--total-times", action="store_true",
                        help="print total times instead of self-times")
    parser.add_argument("--print-detail", action="store_true",
                        help="print each thread's buckets and call tree after each table")
    parser.add_argument("--per-execution", action="store_true",
                        help="print only Execution, divided by the execution count")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--tolerant", action="store_true",
                        help="drop orphan rows (trace starting mid-call) instead of failing")
    parser.add_argument("--per-process", action="store_true",
                        help="print one summary per client process")
    parser.add_argument("--partial", action="store_true",
                        help="accept a partial trace (runs cut off): exit 0 instead of 3")
    parser.add_argument("filename")
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["fleet"]:  # many traces: nnscope.parse_systrace.fleet (a file named fleet: ./fleet)
        from nnscope.parse_systrace.fleet.__main__ import main as fleet_main

        return fleet_main(argv[1:])
    args = build_parser().parse_args(argv)
    out, err = sys.stdout, sys.stderr
    printed = cut = 0
    try:
        runs = iter_summaries(args.filename, tolerant=args.tolerant,
                              per_process=args.per_process, detail=args.print_detail,
                              warn=err.write)
        for run in runs:
            if not run.complete:
                cut += 1
                continue
            if args.json:
                out.write((",\n" if printed else "[\n") + json_object(
                    run, args.total_times, args.per_execution) + "\n")
            else:
                out.write(render_text(run, args.total_times, args.per_execution))
                if args.print_detail:
                    out.write(render_detail(run))
            printed += 1
        if args.json:  # "[" comes with the first run: an unreadable file prints nothing
            out.write("]\n" if printed else "[\n]\n")
    except TraceFormatError as error:
        out.flush()
        err.write(f"parse_systrace: error: {args.filename}:{error}\n")
        return 2
    except BrokenPipeError:
        return 1
    return PARTIAL_EXIT if cut and not args.partial else 0


if __name__ == "__main__":
    sys.exit(main())
