"""``nnscope devices``: the available devices and their capabilities.

Lists ``nnapi-reference`` and every registered sample driver (``NNSCOPE_DRIVERS``) with the
vendor extensions each supports (``getSupportedExtensions``: name and operand types); asking a
driver for its capabilities starts its process.

Example:
    $ nnscope devices
    nnapi-reference  CPU  version 1.3  feature level 30  float32 exec 1.00 ...
    sample-quant     CPU  version nnscope-sample-1.3  feature level 30  quant8_asymm exec 50.00
    sample-fibonacci ACCELERATOR ...  extension com.example.fibonacci (types EXAMPLE_INT64 scalar 8 B, ...)
    $ nnscope devices --json
"""
from __future__ import annotations

import json
import sys

from runtime.hal.extensions import OPERAND, type_name
from runtime.hal.types import OperandType
from runtime.manager import devices

_SHOWN = (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16, OperandType.TENSOR_QUANT8_ASYMM)


def add_parser(subparsers):
    parser = subparsers.add_parser("devices", help="list devices and capabilities",
                                   description="List the devices the runtime can compile for.")
    parser.add_argument("--json", action="store_true", help="print JSON")
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


def _line(info: dict) -> str:
    perf = info["operandPerformance"]
    shown = "  ".join(f"{t.name.removeprefix('TENSOR_').lower()} exec {perf[t.name]['execTime']:.2f}"
                      for t in _SHOWN if t.name in perf)
    extensions = "  ".join(
        f"extension {e['name']} (types " + ", ".join(
            f"{type_name(e['name'], t['type'], OPERAND).split(':', 1)[1]} "
            f"{'tensor' if t['isTensor'] else 'scalar'} {t['byteSize']} B"
            for t in e["operandTypes"]) + ")" for e in info["extensions"])
    return (f"{info['name']:<20} {info['type']:<12} version {info['version']:<20}"
            f"feature level {info['featureLevel']}  {shown}" + (f"  {extensions}" if extensions else ""))


def main(args) -> int:
    from runtime.drivers.registry import absent  # noqa: PLC0415

    described = [describe(d) for d in devices()]
    if args.json:
        print(json.dumps(described, indent=2, default=float))
    else:
        for info in described:
            print(_line(info))
    for why in absent():  # a driver that cannot run here, e.g. sample-litert without LiteRT
        print(why, file=sys.stderr)
    return 0
