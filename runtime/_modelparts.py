"""Internal: operand values and the assembly of a builder's state into a ``HalModel``.

Small values are copied into ``operand_values`` (CONSTANT_COPY); large ones are gathered into
one shared-memory pool (CONSTANT_REFERENCE), like AOSP's ``copyLargeValuesToSharedMemory``;
values from a ``Memory`` reference that memory as a pool; SUBGRAPH operands pull the referenced
models' subgraphs, values and pools into ``referenced`` with their locations relocated.

Example:
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T
    >>> immediate_value(0, Operand(T.INT32), 3).data
    b'\\x03\\x00\\x00\\x00'
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from nnscope.runtime._checks import buffer_region
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.hal.extensions import is_extension
from nnscope.runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L, OperandType,
                               Operation, Subgraph, is_opaque, numpy_dtype)

#: Values up to this many bytes are copied into the model (ANEURALNETWORKS_MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES).
MAX_IMMEDIATE = 128
_ALIGN = 8
_POOL_ALIGN = 64


@dataclass(frozen=True)
class Value:
    """A value set on an operand before finish."""

    lifetime: L
    data: bytes | None = None
    memory: object = None
    offset: int = 0
    length: int = 0
    model: HalModel | None = None


def _bad(message: str) -> NnError:
    return NnError(ResultCode.BAD_DATA, message)


def immediate_value(index: int, operand: Operand, value, is_tensor=lambda operand_type: None) -> Value:
    """Check and copy a value given to setOperandValue (``is_tensor``: whether an extension
    operand type is a tensor, None when no device describes it)."""
    if value is None:
        return Value(L.NO_VALUE)
    if operand.type == OperandType.SUBGRAPH:
        raise _bad(f"setOperandValue: operand {index} is SUBGRAPH; use set_operand_value_from_model")
    if is_extension(operand.type) and (is_tensor(operand.type) or operand.dimensions) and \
            (not operand.dimensions or 0 in operand.dimensions):  # as AOSP for every tensor type
        raise _bad(f"setOperandValue: extension tensor operand {index} has unspecified dimensions "
                   f"{list(operand.dimensions)}")
    if is_opaque(operand.type):  # extension / OEM scalar: bytes the driver interprets
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise _bad(f"setOperandValue: operand {index} is {operand.type.name}: give its bytes")
        data = bytes(value)
        return Value(L.CONSTANT_COPY if len(data) <= MAX_IMMEDIATE else L.CONSTANT_REFERENCE,
                     data=data, length=len(data))
    dtype = numpy_dtype(operand.type)
    if isinstance(value, np.ndarray):
        if value.dtype != dtype:
            raise _bad(f"setOperandValue: operand {index} is {operand.type.name} ({dtype}), "
                       f"value has dtype {value.dtype}")
        data = np.ascontiguousarray(value).tobytes()
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
    else:
        try:
            data = np.asarray(value, dtype=dtype).tobytes()
        except (ValueError, TypeError, OverflowError) as error:
            raise _bad(f"setOperandValue: operand {index}: cannot convert value: {error}") from None
    _check_length(index, operand, len(data), "setOperandValue")
    lifetime = L.CONSTANT_COPY if len(data) <= MAX_IMMEDIATE else L.CONSTANT_REFERENCE
    return Value(lifetime, data=data, length=len(data))


def memory_value(index: int, operand: Operand, memory, offset: int, length: int) -> Value:
    """Check a region given to setOperandValueFromMemory (``memory`` is a live Memory; one made
    from a MemoryDesc has no constant role, as in AOSP)."""
    if getattr(memory, "desc", None) is not None:
        raise _bad(f"setOperandValueFromMemory: operand {index}: a memory made from a MemoryDesc "
                   "cannot hold a constant")
    offset, length = buffer_region(offset, length, memory.size,
                                   f"setOperandValueFromMemory: operand {index}")
    _check_length(index, operand, length, "setOperandValueFromMemory")
    return Value(L.CONSTANT_REFERENCE, memory=memory, offset=offset, length=length)


def _check_length(index: int, operand: Operand, length: int, call: str) -> None:
    needed = operand.byte_size()
    if needed is None and is_opaque(operand.type):
        return
    if needed is None:
        raise _bad(f"{call}: operand {index} has unknown dimensions {list(operand.dimensions)}; "
                   f"a constant needs a full shape")
    if needed != length:
        raise _bad(f"{call}: operand {index}: value has {length} bytes, "
                   f"{operand.type.name}{list(operand.dimensions)} needs {needed}")


class _Assembly:
    """Accumulates values, pools and referenced subgraphs of one HalModel."""

    def __init__(self):
        self.values = bytearray()
        self.pools: list = []
        self.referenced: list[Subgraph | None] = []
        self._pool_index: dict[int, int] = {}
        self._children: dict[int, int] = {}

    def copy(self, data: bytes, align: int = _ALIGN) -> int:
        self.values.extend(b"\0" * (-len(self.values) % align))
        offset = len(self.values)
        self.values.extend(data)
        return offset

    def pool(self, pool) -> int:
        if id(pool) not in self._pool_index:
            self._pool_index[id(pool)] = len(self.pools)
            self.pools.append(pool)
        return self._pool_index[id(pool)]

    def child(self, child: HalModel) -> int:
        """Add a referenced model's subgraphs; return the index of its main subgraph."""
        if id(child) in self._children:
            return self._children[id(child)]
        main_index = len(self.referenced)
        self._children[id(child)] = main_index
        self.referenced.append(None)
        value_base = self.copy(child.operand_values) if child.operand_values else 0
        pool_map = [self.pool(p) for p in child.pools]
        ref_base = len(self.referenced)
        self.referenced.extend([None] * len(child.referenced))
        for position, graph in enumerate((child.main, *child.referenced)):
            target = main_index if position == 0 else ref_base + position - 1
            self.referenced[target] = _relocate(graph, value_base, pool_map, ref_base)
        return main_index


def _relocate(graph: Subgraph, value_base: int, pool_map: Sequence[int], ref_base: int) -> Subgraph:
    operands = []
    for operand in graph.operands:
        loc = operand.location
        if loc is not None and operand.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE) \
                and loc.pool_index < 0:
            loc = DataLocation(loc.pool_index, loc.offset + value_base, loc.length)
        elif loc is not None and operand.lifetime == L.CONSTANT_REFERENCE:
            loc = DataLocation(pool_map[loc.pool_index], loc.offset, loc.length)
        elif loc is not None and operand.lifetime == L.SUBGRAPH:
            loc = DataLocation(loc.pool_index, loc.offset + ref_base, loc.length)
        operands.append(dataclasses.replace(operand, location=loc))
    return dataclasses.replace(graph, operands=tuple(operands))


def _large_pool(values: dict[int, Value]):
    """One shared-memory pool holding every large immediate value; (pool, offsets)."""
    from nnscope.runtime.memory import Memory  # noqa: PLC0415 - avoid an import cycle at load
    large = {i: v for i, v in values.items() if v.lifetime == L.CONSTANT_REFERENCE and v.data is not None}
    if not large:
        return None, {}
    offsets, total = {}, 0
    for index, value in sorted(large.items()):
        total += -total % _POOL_ALIGN
        offsets[index] = total
        total += len(value.data)
    memory = Memory.create_shared(total, "nnscope-constants")
    view = memory.buffer()
    for index, value in large.items():
        view[offsets[index]:offsets[index] + len(value.data)] = value.data
    return memory, offsets


def assemble(operands: Sequence[Operand], operations: Sequence[Operation], values: dict[int, Value],
             inputs: Sequence[int], outputs: Sequence[int], relaxed: bool) -> HalModel:
    """Build the HalModel of a builder's state (lifetimes and locations filled in)."""
    assembly = _Assembly()
    large, large_offsets = _large_pool(values)
    large_index = assembly.pool(large) if large is not None else -1
    result = []
    for index, operand in enumerate(operands):
        value = values.get(index)
        lifetime, location = L.TEMPORARY_VARIABLE, None
        if index in inputs:
            lifetime = L.SUBGRAPH_INPUT
        elif index in outputs:
            lifetime = L.SUBGRAPH_OUTPUT
        elif value is not None:
            lifetime, location = value.lifetime, _location(index, value, assembly, large_index,
                                                           large_offsets)
        result.append(dataclasses.replace(operand, lifetime=lifetime, location=location))
    main = Subgraph(tuple(result), tuple(operations), tuple(inputs), tuple(outputs))
    return HalModel(main, tuple(assembly.referenced), bytes(assembly.values), tuple(assembly.pools),
                    relaxed)


def _location(index: int, value: Value, assembly: _Assembly, large_index: int,
              large_offsets: dict[int, int]) -> DataLocation | None:
    if value.lifetime == L.CONSTANT_COPY:
        return DataLocation(-1, assembly.copy(value.data), len(value.data))
    if value.lifetime == L.SUBGRAPH:
        return DataLocation(0, assembly.child(value.model), 0)
    if value.lifetime == L.CONSTANT_REFERENCE and value.data is not None:
        return DataLocation(large_index, large_offsets[index], value.length)
    if value.lifetime == L.CONSTANT_REFERENCE:
        memory = value.memory
        return DataLocation(assembly.pool(memory), value.offset, value.length)
    return None


def in_run_order(hal: HalModel, order: Sequence[int]) -> HalModel:
    """``hal`` with its main operations sorted into ``order`` (unchanged if already sorted)."""
    if list(order) == list(range(len(hal.main.operations))):
        return hal
    operations = tuple(hal.main.operations[i] for i in order)
    return dataclasses.replace(hal, main=dataclasses.replace(hal.main, operations=operations))
