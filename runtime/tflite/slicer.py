"""Cut a smaller .tflite model out of a bigger one: some of its operators, as they are.

:func:`slice_model` writes a new flatbuffer holding the chosen operators of the first subgraph,
the tensors they read and write (renumbered), the buffers of the constants among them and
the operator codes they use, builtin or custom. Every table is copied field by field from the
original bytes, driven by the generated ``tflite`` classes (:func:`_verify.schema`): builtin
options, custom options, quantisation (per channel too) and sparsity travel unchanged, so
LiteRT runs the slice exactly as it runs those operators in the whole model. The TFLite NNAPI
delegate's CPU side (``runtime.delegate``) runs each operator it keeps on LiteRT this way.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph
    >>> g = FlatbufferGraph()
    >>> x, y, z = (g.tensor(name, (1, 4), "FLOAT32") for name in "xyz")
    >>> g.operator("RELU", [x], [y]); g.operator("TANH", [y], [z])
    >>> g.inputs, g.outputs = [x], [z]
    >>> from nnscope.runtime.tflite._reader import read_graph
    >>> part = read_graph(slice_model(g.serialize(), [1], inputs=[y], outputs=[z]))
    >>> [op.name for op in part.operators], [t.name for t in part.tensors]
    (['TANH'], ['y', 'z'])
"""
from __future__ import annotations

import struct
from typing import Sequence

import flatbuffers

from nnscope.runtime.tflite._verify import TfliteFormatError, schema, union_members, verify

_SCALARS = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}
_PREPEND = {1: "PrependUint8Slot", 2: "PrependUint16Slot", 4: "PrependUint32Slot",
            8: "PrependUint64Slot"}


class _Source:
    """Raw reads of the original flatbuffer: tables by position, their fields by vtable slot."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def u32(self, pos: int) -> int:
        return struct.unpack_from("<I", self.data, pos)[0]

    def field(self, table: int, slot: int) -> int:
        """Absolute position of field ``slot`` of the table at ``table``, 0 when absent."""
        vtable = table - struct.unpack_from("<i", self.data, table)[0]
        size = struct.unpack_from("<H", self.data, vtable)[0]
        if slot + 2 > size:
            return 0
        offset = struct.unpack_from("<H", self.data, vtable + slot)[0]
        return table + offset if offset else 0

    def target(self, at: int) -> int:
        return at + self.u32(at)

    def scalar(self, at: int, size: int) -> int:
        return struct.unpack_from(_SCALARS[size], self.data, at)[0]

    def vector(self, at: int) -> tuple[int, int]:
        """(first element's position, length) of the vector referenced at ``at``."""
        start = self.target(at)
        return start + 4, self.u32(start)

    def table_vector(self, table: int, slot: int) -> list[int]:
        at = self.field(table, slot)
        if not at:
            return []
        first, count = self.vector(at)
        return [self.target(first + 4 * i) for i in range(count)]

    def ints(self, table: int, slot: int) -> list[int]:
        at = self.field(table, slot)
        if not at:
            return []
        first, count = self.vector(at)
        return list(struct.unpack_from(f"<{count}i", self.data, first))


def _slot(class_name: str, field_name: str) -> int:
    return next(slot for slot, f in schema(class_name).items() if f.name == field_name)


class _Copier:
    """Copies tables from a :class:`_Source` into a builder, with some fields replaced."""

    def __init__(self, source: _Source, builder: flatbuffers.Builder) -> None:
        self.src, self.b = source, builder

    def table(self, pos: int, class_name: str, replace: dict | None = None) -> int:
        """Copy the table at ``pos``; ``replace`` maps a field name to a scalar value or, for a
        vector, a list of int32 values."""
        replace = replace or {}
        fields = schema(class_name)
        children, scalars = {}, {}
        for slot, field in fields.items():
            if field.name in replace:
                value = replace[field.name]
                if isinstance(value, list):
                    children[slot] = self.b.CreateNumpyVector(_int32(value))
                else:
                    scalars[slot] = (field.size, value)
                continue
            at = self.src.field(pos, slot)
            if not at:
                continue
            if field.kind == "scalar":
                scalars[slot] = (field.size, self.src.scalar(at, field.size))
            else:
                child = self.child(at, field, fields, pos)
                if child is not None:
                    children[slot] = child
        return self.assemble(schema_slots(class_name), scalars, children)

    def child(self, at: int, field, fields, pos: int) -> int | None:
        if field.kind == "string":
            first, count = self.src.vector(at)
            return self.b.CreateString(bytes(self.src.data[first:first + count]))
        if field.kind == "vector":
            first, count = self.src.vector(at)
            return self.raw_vector(bytes(self.src.data[first:first + count * field.size]),
                                   field.size, count)
        if field.kind == "table":
            return self.table(self.src.target(at), field.table)
        if field.kind == "tables":
            first, count = self.src.vector(at)
            items = [self.table(self.src.target(first + 4 * i), field.table) for i in range(count)]
            return self.offsets(items)
        member = self.union_member(field, fields, pos)
        return None if member is None else self.table(self.src.target(at), member)

    def union_member(self, field, fields, pos: int) -> str | None:
        kind = next(slot for slot, f in fields.items() if f.name == field.name + "Type")
        at = self.src.field(pos, kind)
        return union_members(field.table).get(self.src.scalar(at, 1)) if at else None

    def raw_vector(self, payload: bytes, size: int, count: int) -> int:
        self.b.StartVector(size, count, max(size, 4))
        self.b.head -= len(payload)
        self.b.Bytes[self.b.head:self.b.head + len(payload)] = payload
        return self.b.EndVector()

    def offsets(self, items: list[int]) -> int:
        self.b.StartVector(4, len(items), 4)
        for item in reversed(items):
            self.b.PrependUOffsetTRelative(item)
        return self.b.EndVector()

    def assemble(self, slots: int, scalars: dict, children: dict) -> int:
        self.b.StartObject(slots)
        for slot, (size, value) in sorted(scalars.items(), key=lambda item: -item[1][0]):
            getattr(self.b, _PREPEND[size])(slot // 2 - 2, value, None)
        for slot, child in children.items():
            self.b.PrependUOffsetTRelativeSlot(slot // 2 - 2, child, 0)
        return self.b.EndObject()


def _int32(values):
    import numpy as np  # noqa: PLC0415 - numpy only where a vector is replaced
    return np.asarray(values, np.int32)


def slice_model(data: bytes, operators: Sequence[int], inputs: Sequence[int],
                outputs: Sequence[int]) -> bytes:
    """A .tflite model of ``operators`` (indexes into the first subgraph, run in the given
    order) whose inputs and outputs are the tensors ``inputs`` and ``outputs`` (indexes of the
    original), in that order. Tensors are renumbered in order of first use; the other
    subgraphs (the bodies a WHILE or an IF calls) are kept whole, at their indexes.

    Raises:
        TfliteFormatError: ``data`` is truncated or corrupt, or an index does not exist.
    """
    verify(data)
    src = _Source(data)
    model = src.target(0)
    subgraph = src.table_vector(model, _slot("Model", "Subgraphs"))[0]
    all_ops = src.table_vector(subgraph, _slot("SubGraph", "Operators"))
    all_tensors = src.table_vector(subgraph, _slot("SubGraph", "Tensors"))
    if any(not 0 <= i < len(all_ops) for i in operators):
        raise TfliteFormatError(f"operators {list(operators)}: the subgraph has {len(all_ops)}")
    b = flatbuffers.Builder(len(data) // 4 + 1024)
    others = src.table_vector(model, _slot("Model", "Subgraphs"))[1:]
    plan = _Plan(src, [all_ops[i] for i in operators], inputs, outputs, all_tensors, others)
    copier = _Copier(src, b)
    buffers = plan.buffers(model, copier)
    tensors = [copier.table(all_tensors[t], "Tensor", {"Buffer": plan.buffer_of(all_tensors[t])})
               for t in plan.tensors]
    ops = [copier.table(pos, "Operator", plan.operator_fields(pos)) for pos in plan.operators]
    codes_all = src.table_vector(model, _slot("Model", "OperatorCodes"))
    codes = [copier.table(codes_all[c], "OperatorCode") for c in plan.codes]
    subgraphs = [_subgraph(copier, plan, pos) for pos in others]
    return _finish(b, copier, plan, tensors, ops, codes, buffers, subgraphs)


def _subgraph(copier: _Copier, plan: "_Plan", pos: int) -> int:
    """A copy of another subgraph (a WHILE's or an IF's body, kept at its index), its tensors
    pointing at the slice's buffers; its operators keep their codes (the slice keeps them all)."""
    src, b = copier.src, copier.b
    tensors = [copier.table(t, "Tensor", {"Buffer": plan.buffer_of(t)})
               for t in src.table_vector(pos, _slot("SubGraph", "Tensors"))]
    ops = [copier.table(op, "Operator") for op in src.table_vector(pos, _slot("SubGraph", "Operators"))]
    return copier.assemble(schema_slots("SubGraph"), {}, {
        _slot("SubGraph", "Tensors"): copier.offsets(tensors),
        _slot("SubGraph", "Inputs"): b.CreateNumpyVector(_int32(src.ints(pos, _slot("SubGraph", "Inputs")))),
        _slot("SubGraph", "Outputs"): b.CreateNumpyVector(_int32(src.ints(pos, _slot("SubGraph", "Outputs")))),
        _slot("SubGraph", "Operators"): copier.offsets(ops)})


def _finish(b, copier: _Copier, plan: "_Plan", tensors, ops, codes, buffers, subgraphs) -> bytes:
    sub = copier.assemble(schema_slots("SubGraph"), {}, {
        _slot("SubGraph", "Tensors"): copier.offsets(tensors),
        _slot("SubGraph", "Inputs"): b.CreateNumpyVector(_int32(plan.renumber(plan.inputs))),
        _slot("SubGraph", "Outputs"): b.CreateNumpyVector(_int32(plan.renumber(plan.outputs))),
        _slot("SubGraph", "Operators"): copier.offsets(ops)})
    root = copier.assemble(schema_slots("Model"), {_slot("Model", "Version"): (4, 3)}, {
        _slot("Model", "OperatorCodes"): copier.offsets(codes),
        _slot("Model", "Subgraphs"): copier.offsets([sub, *subgraphs]),
        _slot("Model", "Description"): b.CreateString("nnscope slice"),
        _slot("Model", "Buffers"): copier.offsets(buffers)})
    b.Finish(root, file_identifier=b"TFL3")
    return bytes(b.Output())


def schema_slots(class_name: str) -> int:
    """How many vtable slots the table class has (its largest slot's number plus one; 0 for
    an options table without fields, as ``AbsOptions``)."""
    return max(schema(class_name), default=2) // 2 - 1


class _Plan:
    """What the slice holds: tensors in order of first use, the buffers and codes they need."""

    def __init__(self, src: _Source, operators: list[int], inputs, outputs, tables: list[int],
                 others: Sequence[int] = ()) -> None:
        self.src, self.operators, self.tables, count = src, operators, tables, len(tables)
        self.inputs, self.outputs = list(inputs), list(outputs)
        order: dict[int, int] = {}
        for tensor in self.inputs + [t for op in operators for t in self.op_tensors(op)] + \
                self.outputs:
            if not 0 <= tensor < count:
                raise TfliteFormatError(f"tensor {tensor}: the subgraph has {count}")
            order.setdefault(tensor, len(order))
        self.tensors, self._number = list(order), order
        self.others = [t for sub in others for t in src.table_vector(sub, _slot("SubGraph", "Tensors"))]
        self.codes = list(dict.fromkeys(self.opcode(op) for op in operators))
        if others:  # the other subgraphs' operators keep their code indexes
            self.codes = list(range(len(src.table_vector(src.target(0), _slot("Model", "OperatorCodes")))))
        self._buffers: dict[int, int] = {}

    def op_tensors(self, op: int) -> list[int]:
        return [t for t in self.src.ints(op, _slot("Operator", "Inputs")) +
                self.src.ints(op, _slot("Operator", "Outputs")) if t >= 0]

    def opcode(self, op: int) -> int:
        at = self.src.field(op, _slot("Operator", "OpcodeIndex"))
        return self.src.scalar(at, 4) if at else 0

    def renumber(self, tensors) -> list[int]:
        return [self._number[t] if t >= 0 else -1 for t in tensors]

    def operator_fields(self, op: int) -> dict:
        return {"OpcodeIndex": self.codes.index(self.opcode(op)),
                "Inputs": self.renumber(self.src.ints(op, _slot("Operator", "Inputs"))),
                "Outputs": self.renumber(self.src.ints(op, _slot("Operator", "Outputs"))),
                "Intermediates": []}

    def buffer_of(self, tensor: int) -> int:
        at = self.src.field(tensor, _slot("Tensor", "Buffer"))
        return self._buffers.get(self.src.scalar(at, 4) if at else 0, 0)

    def buffers(self, model: int, copier: _Copier) -> list[int]:
        """Buffer 0 (empty) then each buffer a kept tensor names, copied with its bytes."""
        all_buffers = self.src.table_vector(model, _slot("Model", "Buffers"))
        result = [copier.assemble(schema_slots("Buffer"), {}, {})]
        for table in [self.tables[t] for t in self.tensors] + self.others:
            at = self.src.field(table, _slot("Tensor", "Buffer"))
            number = self.src.scalar(at, 4) if at else 0
            if number and number not in self._buffers and number < len(all_buffers):
                self._buffers[number] = len(result)
                result.append(_buffer(copier, all_buffers[number]))
        return result


def _buffer(copier: _Copier, pos: int) -> int:
    """A buffer with its bytes inline (16-byte aligned), also when the original kept them
    after the flatbuffer (large models: ``offset``/``size``)."""
    src = copier.src
    offset_at, size_at = src.field(pos, _slot("Buffer", "Offset")), src.field(pos, _slot("Buffer", "Size"))
    offset = src.scalar(offset_at, 8) if offset_at else 0
    if offset > 1:
        size = src.scalar(size_at, 8) if size_at else 0
        payload = bytes(src.data[offset:offset + size])
    else:
        at = src.field(pos, _slot("Buffer", "Data"))
        first, count = src.vector(at) if at else (0, 0)
        payload = bytes(src.data[first:first + count])
    if not payload:
        return copier.assemble(schema_slots("Buffer"), {}, {})
    b = copier.b
    b.StartVector(1, len(payload), 16)
    b.head -= len(payload)
    b.Bytes[b.head:b.head + len(payload)] = payload
    vector = b.EndVector()
    return copier.assemble(schema_slots("Buffer"), {}, {_slot("Buffer", "Data"): vector})
