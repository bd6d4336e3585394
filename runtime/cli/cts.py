"""``nnscope cts``: run the NNAPI CTS vectors through the public Model/Compilation/Execution API.

Each test's HAL model becomes ``Model.from_hal``, is compiled (for ``--device`` or all
devices) and executed with ``compute_arrays``; the harness judges the outputs. Prints the
pass/fail/skip table of the tests by the operation they test (each test in one row, so the rows
add up to the ``total`` row); the last line is ``N passed, M failed, K skipped``. With
``--device``, a test whose model that device does not fully support is skipped, with the reason
(AOSP's generated tests skip it too), and the exit status is 0 when nothing that ran failed.

Example:
    $ nnscope cts                      # every packaged vector
    $ nnscope cts --device sample-all path/to/V1_0/add.json.gz
    $ nnscope cts --dynamic-output-shapes   # outputs' dimensions unknown (0), as AOSP's variant
"""
from __future__ import annotations

import collections
import json
from pathlib import Path

from nnscope.runtime.cli._args import description
from nnscope.runtime.cli._backend import compute_arrays
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.manager import get_device
from nnscope.runtime.model import Model


def default_root() -> Path:
    """The vectors shipped with the package, or ``$NNSCOPE_CTS_DIR`` when set."""
    from nnscope.runtime.cts.loader import CTS_ROOT  # noqa: PLC0415
    return CTS_ROOT


def missing_vectors_message(root: Path) -> str:
    """The one-line error when no PATH is given and the default vectors are absent."""
    return (f"no CTS vectors at {root} (not installed with this package?); "
            "pass vector files or directories as PATH (nnscope cts PATH...) or set NNSCOPE_CTS_DIR")


def add_parser(subparsers):
    parser = subparsers.add_parser("cts", help="run NNAPI CTS vectors through the runtime API",
                                   description=description(__doc__))
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="vector files or directories (default: the vectors shipped with nnscope)")
    parser.add_argument("--device", metavar="NAME", help="compile for this device only")
    parser.add_argument("--dynamic-output-shapes", action="store_true",
                        help="rerun each vector with its outputs' dimensions unknown (0), as AOSP's "
                             "DynamicOutputShapeTest; vectors AOSP leaves out of that variant "
                             "(expected failures, RANK, IF, WHILE) run as usual")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def make_backend(device_name: str | None = None):
    """A harness backend ``(hal_model, inputs) -> outputs`` over the public API. With a device,
    a model it does not fully support (``getSupportedOperationsForDevices``) raises
    ``harness.Unsupported``: skipped, as AOSP's generated tests skip it."""
    devices = [get_device(device_name)] if device_name else None

    def backend(hal_model, inputs):
        model = Model.from_hal(hal_model, name="cts")
        if devices:
            _require_support(model, hal_model, devices[0])
        compilation = Compilation(model, devices)
        compilation.finish()
        try:
            return compute_arrays(compilation, inputs)
        finally:
            compilation.free()  # driver processes release the prepared model
    return backend


def _require_support(model: Model, hal_model, device) -> None:
    from nnscope.runtime.cts import harness  # noqa: PLC0415
    flags = model.get_supported_operations_for_devices([device])
    missing = sorted({hal_model.main.operations[i].type.name for i, ok in enumerate(flags) if not ok})
    if missing:
        raise harness.Unsupported(f"{device.name} does not support {', '.join(missing)}")


def dynamic_note(report) -> str:
    """How many tests of a ``--dynamic-output-shapes`` run had their output shapes unknown."""
    from nnscope.runtime.cts import harness  # noqa: PLC0415
    ran = [r for r in report.results if r.status != harness.SKIPPED]
    static = sum(r.message.startswith(harness.STATIC_FORM) for r in ran)
    return (f"dynamic output shapes: {len(ran) - static} tests with unknown output shapes, "
            f"{static} in static form (AOSP has no dynamic variant: expected failures, RANK, IF, WHILE)")


def main(args) -> int:
    from nnscope.runtime.cts import harness  # noqa: PLC0415
    if not args.paths and not (default_root() / "index.json").exists():
        raise FileNotFoundError(missing_vectors_message(default_root()))
    paths = args.paths or [default_root()]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise FileNotFoundError(f"no such file or directory: {missing[0]}")
    report = harness.run_vectors(paths, make_backend(args.device),
                                 unknown_output_shapes=args.dynamic_output_shapes)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        if args.dynamic_output_shapes:
            print(dynamic_note(report))
        print(harness.format_table(report))
        print(skip_reasons(report), end="")
    return 0 if report.ok else 1


def skip_reasons(report, shown: int = 10) -> str:
    """Why tests were skipped: one line per reason, most frequent first, with its count."""
    from nnscope.runtime.cts import harness  # noqa: PLC0415
    reasons = collections.Counter(r.message for r in report.results if r.status == harness.SKIPPED)
    lines = [f"skipped {count}: {reason}" for reason, count in reasons.most_common(shown)]
    if len(reasons) > shown:
        lines.append(f"... and {len(reasons) - shown} more reasons (--json gives every test's)")
    return "".join(line + "\n" for line in lines)
