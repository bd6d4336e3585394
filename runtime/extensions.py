"""Vendor extensions on the runtime side (NeuralNetworksExtensions.h).

* :class:`ModelExtensions`: the prefixes of one model. ``Model.get_extension_operand_type`` and
  ``Model.get_extension_operation_type`` go through it: the first use of an extension name in a
  model gives it the next free prefix (1, 2, ...), so prefixes are a bijection within a model and
  the same name may get different prefixes in different models. Its ``pairs`` become the HAL
  model's ``extension_name_to_prefix``.
  A name that no device supports is BAD_DATA, as in AOSP's
  ``TypeManager``.
* :func:`get_extension_support`: ``ANeuralNetworksDevice_getExtensionSupport``.
* :func:`unsupported_extensions`: which extensions an operation needs that a device lacks
  (used by partitioning: an extension operation runs only where every extension it uses is
  supported, and never falls back to the CPU).

All of it is refused to a program the allowlist (``runtime._allowlist``) does not allow: the
support query answers False and the type calls raise BAD_DATA naming the allowlist.

Example:
    >>> from nnscope.runtime._allowlist import Locations, Policy, override
    >>> from nnscope.runtime.drivers.fibonacci import FibonacciDriver
    >>> with override(Policy("/vendor/bin/app", None, (), "none", Locations.from_environ({}))):
    ...     ext = ModelExtensions(lambda: [FibonacciDriver()])
    ...     t = ext.type_of("com.example.fibonacci", 0, OPERATION, "getExtensionOperationType")
    >>> int(t), t.name, ext.pairs
    (65536, 'com.example.fibonacci:FIBONACCI', (('com.example.fibonacci', 1),))
"""
from __future__ import annotations

from typing import Callable, Sequence

from nnscope.runtime import _allowlist
from nnscope.runtime import _checks as checks
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.hal.extensions import (MAX_PREFIX, MAX_TYPE_WITHIN, OPERAND, OPERATION, Extension,
                                    ExtensionType, extension_of, extension_type, is_extension, named,
                                    type_within)
from nnscope.runtime.hal.types import HalModel, Operand, Operation, OperationType

__all__ = ["ModelExtensions", "get_extension_support", "unsupported_extensions",
           "extensions_of_operation", "has_extension_operation", "operand_byte_size", "OPERAND",
           "OPERATION"]


def _refuse_unless_allowed(call: str) -> None:
    policy = _allowlist.policy()
    if not policy.allowed():
        raise NnError(ResultCode.BAD_DATA, f"{call}: {policy.refusal()}")


class ModelExtensions:
    """Extension name <-> prefix of one model (assigned on first use); ``devices()`` gives the
    devices whose extensions are known (the runtime's: ``manager.devices``)."""

    def __init__(self, devices: Callable[[], Sequence]) -> None:
        self._prefix: dict[str, int] = {}
        self._devices = devices

    @property
    def pairs(self) -> tuple[tuple[str, int], ...]:
        return tuple(self._prefix.items())

    @property
    def by_prefix(self) -> dict[int, str]:
        return {prefix: name for name, prefix in self._prefix.items()}

    def type_of(self, extension: str, within: int, kind: str, call: str) -> ExtensionType:
        """The encoded type ``within`` of ``extension`` (registering the extension)."""
        checks.not_null(extension, call, "extension name")
        _refuse_unless_allowed(call)
        if not isinstance(extension, str) or not extension:
            raise checks.bad(call, f"extension name must be non-empty text, got {extension!r}")
        within = checks.integer(within, call, "type within extension")
        if not 0 <= within <= MAX_TYPE_WITHIN:
            raise checks.bad(call, f"type within extension {within} outside [0, {MAX_TYPE_WITHIN}]")
        prefix = self._prefix.get(extension)
        if prefix is None:
            if not any(e.name == extension for device in self._devices() for e in supported(device)):
                raise checks.bad(call, f"extension {extension!r} is not supported by any device")
            if len(self._prefix) >= MAX_PREFIX:
                raise checks.bad(call, "too many extensions in one model")
            prefix = self._prefix[extension] = len(self._prefix) + 1
        return extension_type(prefix, within, extension, kind)

    def is_tensor(self, operand_type: int) -> bool | None:
        """Whether extension operand type ``operand_type`` of this model is a tensor, from the
        operand type information of a device supporting its extension (None: none says)."""
        name = self.by_prefix.get(int(operand_type) >> 16)
        infos = [info for device in self._devices() for extension in supported(device)
                 if extension.name == name for info in extension.operand_types
                 if info.type == type_within(operand_type)]
        return infos[0].is_tensor if infos else None

    def known(self, value: int, kind: str, where: str) -> ExtensionType:
        """``value`` as a registered extension type of this model, else BAD_DATA."""
        extension = named(value, self.by_prefix, kind)
        if extension is None:
            raise checks.bad(where, f"{kind} type {int(value)}: extension prefix {int(value) >> 16} "
                             f"is not registered in this model")
        return extension


def get_extension_support(device, extension_name: str) -> bool:
    """Whether ``device`` supports ``extension_name`` (False for a program the allowlist refuses).

    Raises:
        NnError: UNEXPECTED_NULL for a None name.
    """
    checks.not_null(extension_name, "getExtensionSupport", "extension name")
    if not _allowlist.policy().allowed():
        return False
    return any(e.name == extension_name for e in supported(device))


def supported(device) -> tuple[Extension, ...]:
    """The device's extensions (none when the query fails)."""
    try:
        return tuple(device.supported_extensions())
    except Exception:  # noqa: BLE001 - a failing driver supports no extension
        return ()


def extensions_of_operation(model: HalModel, operation: Operation, graph=None) -> set[str]:
    """Every extension ``operation`` uses: its own type and its operands' types."""
    pairs = model.extension_name_to_prefix
    if not pairs:
        return set()
    graph = graph or model.main
    types = [operation.type, *(graph.operands[i].type for i in (*operation.inputs, *operation.outputs))]
    return {name for name in (extension_of(t, pairs) for t in types) if name}


def has_extension_operation(model: HalModel) -> bool:
    """True when an operation of ``model.main`` is an extension or OEM operation: those run
    only on a device that supports them, never on the CPU fallback."""
    return any(is_extension(op.type) or op.type == OperationType.OEM_OPERATION
               for op in model.main.operations)


def unsupported_extensions(model: HalModel, operation: Operation, names: Sequence[str]) -> list[str]:
    """The extensions ``operation`` needs that are not in ``names`` (a device's extensions)."""
    return sorted(extensions_of_operation(model, operation) - set(names))


def operand_byte_size(model: HalModel, operand: Operand, dims: tuple[int, ...], devices) -> int | None:
    """Bytes of ``operand`` with ``dims``; for an extension type, from the operand type
    information a device supporting its extension reports (as AOSP's TypeManager). None when
    unknown (an unknown dimension, or no device describes the type)."""
    size = Operand(operand.type, dims).byte_size()
    name = extension_of(operand.type, model.extension_name_to_prefix)
    if size is not None or name is None:
        return size
    infos = [info for device in devices for extension in supported(device) if extension.name == name
             for info in extension.operand_types if info.type == type_within(operand.type)]
    if not infos:
        return None
    if not infos[0].is_tensor:
        return infos[0].byte_size
    count = 1
    for dim in dims:
        count *= dim
    return infos[0].byte_size * count if dims and count else None
