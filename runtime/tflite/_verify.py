"""Check a .tflite flatbuffer against its file before any of it is read.

:func:`verify` walks every table reachable from the root, as FlatBuffers' own C++ verifier
does: each vtable and table, each offset to a table, string or vector, each vector's length
times its element size and each string with its terminating zero must lie inside the file,
tables nest at most ``MAX_DEPTH`` deep and there are at most ``MAX_TABLES`` of them (so a
corrupt offset that loops back ends). A file that fails raises :class:`TfliteFormatError`, one
line naming the field and byte: a truncated or corrupt file never reaches the generated reader
(whose ``struct.unpack_from`` would otherwise raise ``struct.error`` deep inside it).

The schema is the ``tflite`` package's generated classes themselves: each accessor names its
vtable slot and what it reads (``_tab.Get(Int32Flags, ...)`` a scalar, ``_tab.Vector`` a
vector, ``_tab.Indirect`` plus ``from tflite.X import X`` a table, ``_tab.String`` a string,
``_tab.Union`` a union), so every table of every option type is checked with no schema copied
here. Only a union's enum is named here (``_UNIONS``); a union member of an unknown type is
skipped, as by FlatBuffers.

Example:
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.tflite._translate import translate
    >>> data = translate(tiny_add().to_hal()).flatbuffer
    >>> verify(data)
    >>> verify(data[:100])
    Traceback (most recent call last):
    ...
    nnscope.runtime.tflite._verify.TfliteFormatError: truncated or corrupt: ...
    >>> schema("Tensor")[4]
    Field(name='Shape', kind='vector', size=4, table=None)
"""
from __future__ import annotations

import functools
import inspect
import re
import struct
from dataclasses import dataclass

import flatbuffers
import tflite

from nnscope.runtime.hal.types import ResultCode

#: How deep tables may nest (FlatBuffers' default ``max_depth``).
MAX_DEPTH = 64
#: How many tables a file may hold (FlatBuffers' default ``max_tables``).
MAX_TABLES = 1_000_000
ROOT = "Model"
#: Union field -> its enum class (the generated code does not name it).
_UNIONS = {"BuiltinOptions": "BuiltinOptions", "BuiltinOptions2": "BuiltinOptions2",
           "Details": "QuantizationDetails", "ArraySegments": "SparseIndexVector",
           "ArrayIndices": "SparseIndexVector"}


class TfliteFormatError(ValueError):
    """A .tflite file that is truncated or corrupt: an offset or length points outside the
    file, or a table refers to a tensor, buffer or operator code that does not exist.

    ``result_code`` is NNAPI's BAD_DATA, as for :class:`~runtime.tflite.UnsupportedOperator`.
    """

    result_code = ResultCode.BAD_DATA


@dataclass(frozen=True)
class Field:
    """One field of a generated table class: ``kind`` is scalar, string, table, vector,
    tables (a vector of tables) or union; ``size`` the scalar's or vector element's bytes."""

    name: str
    kind: str
    size: int = 4
    table: str | None = None


_METHOD = re.compile(r"\n    def (\w+)\(self(?:, j)?\):\n(.*?)(?=\n    #|\n    @|\Z)", re.S)
_SLOT = re.compile(r"self\._tab\.Offset\((\d+)\)")
_GET = re.compile(r"self\._tab\.Get\(flatbuffers\.number_types\.(\w+Flags)")
_IMPORT = re.compile(r"from tflite\.(\w+) import")
_HELPERS = ("AsNumpy", "Length", "IsNone")


@functools.cache
def schema(class_name: str) -> dict[int, Field]:
    """The fields of ``tflite.<class_name>`` by vtable slot, read from its generated code.

    Raises:
        TypeError: an accessor this reading does not recognise (a newer code generator):
            better no check than a silently partial one.
    """
    fields = {}
    for name, body in _METHOD.findall(inspect.getsource(getattr(tflite, class_name))):
        slot = _SLOT.search(body)
        if slot is None or name.endswith(_HELPERS):
            continue
        fields[int(slot.group(1))] = _field(class_name, name, body)
    return fields


def _field(class_name: str, name: str, body: str) -> Field:
    table = _IMPORT.search(body)
    if "self._tab.Union(" in body:
        return Field(name, "union", table=_UNIONS[name])
    if "self._tab.Vector(o)" in body:
        if "self._tab.Indirect(x)" in body and table:
            return Field(name, "tables", table=table.group(1))
        return Field(name, "vector", _width(_GET.search(body).group(1)))
    if "self._tab.Indirect(o + self._tab.Pos)" in body and table:
        return Field(name, "table", table=table.group(1))
    if "self._tab.String(o + self._tab.Pos)" in body:
        return Field(name, "string")
    if _GET.search(body):
        return Field(name, "scalar", _width(_GET.search(body).group(1)))
    raise TypeError(f"tflite.{class_name}.{name}: an accessor of unknown form")


def _width(flags: str) -> int:
    return getattr(flatbuffers.number_types, flags).bytewidth


def verify(data: bytes) -> None:
    """Check every offset and length of the .tflite flatbuffer ``data`` against its size.

    Raises:
        TfliteFormatError: the first field that points outside ``data``, one line.
    """
    _Walk(data).root()


class _Walk:
    def __init__(self, data: bytes) -> None:
        self.data, self.size, self.tables = memoryview(data), len(data), 0

    def fail(self, what: str, pos: int, length: int) -> TfliteFormatError:
        return TfliteFormatError(f"truncated or corrupt: {what} at byte {pos} (+{length}) is "
                                 f"outside the {self.size}-byte file")

    def need(self, pos: int, length: int, what: str) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            raise self.fail(what, pos, length)

    def read(self, fmt: str, pos: int, what: str) -> int:
        self.need(pos, struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, self.data, pos)[0]

    def root(self) -> None:
        self.table(self.read("<I", 0, "the root offset"), ROOT, 0, ROOT)

    def table(self, pos: int, class_name: str, depth: int, what: str) -> None:
        self.tables += 1
        if depth > MAX_DEPTH or self.tables > MAX_TABLES:
            raise TfliteFormatError(f"truncated or corrupt: {what} nests deeper than {MAX_DEPTH} "
                                    f"tables or the file holds over {MAX_TABLES} (a loop?)")
        vtable = pos - self.read("<i", pos, what)
        vsize = self.read("<H", vtable, f"{what}'s vtable")
        tsize = self.read("<H", vtable + 2, f"{what}'s vtable")
        if vsize < 4 or vsize % 2 or tsize < 4:
            raise TfliteFormatError(f"truncated or corrupt: {what}'s vtable at byte {vtable} "
                                    f"gives sizes {vsize} and {tsize}")
        self.need(vtable, vsize, f"{what}'s vtable")
        self.need(pos, tsize, what)
        fields = schema(class_name)
        for slot, field in fields.items():
            offset = self.read("<H", vtable + slot, f"{what}'s vtable") if slot + 2 <= vsize else 0
            if offset == 0:
                continue
            inline = field.size if field.kind == "scalar" else 4
            name = f"{what}.{field.name}"
            if offset + inline > tsize:
                raise self.fail(name, pos + offset, inline)
            if field.kind != "scalar":
                self.reference(pos + offset, field, fields, pos, vtable, vsize, depth, name)

    def reference(self, at: int, field: Field, fields, pos, vtable, vsize, depth, what) -> None:
        target = at + self.read("<I", at, what)
        if field.kind == "table":
            self.table(target, field.table, depth + 1, what)
        elif field.kind == "union":
            member = self.union_member(field, fields, pos, vtable, vsize)
            if member is not None:
                self.table(target, member, depth + 1, f"{what}({member})")
        else:
            count = self.read("<I", target, what)
            if field.kind == "string":
                self.need(target + 4, count + 1, what)
                if self.data[target + 4 + count] != 0:
                    raise TfliteFormatError(f"truncated or corrupt: {what} at byte {target} "
                                            "has no terminating zero")
            elif field.kind == "vector":
                self.need(target + 4, count * field.size, what)
            else:
                self.need(target + 4, count * 4, what)
                for index in range(count):
                    element = target + 4 + 4 * index
                    self.table(element + self.read("<I", element, what), field.table, depth + 1,
                               f"{what}[{index}]")

    def union_member(self, field: Field, fields, pos, vtable, vsize) -> str | None:
        """The table class of a union's value: its ``<name>Type`` field (the slot before)."""
        kind = next((slot for slot, f in fields.items() if f.name == field.name + "Type"), None)
        offset = self.read("<H", vtable + kind, "a vtable") if kind is not None and kind + 2 <= vsize else 0
        number = self.read("<B", pos + offset, "a union type") if offset else 0
        return union_members(field.table).get(number)


@functools.cache
def union_members(enum: str) -> dict[int, str]:
    """A union enum's values -> the table classes they name (NONE and unknown ones left out)."""
    return {value: name for name, value in vars(getattr(tflite, enum)).items()
            if not name.startswith("_") and name != "NONE" and hasattr(tflite, name)}
