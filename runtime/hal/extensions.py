"""Vendor extension types: the 32-bit encoding, per-model prefixes and the driver's description.

An extension operand or operation type is ``(prefix << LOW_BITS_TYPE) | type_within_extension``
(``ExtensionTypeEncoding`` of NeuralNetworksExtensions.h): the high 16 bits are a prefix the model
assigned to the extension's name, the low 16 bits the type inside the extension. Prefix 0 means
"not an extension". A model's ``extension_name_to_prefix`` (HAL ``extensionNameToPrefix``) is a
bijection between names and nonzero prefixes; it travels with the model to the driver.

In a :class:`~runtime.hal.types.Operand` or :class:`~runtime.hal.types.Operation`, an extension
type is an :class:`ExtensionType`: an ``int`` (so comparisons and the wire format are plain
numbers) that also carries a readable ``name`` such as ``com.example.fibonacci:FIBONACCI``.
Names inside an extension come from :data:`KNOWN_EXTENSIONS` (the "headers" this process knows),
else the number is printed.

Example:
    >>> t = extension_type(1, 0, "com.example.fibonacci", OPERATION)
    >>> int(t), t.name, is_extension(t), prefix_of(t), type_within(t)
    (65536, 'com.example.fibonacci:FIBONACCI', True, 1, 0)
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable, Mapping

from nnscope.runtime.hal import fibonacci_extension as _example  # noqa: F401 - registers its header
from nnscope.runtime.hal.extension_headers import KNOWN_EXTENSIONS, ExtensionHeader, register_header  # noqa: F401


class ExtensionTypeEncoding(enum.IntEnum):
    """Bits of an extension type (ANeuralNetworksExtensionTypeEncoding)."""

    HIGH_BITS_PREFIX = 16
    LOW_BITS_TYPE = 16


LOW_BITS_TYPE = int(ExtensionTypeEncoding.LOW_BITS_TYPE)
MAX_PREFIX = (1 << int(ExtensionTypeEncoding.HIGH_BITS_PREFIX)) - 1
MAX_TYPE_WITHIN = (1 << LOW_BITS_TYPE) - 1
OPERAND, OPERATION = "operand", "operation"


@dataclass(frozen=True, slots=True)
class ExtensionOperandTypeInformation:
    """One operand type a driver's extension defines (``Extension::OperandTypeInformation``)."""

    type: int
    is_tensor: bool
    byte_size: int


@dataclass(frozen=True, slots=True)
class Extension:
    """What ``IDevice.getSupportedExtensions`` returns for one extension."""

    name: str
    operand_types: tuple[ExtensionOperandTypeInformation, ...] = ()


class ExtensionType(int):
    """An extension operand/operation type: the encoded number with a readable ``name``."""

    def __new__(cls, value: int, name: str):
        obj = super().__new__(cls, value)
        obj.name = name
        return obj

    def __repr__(self) -> str:
        return f"<{self.name}: {int(self)}>"

    def __reduce__(self):  # copy/deepcopy keep the name
        return (ExtensionType, (int(self), self.name))


def is_extension(value: int) -> bool:
    """True when ``value`` carries a nonzero prefix (an extension type)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > MAX_TYPE_WITHIN


def prefix_of(value: int) -> int:
    return int(value) >> LOW_BITS_TYPE


def type_within(value: int) -> int:
    return int(value) & MAX_TYPE_WITHIN


def type_name(extension: str, within: int, kind: str) -> str:
    """``extension:NAME`` from a known header, else ``extension:number``."""
    header = KNOWN_EXTENSIONS.get(extension)
    names = {} if header is None else (header.operand_types if kind == OPERAND else header.operation_types)
    return f"{extension}:{names.get(within, within)}"


def extension_type(prefix: int, within: int, extension: str, kind: str) -> ExtensionType:
    return ExtensionType((prefix << LOW_BITS_TYPE) | within, type_name(extension, within, kind))


def named(value: int, prefixes: Mapping[int, str], kind: str) -> ExtensionType | None:
    """``value`` as an :class:`ExtensionType` named through ``prefixes`` (prefix -> name); None
    when its prefix is not registered there."""
    extension = prefixes.get(prefix_of(value))
    if extension is None:
        return None
    return extension_type(prefix_of(value), type_within(value), extension, kind)


def prefix_map_problem(pairs: Iterable[tuple[str, int]]) -> str | None:
    """Check an ``extensionNameToPrefix`` list: nonempty names, prefixes in [1, 65535], a
    bijection. Returns the problem or None."""
    names, prefixes = set(), set()
    for name, prefix in pairs:
        if not isinstance(name, str) or not name:
            return f"extension name {name!r} is empty or not text"
        if not isinstance(prefix, int) or not 0 < prefix <= MAX_PREFIX:
            return f"extension {name!r}: prefix {prefix!r} outside [1, {MAX_PREFIX}]"
        if name in names:
            return f"extension {name!r} has two prefixes"
        if prefix in prefixes:
            return f"prefix {prefix} is given to two extensions"
        names.add(name)
        prefixes.add(prefix)
    return None


def by_prefix(pairs: Iterable[tuple[str, int]]) -> dict[int, str]:
    return {prefix: name for name, prefix in pairs}


def extension_of(value: int, pairs: Iterable[tuple[str, int]]) -> str | None:
    """The extension name of an encoded type under a model's prefix list (None: not one)."""
    return by_prefix(pairs).get(prefix_of(value)) if is_extension(value) else None
