"""Command line: ``parse_systrace fleet build|summary|query|compare ...``.

Also ``python -m nnscope.parse_systrace.fleet``. Without the ``fleet`` extra (Dask, pyarrow,
DuckDB) every subcommand stops with one line naming ``pip install 'nnscope[fleet]'`` and
exit status 1; bad usage exits 2.

Example:
    $ parse_systrace fleet build lab.fleet lab/ --pattern '{device}/{build}/{model}/*'
    $ parse_systrace fleet summary lab.fleet --by device,build --csv
    $ parse_systrace fleet query lab.fleet "SELECT reason, count(*) FROM errors GROUP BY 1"
    $ parse_systrace fleet compare lab.fleet:build=b100 lab.fleet:build=b101 --fail-on-regression 5
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys

#: The modules of the ``fleet`` extra.
EXTRA_MODULES = ("dask", "distributed", "pyarrow", "duckdb")
MISSING_EXTRA = "parse_systrace fleet: needs the fleet extra: pip install 'nnscope[fleet]'"

EPILOG = """\
Dataset tables (query them with SQL; see nnscope.parse_systrace.fleet.dataset):
  traces  trace_id (content hash), path, size_bytes, mtime_ns, format, driver, runs, parse_s, keys...
  runs    trace_id, run, starting_mark, model, warmup_and_benchmark, executions_po/_pwu/_pbm
  phases  trace_id, run, app_phase ('' | PWU | PBM), phase, layer, time_ms, self_ms
  errors  path, trace_id, size_bytes, mtime_ns, reason, keys...
A side of compare is DATASET, DATASET:KEY=VALUE,... (a selection) or a trace file."""


def _keys(text: str) -> list[str]:
    return [name for name in text.split(",") if name]


def _selection(text: str) -> dict:
    pairs = [item.partition("=") for item in text.split(",") if item]
    if any(not sep for _, sep, _ in pairs):
        raise argparse.ArgumentTypeError("expected KEY=VALUE,...")
    return {name: value for name, _, value in pairs}


def _output_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", dest="fmt", action="store_const", const="json", default="text",
                       help="print JSON")
    group.add_argument("--csv", dest="fmt", action="store_const", const="csv", help="print CSV")


def _summary_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", type=_keys, help="group by these columns (KEY,...; default: "
                        "the dataset's keys)")
    parser.add_argument("--total-times", action="store_true",
                        help="total times instead of self-times")
    _output_flags(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parse_systrace fleet", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="The NNAPI timing summary of many traces: a Parquet dataset built on Dask.")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="add traces to a dataset and print its summary")
    build.add_argument("dataset", help="the dataset folder (created if needed)")
    build.add_argument("inputs", nargs="*", help="directories, globs or trace files")
    build.add_argument("--pattern", help="group keys from the path, e.g. '{device}/{build}/{model}/*'")
    build.add_argument("--manifest", help="CSV with a path column and one column per group key")
    build.add_argument("--trace-keys", action="store_true",
                       help="also record the driver each trace shows (traces.driver)")
    build.add_argument("--scheduler", help="tcp://HOST:PORT of an existing Dask cluster "
                       "(default: an embedded one, one process per CPU)")
    build.add_argument("--workers", type=int, help="worker processes of the embedded cluster")
    build.add_argument("--tolerant", action="store_true", help="as parse_systrace --tolerant")
    build.add_argument("--no-progress", action="store_true", help="no progress bar")
    build.add_argument("--no-summary", action="store_true", help="print only the build's line")
    _summary_flags(build)
    summary = commands.add_parser("summary", help="count, median, p90 and spread per group")
    summary.add_argument("dataset")
    summary.add_argument("--where", type=_selection, default={}, help="only runs with KEY=VALUE,...")
    summary.add_argument("--all", action="store_true", help="also the cells that are 0 in every run")
    _summary_flags(summary)
    query = commands.add_parser("query", help="run SQL on the dataset's tables (DuckDB)")
    query.add_argument("dataset")
    query.add_argument("sql")
    _output_flags(query)
    compare = commands.add_parser("compare", help="medians, change and verdict, A against B")
    compare.add_argument("a")
    compare.add_argument("b")
    compare.add_argument("--by", type=_keys, help="compare per these columns")
    compare.add_argument("--total-times", action="store_true")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    compare.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    compare.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate")
    compare.add_argument("--fail-on-regression", type=float, metavar="PCT",
                         help="exit 1 when a cell is significantly slower by more than PCT %%")
    compare.add_argument("--all", action="store_true", help="print every cell, not only changes")
    _output_flags(compare)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if any(importlib.util.find_spec(name) is None for name in EXTRA_MODULES):
        print(MISSING_EXTRA, file=sys.stderr)
        return 1
    try:
        return COMMANDS[args.command](args)
    except ValueError as error:
        parser.error(str(error))
    except BrokenPipeError:
        return 1


def _build(args) -> int:
    from nnscope.parse_systrace.fleet.builder import build

    if not args.inputs and not args.manifest:
        raise ValueError("build needs inputs or --manifest")
    report = build(args.dataset, args.inputs, pattern=args.pattern, manifest=args.manifest,
                   trace_keys=args.trace_keys, scheduler=args.scheduler, workers=args.workers,
                   tolerant=args.tolerant, progress=False if args.no_progress else None)
    print(f"{args.dataset}: {report.line()}", file=sys.stderr)
    if not args.no_summary:
        args.where, args.all = {}, False
        return _summary(args)
    return 0


def _summary(args) -> int:
    from nnscope.parse_systrace.fleet.dataset import is_dataset
    from nnscope.parse_systrace.fleet.groups import shown, summarize_groups
    from nnscope.parse_systrace.fleet.output import render

    if not is_dataset(args.dataset):
        raise ValueError(f"{args.dataset}: not a fleet dataset (no fleet.json)")
    records = summarize_groups(args.dataset, args.by, total_times=args.total_times, where=args.where)
    if args.fmt == "text" and not args.all:
        records = shown(records)
    sys.stdout.write(render(records, args.fmt))
    return 0


def _query(args) -> int:
    from nnscope.parse_systrace.fleet.dataset import is_dataset, query
    from nnscope.parse_systrace.fleet.output import render

    if not is_dataset(args.dataset):
        raise ValueError(f"{args.dataset}: not a fleet dataset (no fleet.json)")
    import duckdb

    try:
        columns, rows = query(args.dataset, args.sql)
    except duckdb.Error as error:
        print(f"parse_systrace fleet query: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    sys.stdout.write(render([dict(zip(columns, row)) for row in rows], args.fmt, columns))
    return 0


def _compare(args) -> int:
    from nnscope.parse_systrace.fleet import compare as fleet_compare
    from nnscope.parse_systrace.fleet.output import render

    by = args.by if args.by is not None else fleet_compare.default_by(args.a, args.b)
    records, method = fleet_compare.compare(args.a, args.b, by, total_times=args.total_times,
                                            seed=args.seed, resamples=args.resamples,
                                            alpha=args.alpha)
    if args.fmt == "json":
        document = dict(a=args.a, b=args.b, by=by, total_times=args.total_times, method=method,
                        cells=json.loads(render(records, "json") if records else "[]"))
        sys.stdout.write(json.dumps(document, indent=1) + "\n")
    elif args.fmt == "csv":
        sys.stdout.write(render(records, "csv"))
    else:
        verdicts = [record["verdict"] for record in records]
        print(f"A = {args.a}, B = {args.b}; {method}")
        sys.stdout.write(render(records if args.all else fleet_compare.notable(records), "text"))
        print(", ".join(f"{verdicts.count(v)} {v}" for v in (fleet_compare.SLOWER, fleet_compare.FASTER,
                                                            fleet_compare.NOISE, fleet_compare.NOT_TESTED)))
    if args.fail_on_regression is not None:
        found = fleet_compare.regressions(records, args.fail_on_regression)
        for record in found:
            group = ", ".join(f"{name}={record[name]}" for name in by)
            print(f"regression: {group} {record['phase']} {record['layer']} "
                  f"{record['change_pct']:+.1f}% (interval {record['ci_low_pct']:+.1f}% .. "
                  f"{record['ci_high_pct']:+.1f}%)", file=sys.stderr)
        if found:
            return 1
    return 0


COMMANDS = {"build": _build, "summary": _summary, "query": _query, "compare": _compare}


if __name__ == "__main__":
    sys.exit(main())
