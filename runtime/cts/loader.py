"""Read NNAPI CTS vector files (``<VERSION>/<spec>.json.gz``) into :class:`CtsTest` records.

Each test becomes a :class:`~runtime.hal.types.HalModel` whose constants (CONSTANT_COPY and
CONSTANT_REFERENCE alike) are packed 4-byte aligned into ``operand_values`` and addressed with
``DataLocation(-1, offset, length)``. A SUBGRAPH operand's location is
``DataLocation(-1, <index into referenced>, 0)``. Schema: ``vectors/README.md``.

Example:
    >>> tests = load_file(CTS_ROOT / "V1_0/add.json.gz")
    >>> tests[0].name, tests[0].model.main.operations[0].type.name
    ('add', 'ADD')
"""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from nnscope.runtime.hal.types import (ChannelQuant, DataLocation, HalModel, Operand, OperandLifetime,
                               OperandType, Operation, OperationType, Subgraph, numpy_dtype)

#: The vectors shipped as package data (AOSP, Apache-2.0; see NOTICE and ``vectors/README.md``).
PACKAGED_VECTORS = Path(__file__).resolve().parent / "vectors"
#: Environment variable: a directory of vectors to use instead of the packaged ones.
NNSCOPE_CTS_DIR = "NNSCOPE_CTS_DIR"
#: Where the vectors are read from by default: ``$NNSCOPE_CTS_DIR``, else the packaged vectors.
CTS_ROOT = Path(os.environ.get(NNSCOPE_CTS_DIR) or PACKAGED_VECTORS)
_CONSTANTS = (OperandLifetime.CONSTANT_COPY, OperandLifetime.CONSTANT_REFERENCE)


@dataclass(frozen=True)
class CtsTest:
    """One expanded CTS example: a model plus the data to feed and to expect."""

    name: str
    spec: str
    model: HalModel
    inputs: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]
    output_types: tuple[OperandType, ...]
    ignored: tuple[bool, ...]
    is_relaxed: bool
    expect_failure: bool
    min_supported_version: str
    multinomial_tolerance: float
    operations: frozenset[OperationType]

    def has_float16(self) -> bool:
        """Whether any subgraph has a TENSOR_FLOAT16 operand (selects the float16 criteria)."""
        graphs = (self.model.main, *self.model.referenced)
        return any(o.type == OperandType.TENSOR_FLOAT16 for g in graphs for o in g.operands)


def to_array(data: list, operand_type: OperandType, dims: Iterable[int]) -> np.ndarray:
    """A JSON data list as an array of the operand's element type (float16 via float32)."""
    dtype = numpy_dtype(operand_type)
    if dtype == np.float16:
        array = np.asarray(np.asarray(data, np.float32), np.float16)
    else:
        array = np.asarray(data, dtype)
    dims = tuple(dims)
    if (all(dims) or array.size == 0) and int(np.prod(dims, dtype=np.int64)) == array.size:
        return array.reshape(dims)  # zero-sized outputs keep their shape, e.g. [0, 2, 2, 1]
    return array


class _Packer:
    """Appends constant bytes to one blob, 4-byte aligned."""

    def __init__(self) -> None:
        self.blob = bytearray()

    def add(self, array: np.ndarray) -> DataLocation:
        self.blob.extend(b"\0" * (-len(self.blob) % 4))
        offset = len(self.blob)
        raw = np.ascontiguousarray(array).tobytes()
        self.blob.extend(raw)
        return DataLocation(-1, offset, len(raw))


def _operand(raw: dict, packer: _Packer) -> Operand:
    op_type = OperandType[raw["type"]]
    lifetime = OperandLifetime[raw["lifetime"]]
    location = None
    if lifetime in _CONSTANTS:
        location = packer.add(to_array(raw["data"], op_type, raw["dimensions"]))
    elif lifetime == OperandLifetime.SUBGRAPH:
        location = DataLocation(-1, int(raw["data"][0]), 0)
    quant = raw.get("channelQuant")
    channel = ChannelQuant(tuple(quant["scales"]), quant["channelDim"]) if quant else None
    return Operand(op_type, tuple(raw["dimensions"]), float(raw["scale"]), int(raw["zeroPoint"]),
                   lifetime, location, channel)


def _subgraph(raw: dict, packer: _Packer) -> Subgraph:
    operands = tuple(_operand(o, packer) for o in raw["operands"])
    operations = tuple(Operation(OperationType[o["type"]], tuple(o["inputs"]), tuple(o["outputs"]))
                       for o in raw["operations"])
    return Subgraph(operands, operations, tuple(raw["inputIndexes"]), tuple(raw["outputIndexes"]))


def _io(raw_main: dict, indexes: list[int]) -> list[tuple[np.ndarray, OperandType, bool]]:
    result = []
    for index in indexes:
        raw = raw_main["operands"][index]
        op_type = OperandType[raw["type"]]
        result.append((to_array(raw["data"], op_type, raw["dimensions"]), op_type,
                       bool(raw.get("isIgnored", False))))
    return result


def parse_test(raw: dict, spec: str) -> CtsTest:
    """Build one :class:`CtsTest` from its JSON object."""
    model_raw = raw["model"]
    packer = _Packer()
    main = _subgraph(model_raw["main"], packer)
    referenced = tuple(_subgraph(g, packer) for g in model_raw.get("referenced", ()))
    model = HalModel(main, referenced, bytes(packer.blob), (), bool(model_raw["isRelaxed"]))
    inputs = _io(model_raw["main"], model_raw["main"]["inputIndexes"])
    outputs = _io(model_raw["main"], model_raw["main"]["outputIndexes"])
    ops = frozenset(op.type for graph in (main, *referenced) for op in graph.operations)
    return CtsTest(
        name=raw["name"], spec=spec, model=model,
        inputs=tuple(i[0] for i in inputs), expected=tuple(o[0] for o in outputs),
        output_types=tuple(o[1] for o in outputs), ignored=tuple(o[2] for o in outputs),
        is_relaxed=bool(model_raw["isRelaxed"]), expect_failure=bool(model_raw["expectFailure"]),
        min_supported_version=str(model_raw.get("minSupportedVersion", "UNKNOWN")),
        multinomial_tolerance=float(model_raw.get("expectedMultinomialDistributionTolerance", 0.0)),
        operations=ops)


def load_file(path: str | Path) -> list[CtsTest]:
    """All tests of one ``.json.gz`` (or plain ``.json``) vector file.

    Raises:
        ValueError: ``<path>: not a CTS vector file (<why>)`` for anything else.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            document = json.load(handle)
        return [parse_test(raw, document["spec"]) for raw in document["tests"]]
    except (ValueError, KeyError, TypeError, EOFError, gzip.BadGzipFile) as error:
        why = f"no {error} entry" if isinstance(error, KeyError) else str(error)
        raise ValueError(f"{path}: not a CTS vector file ({why})") from None


def load_index(root: str | Path = CTS_ROOT) -> dict:
    """The fixture's ``index.json``."""
    with open(Path(root) / "index.json", encoding="utf-8") as handle:
        return json.load(handle)


def select_files(operations: Iterable[str | OperationType], root: str | Path = CTS_ROOT,
                 mode: str = "any") -> list[Path]:
    """Vector files whose spec uses ``any`` of the operations, or ``all`` its ops within them."""
    wanted = {op.name if isinstance(op, OperationType) else str(op) for op in operations}
    chosen = []
    for spec in load_index(root)["specs"]:
        ops = set(spec["operations"])
        if (ops & wanted) if mode == "any" else (ops <= wanted):
            chosen.append(Path(root) / spec["file"])
    return chosen
