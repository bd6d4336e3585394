"""The ``nnscope`` command line (thin: argparse here, work in ``runtime.cli``).

Bad usage prints a one-line error and exits 2; a runtime failure (:class:`NnError`, a missing
or unreadable file) prints ``nnscope: error: ...`` and exits 1; never a traceback.

Example:
    $ nnscope run --executions 10 --trace run.json
    $ nnscope devices --json
    $ nnscope cts
    $ nnscope bench --executions 20 --json bench.json
"""
import argparse
import sys

from nnscope.runtime.api import NnError
from nnscope.runtime.cli import bench, cts, delegation, devices, run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnscope", description="Profiling-first NNAPI runtime: run models and trace every layer.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (run, devices, cts, bench, delegation):
        command = module.add_parser(commands)
        command.set_defaults(handler=module.main, command_parser=command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "run":
        run.check_outputs(args, args.command_parser)  # its usage, not the top level's
    if args.command == "bench":
        bench.check_usage(args, args.command_parser)  # --otlp, and flags that need --whole-model
    try:
        return args.handler(args)
    except NnError as error:
        print(f"nnscope: error: {error}", file=sys.stderr)
    except (OSError, ValueError) as error:
        print(f"nnscope: error: {error}", file=sys.stderr)
    except KeyboardInterrupt:
        print("nnscope: interrupted", file=sys.stderr)
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
