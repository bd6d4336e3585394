"""``nnscope cts``: run the NNAPI CTS vectors through the public Model/Compilation/Execution API.

Each test's HAL model becomes ``Model.from_hal``, is compiled (for ``--device`` or all
devices) and executed with ``compute_arrays``; the harness judges the outputs. Prints the
per-operation pass/fail/skip table; the last line is ``N passed, M failed, K skipped``.

Example:
    $ nnscope cts ../shared/fixtures/nnapi-cts/V1_0/add.json.gz
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from runtime.cli._backend import compute_arrays
from runtime.compilation import Compilation
from runtime.manager import get_device
from runtime.model import Model

#: Environment variable: the shared fixtures directory (default ``../shared`` beside the checkout).
NNSCOPE_SHARED = "NNSCOPE_SHARED"


def default_root() -> Path:
    """``$NNSCOPE_SHARED/fixtures/nnapi-cts``, else ``../shared/fixtures/nnapi-cts``."""
    shared = os.environ.get(NNSCOPE_SHARED)
    if shared:
        return Path(shared) / "fixtures" / "nnapi-cts"
    repo = Path(__file__).resolve().parents[2]
    return repo.parent / "shared" / "fixtures" / "nnapi-cts"


def add_parser(subparsers):
    parser = subparsers.add_parser("cts", help="run NNAPI CTS vectors through the runtime API",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", metavar="PATH", help="vector files or directories")
    parser.add_argument("--device", metavar="NAME", help="compile for this device only")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def make_backend(device_name: str | None = None):
    """A harness backend ``(hal_model, inputs) -> outputs`` over the public API."""
    devices = [get_device(device_name)] if device_name else None

    def backend(hal_model, inputs):
        model = Model.from_hal(hal_model, name="cts")
        compilation = Compilation(model, devices)
        compilation.finish()
        try:
            return compute_arrays(compilation, inputs)
        finally:
            compilation.free()  # driver processes release the prepared model
    return backend


def main(args) -> int:
    from runtime.cts import harness  # noqa: PLC0415
    paths = args.paths or [default_root()]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"no such file or directory: {missing[0]}")
    report = harness.run_vectors(paths, make_backend(args.device))
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(harness.format_table(report))
    return 0 if report.ok else 1
