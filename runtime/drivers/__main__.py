"""Driver process entry point: ``python -m nnscope.runtime.drivers <driver-name> --socket PATH``.

Serves one registered sample driver on a Unix ``SOCK_SEQPACKET`` socket until the runtime sends
SHUTDOWN or exits. Exit code 2 on bad usage (unknown driver names are listed). Memory:
``--memory-budget`` bounds one operation (``runtime.ops.budget``), ``--driver-memory-budget``
what a sample driver's models and executions hold at once (``runtime.drivers.memory_budget``).

Example::

    python -m nnscope.runtime.drivers sample-float-fast --socket /tmp/nnscope-float-fast.sock
"""
from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nnscope.runtime.drivers",
                                     description="Run an nnscope sample driver process.")
    parser.add_argument("driver", help="driver name, e.g. sample-all")
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="exit when this process is no longer the parent (default: current parent)")
    parser.add_argument("--memory-budget", type=_positive_bytes, default=None, metavar="BYTES",
                        help="bytes one operation may allocate (default: $NNSCOPE_MEMORY_BUDGET or "
                             "256 MiB); beyond it an execution gets RESOURCE_EXHAUSTED_PERSISTENT")
    parser.add_argument("--driver-memory-budget", type=_positive_bytes, default=None, metavar="BYTES",
                        help="bytes a sample driver's prepared models and running executions may hold "
                             "at once (default: $NNSCOPE_DRIVER_MEMORY_BUDGET or 4 GiB); beyond it "
                             "RESOURCE_EXHAUSTED_TRANSIENT, or _PERSISTENT when it could never fit")
    return parser


def _positive_bytes(text: str) -> int:
    value = int(text) if text.isdigit() else 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of bytes")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from nnscope.runtime.drivers import registry  # noqa: PLC0415 - keep --help fast

    try:
        driver = registry.create_driver(args.driver)
    except registry.UnknownDriverError as error:
        parser.error(str(error))
    driver.budget_bytes = args.memory_budget
    if args.driver_memory_budget is not None:
        if driver.memory is None:
            parser.error(f"--driver-memory-budget: driver {args.driver} has no memory budget")
        from nnscope.runtime.drivers.memory_budget import MemoryBudget  # noqa: PLC0415
        driver.memory = MemoryBudget(args.driver_memory_budget)
    from nnscope.runtime.drivers.ipc.wire import _trace  # noqa: PLC0415
    from nnscope.runtime.hal import fence_watch  # noqa: PLC0415
    from nnscope.runtime.drivers.ipc.service.driver_service import DriverService, listen  # noqa: PLC0415

    _trace.set_process_name(f"{args.driver}-driver")
    fence_watch.start()  # an eventfd call a client makes block ends the process, not the service
    listener = listen(args.socket)
    parent = args.parent_pid if args.parent_pid is not None else os.getppid()
    try:
        DriverService(driver, listener, parent).serve_forever()
    finally:
        listener.close()
        try:
            os.unlink(args.socket)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
