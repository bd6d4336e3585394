"""``nnscope delegation``: which operators of a .tflite model the TFLite NNAPI delegate takes.

One row per operator: its index and TFLite operator, the partition and devices it went to or
why it stayed on LiteRT's CPU kernels (the delegate's categories: unsupported operator, input
or output type, rank, operand value or quantization; a missing required operand; a later
Android version; a hybrid operator; not supported by the chosen devices; over the partition
limit), a note where nnscope lowers it into several NNAPI operations, and the measured time of
each CPU operator (median over ``--executions``; 0 skips running). It ends with the summary
``N of M operators delegated, in K partitions, X % of the time in NNAPI``. ``--dot``/``--svg``
draw the TFLite graph with each operator coloured by its partition or as a CPU operator
(``runtime.delegate.graph``).

Example:
    $ nnscope delegation model.tflite
    $ nnscope delegation model.tflite --feature-level 28 --max-partitions 1 --json
    $ nnscope delegation model.tflite --device nnapi-reference --executions 0
    $ nnscope delegation model.tflite --feature-level 28 --svg model.svg --executions 0
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from nnscope.runtime import graphdump
from nnscope.runtime.cli import _output_files
from nnscope.runtime.cli._args import count, description
from nnscope.runtime.delegate import DEFAULT_MAX_PARTITIONS, FEATURE_LEVELS
from nnscope.runtime.delegate import graph
from nnscope.runtime.delegate.delegated import DelegatedModel
from nnscope.runtime.delegate.report import render, report
from nnscope.runtime import manager


def add_delegate_options(parser) -> None:
    """``--feature-level`` and ``--max-partitions``, shared with ``run`` and ``bench``."""
    parser.add_argument("--feature-level", type=int, choices=FEATURE_LEVELS, metavar="LEVEL",
                        help="NNAPI feature level (Android API level) 27..30 the delegate "
                             "validates against (default: the lowest of the devices in use)")
    parser.add_argument("--max-partitions", type=int, default=DEFAULT_MAX_PARTITIONS, metavar="N",
                        help="most delegated partitions, the largest kept; <= 0: no limit "
                             "(default: %(default)s, as the delegate)")


def add_parser(subparsers):
    parser = subparsers.add_parser("delegation", help="which operators the NNAPI delegate takes, and why not",
                                   description=description(__doc__))
    parser.add_argument("model", metavar="MODEL.tflite", help="a .tflite file")
    parser.add_argument("--device", action="append", metavar="NAME",
                        help="delegate to this device only (repeatable); operators it cannot run "
                             "stay on the CPU, as getSupportedOperations says")
    add_delegate_options(parser)
    parser.add_argument("--executions", type=count, default=10, metavar="N",
                        help="executions timed for the report (after one warm-up; 0: do not run; "
                             "default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--dot", metavar="FILE.dot",
                        help="write the TFLite graph as Graphviz dot, each operator coloured by "
                             "its partition (legend: the partitions' devices) or grey on the CPU")
    parser.add_argument("--svg", metavar="FILE.svg",
                        help="render that graph to SVG (needs Graphviz's dot on PATH)")
    return parser


def sample_inputs(model: DelegatedModel, seed: int = 0) -> list[np.ndarray]:
    """Seeded sample data of each input's shape and type (floats in [-1, 1], small integers)."""
    return sample_arrays(model.input_specs(), seed)


def sample_arrays(specs, seed: int = 0) -> list[np.ndarray]:
    """:func:`sample_inputs` for ``(shape, dtype)`` pairs (float ones are the built-in models'
    ``sample_input`` for the same shapes)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in specs:
        if dtype.kind == "f":
            arrays.append(rng.uniform(-1, 1, shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.integers(0, 2, shape).astype(dtype))
        else:
            arrays.append(rng.integers(0, 4, shape).astype(dtype))
    return arrays


def load(path: str, args) -> DelegatedModel:
    """The model of ``path`` split as the delegate splits it, with the command's options."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such model file")
    devices = [manager.get_device(name) for name in args.device] if args.device else None
    return DelegatedModel(Path(path).read_bytes(), devices, args.feature_level,
                          args.max_partitions, label=path)


def main(args) -> int:
    _check_drawings(args)
    model = load(args.model, args)
    try:
        model.compile()
        times: list = []
        if args.executions:
            inputs = sample_inputs(model)
            model.run(inputs)  # warm-up
            for _ in range(args.executions):
                model.run(inputs, times)
        data = report(model.delegation, model.step_devices(), times)
    finally:
        model.free()
        manager.shutdown()
    print(json.dumps(data, indent=1) if args.json else render(data))
    return _write_drawings(args, model, data)


def _drawings(args) -> dict:
    return {"--dot": args.dot, "--svg": args.svg}


def _check_drawings(args) -> None:
    """Before anything runs: ``--svg`` names an .svg and ``dot`` is on PATH, the two flags
    name two files, and each can be written (usage error exit 2, else one line, exit 1)."""
    if args.svg and not args.svg.lower().endswith(".svg"):
        args.command_parser.error(f"--svg: {args.svg} does not end in .svg; for another format "
                                  f"write --dot FILE.dot, then e.g. dot -Tpng FILE.dot -o FILE.png")
    if args.dot and args.svg and Path(args.dot).resolve() == Path(args.svg).resolve():
        args.command_parser.error(f"--dot and --svg both write {args.dot}")
    _output_files.check(_drawings(args))
    if args.svg and graphdump.dot_program() is None:
        raise FileNotFoundError(graphdump.MISSING_DOT)


def _write_drawings(args, model: DelegatedModel, data: dict) -> int:
    """Write ``--dot``/``--svg`` (a failure to a temporary file, named); the exit status."""
    name = Path(args.model).stem
    writers = {"--dot": lambda path: graph.write_dot(model.graph, model.delegation, data, path, name),
               "--svg": lambda path: graph.write_svg(model.graph, model.delegation, data, path, name)}
    status = 0
    for flag, path in _drawings(args).items():
        if path is None:
            continue
        written, line = _output_files.write(path, writers[flag])
        status = status if written == path else 1
        print(line, file=sys.stderr if args.json or written != path else sys.stdout)
    return status
