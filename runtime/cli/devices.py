"""``nnscope devices``: the available devices and their capabilities.

Lists ``nnapi-reference`` and every registered sample driver (``NNSCOPE_DRIVERS``) with the
vendor extensions each supports (``getSupportedExtensions``: name and operand types).

By default no driver process is started: a driver that is not running is described by the very
driver object its process would serve (``registry.create_driver``, built here in a few
milliseconds), whose ``getCapabilities`` and ``getSupportedExtensions`` depend on its code only,
so they are what the process would answer (``tests/runtime/cli/test_devices.py`` compares the
two). Starting eight processes to ask them costs seconds of imports. ``--start`` does that
instead, as a HAL client does: it starts every driver (a terminal is told when that takes long,
see ``_startup``) and asks each process; a driver that does not answer is one line on stderr and
exit status 1.

Example:
    $ nnscope devices
    device               type         version              level  float32  float16  quant8   extensions
    (float32, float16, quant8: execTime relative to the CPU, lower is faster; - not supported)
    (drivers not started: each described by the driver object its process serves; --start asks the processes)
    nnapi-reference      CPU          1.3                  30     1.00     1.00     1.00
    sample-fibonacci     ACCELERATOR  nnscope-sample-1.3   30     ...      com.example.fibonacci (types ...)
    $ nnscope devices --json
    $ nnscope devices --start     # start the driver processes and ask them
"""
from __future__ import annotations

import json
import sys

from nnscope.runtime.cli._startup import start_drivers
from nnscope.runtime.drivers.registry import absent, create_driver
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.extensions import OPERAND, type_name
from nnscope.runtime.hal.types import OperandType
from nnscope.runtime.manager import devices

_SHOWN = (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16, OperandType.TENSOR_QUANT8_ASYMM)


def add_parser(subparsers):
    parser = subparsers.add_parser("devices", help="list devices and capabilities",
                                   description="List the devices the runtime can compile for.")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--start", action="store_true",
                        help="start the driver processes and ask each one (seconds); by default a "
                             "driver that is not running is described by the driver object its "
                             "process serves, built in this process (the same answer, at once)")
    return parser


def describe(device) -> dict:
    """A JSON-ready description of one device."""
    caps = device.capabilities()
    performance = {t.name: {"execTime": p.exec_time, "powerUsage": p.power_usage}
                   for t, p in caps.operand_performance}
    relaxed = caps.relaxed_float32_to_float16_performance_tensor
    return {"name": device.name, "type": device.type.name, "version": device.version,
            "featureLevel": device.feature_level,
            "relaxedFloat32toFloat16PerformanceTensor": {"execTime": relaxed.exec_time,
                                                         "powerUsage": relaxed.power_usage},
            "operandPerformance": performance,
            "ifPerformance": caps.if_performance.exec_time,
            "whilePerformance": caps.while_performance.exec_time,
            "extensions": [{"name": e.name, "operandTypes": [
                {"type": t.type, "isTensor": t.is_tensor, "byteSize": t.byte_size}
                for t in e.operand_types]} for e in device.supported_extensions()]}


#: The table's columns: header, width (the last one, extensions, runs on).
_COLUMNS = (("device", 20), ("type", 12), ("version", 20), ("level", 6),
            ("float32", 8), ("float16", 8), ("quant8", 8), ("extensions", 0))


def _row(cells) -> str:
    return " ".join(f"{cell:<{width}}" if width else str(cell)
                    for cell, (_, width) in zip(cells, _COLUMNS)).rstrip()


def header(started: bool = False) -> str:
    """The column names, then what the numbers mean and who answered."""
    source = ("asked of the running driver processes" if started else
              "drivers not started: each described by the driver object its process serves; --start asks the processes")
    return (_row(name for name, _ in _COLUMNS) + "\n"
            + "(float32, float16, quant8: execTime relative to the CPU, lower is faster; - not supported)\n"
            + f"({source})")


def _line(info: dict) -> str:
    perf = info["operandPerformance"]
    times = [f"{perf[t.name]['execTime']:.2f}" if t.name in perf else "-" for t in _SHOWN]
    extensions = "  ".join(
        f"{e['name']} (types " + ", ".join(
            f"{type_name(e['name'], t['type'], OPERAND).split(':', 1)[1]} "
            f"{'tensor' if t['isTensor'] else 'scalar'} {t['byteSize']} B"
            for t in e["operandTypes"]) + ")" for e in info["extensions"])
    return _row((info["name"], info["type"], info["version"], info["featureLevel"], *times, extensions))


def declared(device):
    """``device`` if it runs (in-process, or a driver process already started), else the driver
    object its process would serve, built here: nothing is started."""
    return device if device.launched() else create_driver(device.name)


def _asked(started: bool) -> tuple[list[dict], list[str]]:
    """The description of every device, and one line per driver process that did not answer."""
    if started:
        start_drivers(devices())
    described, failed = [], []
    for device in devices():
        try:
            described.append(describe(device if started else declared(device)))
        except HalError as error:
            failed.append(f"nnscope: error: driver {device.name} did not answer: {error}")
    return described, failed


def main(args) -> int:
    described, failed = _asked(args.start)
    if args.json:
        print(json.dumps(described, indent=2, default=float))
    else:
        print(header(args.start))
        for info in described:
            print(_line(info))
    for why in (*absent(), *failed):  # a driver that cannot run here, e.g. sample-litert without LiteRT
        print(why, file=sys.stderr)
    return 1 if failed else 0
