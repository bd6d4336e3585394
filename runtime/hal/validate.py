"""Graph-level model validation and request validation (HAL ``validateModel`` / ``validateRequest``).

Every check raises :class:`~runtime.hal.errors.HalError` with ``INVALID_ARGUMENT`` (BAD_DATA on
the runtime side) and a message naming the operand or operation index. Per-operation signature
checks are delegated to a ``check_operation(operation, input_operands, output_operands)``
callable (the op registry's ``validate``) so that this module imports nothing but HAL types.

Example:
    >>> from nnscope.runtime.hal.types import Operand, OperandLifetime as L, OperandType as T, Subgraph
    >>> a = Operand(T.TENSOR_FLOAT32, (2,), lifetime=L.SUBGRAPH_INPUT)
    >>> validate_model(HalModel(Subgraph((a,), (), (0,), (0,))))
    Traceback (most recent call last):
    ...
    nnscope.runtime.hal.errors.HalError: operand 0 is both a model input and a model output
"""
from __future__ import annotations

from collections import deque
from typing import Callable, Sequence

from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.extensions import OPERAND, OPERATION, is_extension, named, prefix_map_problem
from nnscope.runtime.hal.types import (QUANT_TYPES, ErrorStatus, HalModel, Operand, OperandLifetime,
                               OperandType, Operation, OperationType, Subgraph, is_opaque, is_scalar)

OperationCheck = Callable[[Operation, Sequence[Operand], Sequence[Operand]], None]
L = OperandLifetime

_CONSTANTS = (L.CONSTANT_COPY, L.CONSTANT_REFERENCE)
_WRITTEN_BY_OPERATION = (L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT)
_QUANT_ZERO_POINTS = {
    OperandType.TENSOR_QUANT8_ASYMM: (0, 255), OperandType.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
    OperandType.TENSOR_QUANT8_SYMM: (0, 0), OperandType.TENSOR_QUANT16_SYMM: (0, 0),
    OperandType.TENSOR_QUANT16_ASYMM: (0, 65535), OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL: (0, 0),
}


def invalid(message: str) -> HalError:
    """An ``INVALID_ARGUMENT`` HalError (BAD_DATA for the runtime)."""
    return HalError(ErrorStatus.INVALID_ARGUMENT, message)


def operand_type_problem(operand: Operand, prefixes: dict[int, str] | None = None) -> str | None:
    """Check type, rank, scale and zero point of one operand; return the problem or None.

    An extension type (``prefixes``: the model's prefix -> name) is checked only for its
    encoding, a registered prefix and its dimensions: its driver validates the rest."""
    if is_extension(operand.type) and prefixes is not None:
        if named(operand.type, prefixes, OPERAND) is None:
            return f"operand type {int(operand.type)}: extension prefix {int(operand.type) >> 16} " \
                   f"is not registered in the model"
        return _dimensions_problem(operand)
    try:
        kind = OperandType(operand.type)
    except ValueError:
        return f"unknown operand type {operand.type!r}"
    if operand.extension_data is not None:
        return f"{kind.name} is not an extension type but has extension data"
    if any(not isinstance(d, int) or d < 0 for d in operand.dimensions):
        return f"invalid dimensions {tuple(operand.dimensions)}"
    if kind in (OperandType.OEM, OperandType.TENSOR_OEM_BYTE):
        return f"OEM is a scalar but has dimensions {tuple(operand.dimensions)}" \
            if kind == OperandType.OEM and operand.dimensions else None
    if (is_scalar(kind) or kind == OperandType.SUBGRAPH) and operand.dimensions:
        return f"{kind.name} is a scalar but has dimensions {tuple(operand.dimensions)}"
    if kind == OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        return _channel_quant_problem(operand)
    if kind in QUANT_TYPES:
        low, high = _QUANT_ZERO_POINTS[kind]
        if not operand.scale > 0:
            return f"{kind.name} needs scale > 0, got {operand.scale}"
        if not low <= operand.zero_point <= high:
            return f"{kind.name} zero point {operand.zero_point} outside [{low}, {high}]"
    elif kind == OperandType.TENSOR_INT32:
        if operand.scale < 0:
            return f"TENSOR_INT32 scale {operand.scale} < 0"
    elif operand.scale != 0 or operand.zero_point != 0:
        return f"{kind.name} must have scale 0 and zero point 0"
    return None


def _dimensions_problem(operand: Operand) -> str | None:
    if any(not isinstance(d, int) or d < 0 for d in operand.dimensions):
        return f"invalid dimensions {tuple(operand.dimensions)}"
    return None


def _channel_quant_problem(operand: Operand) -> str | None:
    quant = operand.channel_quant
    if quant is None:
        return None  # parameters may still be set; checked by check_channel_quant_set
    rank = len(operand.dimensions)
    if not 0 <= quant.channel_dim < rank:
        return f"channel dimension {quant.channel_dim} outside rank {rank}"
    expected = operand.dimensions[quant.channel_dim]
    if expected and len(quant.scales) != expected:
        return f"{len(quant.scales)} channel scales for {expected} channels"
    if any(not s > 0 for s in quant.scales):
        return "channel scales must all be > 0"
    return None


def pool_buffer(pool):
    """The buffer of a pool: a buffer-protocol object or an object with a ``buffer()`` method."""
    return pool.buffer() if callable(getattr(pool, "buffer", None)) else pool


def _buffer_length(pool) -> int:
    return memoryview(pool_buffer(pool)).nbytes


def _check_location(index: int, operand: Operand, model: HalModel, pool_sizes: Sequence[int]) -> None:
    loc, life = operand.location, operand.lifetime
    if life == L.SUBGRAPH:
        if operand.type != OperandType.SUBGRAPH or loc is None:
            raise invalid(f"operand {index}: SUBGRAPH lifetime needs a SUBGRAPH operand with a location")
        if not 0 <= loc.offset < len(model.referenced):
            raise invalid(f"operand {index}: references subgraph {loc.offset}, "
                          f"model has {len(model.referenced)}")
        return
    if life not in _CONSTANTS:
        return
    if loc is None:
        raise invalid(f"operand {index}: constant without a value")
    if life == L.CONSTANT_COPY or loc.pool_index == -1:  # pool -1 is operand_values
        size, where = len(model.operand_values), "operand values"
    elif 0 <= loc.pool_index < len(pool_sizes):
        size, where = pool_sizes[loc.pool_index], f"pool {loc.pool_index}"
    else:
        raise invalid(f"operand {index}: pool index {loc.pool_index} out of range "
                      f"(model has {len(pool_sizes)} pools)")
    if loc.offset < 0 or loc.length < 0 or loc.offset + loc.length > size:
        raise invalid(f"operand {index}: value [{loc.offset}, {loc.offset + loc.length}) "
                      f"outside {where} of {size} bytes")
    needed = operand.byte_size()
    if needed is not None and needed != loc.length:
        raise invalid(f"operand {index}: value has {loc.length} bytes, "
                      f"{OperandType(operand.type).name}{list(operand.dimensions)} needs {needed}")


def _check_operands(graph: Subgraph, model: HalModel, pool_sizes: Sequence[int]) -> None:
    prefixes = {prefix: name for name, prefix in model.extension_name_to_prefix}
    for index, operand in enumerate(graph.operands):
        problem = operand_type_problem(operand, prefixes)
        if problem:
            raise invalid(f"operand {index}: {problem}")
        try:
            OperandLifetime(operand.lifetime)
        except ValueError:
            raise invalid(f"operand {index}: unknown lifetime {operand.lifetime!r}") from None
        if operand.type == OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL and operand.channel_quant is None \
                and operand.lifetime != L.NO_VALUE:
            raise invalid(f"operand {index}: TENSOR_QUANT8_SYMM_PER_CHANNEL without channel quant params")
        _check_location(index, operand, model, pool_sizes)


def _check_io(graph: Subgraph) -> None:
    count = len(graph.operands)
    for kind, indexes, lifetime in (("input", graph.input_indexes, L.SUBGRAPH_INPUT),
                                    ("output", graph.output_indexes, L.SUBGRAPH_OUTPUT)):
        seen: set[int] = set()
        for position, index in enumerate(indexes):
            if not 0 <= index < count:
                raise invalid(f"model {kind} {position}: operand index {index} out of range "
                              f"(model has {count} operands)")
            if index in seen:
                raise invalid(f"model {kind} {position}: operand {index} listed twice")
            seen.add(index)
        both = set(graph.input_indexes) & set(graph.output_indexes)
        if both:
            raise invalid(f"operand {min(both)} is both a model input and a model output")
        for index in indexes:
            if graph.operands[index].lifetime != lifetime:
                raise invalid(f"model {kind} operand {index} has lifetime "
                              f"{OperandLifetime(graph.operands[index].lifetime).name}, "
                              f"expected {lifetime.name}")
        extra = [i for i, o in enumerate(graph.operands) if o.lifetime == lifetime and i not in seen]
        if extra:
            raise invalid(f"operand {extra[0]} has lifetime {lifetime.name} but is not a model {kind}")


def operation_name(op_type: int, prefixes: dict[int, str]) -> str | None:
    """The name of an operation type (``extension:NAME`` for an extension), None if unknown."""
    if is_extension(op_type):
        extension = named(op_type, prefixes, OPERATION)
        return None if extension is None else extension.name
    try:
        return OperationType(op_type).name
    except ValueError:
        return None


def _check_operations(graph: Subgraph, check_operation: OperationCheck | None,
                      prefixes: dict[int, str]) -> list[int]:
    """Check every operation; return the writer operation of each operand (-1: none)."""
    count = len(graph.operands)
    writer = [-1] * count
    for op_index, op in enumerate(graph.operations):
        name = operation_name(op.type, prefixes)
        if name is None and is_extension(op.type):
            raise invalid(f"operation {op_index}: operation type {int(op.type)}: extension prefix "
                          f"{int(op.type) >> 16} is not registered in the model")
        if name is None:
            raise invalid(f"operation {op_index}: unknown operation type {op.type!r}")
        for kind, indexes in (("input", op.inputs), ("output", op.outputs)):
            for position, index in enumerate(indexes):
                if not 0 <= index < count:
                    raise invalid(f"operation {op_index} ({name}) {kind} {position}: operand index "
                                  f"{index} out of range (model has {count} operands)")
        for index in op.outputs:
            lifetime = graph.operands[index].lifetime
            if lifetime not in _WRITTEN_BY_OPERATION:
                raise invalid(f"operation {op_index} ({name}) writes operand {index}, which is a "
                              f"{OperandLifetime(lifetime).name}")
            if writer[index] >= 0:
                raise invalid(f"operand {index} is written by operations {writer[index]} and {op_index}")
            writer[index] = op_index
        if check_operation is not None:
            ins = [graph.operands[i] for i in op.inputs]
            outs = [graph.operands[i] for i in op.outputs]
            try:
                check_operation(op, ins, outs)
            except (ValueError, TypeError, IndexError, KeyError) as error:
                raise invalid(f"operation {op_index} ({name}): {error}") from None
    for index, operand in enumerate(graph.operands):
        if operand.lifetime in _WRITTEN_BY_OPERATION and writer[index] < 0:
            raise invalid(f"operand {index} ({OperandLifetime(operand.lifetime).name}) "
                          f"is never written by an operation")
    return writer


def run_order(graph: Subgraph, writer: Sequence[int] | None = None) -> list[int]:
    """Operation indexes in an order where each runs after the writers of its inputs.

    Kahn's algorithm with a FIFO queue: linear in operations plus operand references.

    Raises:
        HalError: INVALID_ARGUMENT when the operations form a cycle.
    """
    operations = graph.operations
    if writer is None:
        writer = [-1] * len(graph.operands)
        for op_index, op in enumerate(operations):
            for index in op.outputs:
                writer[index] = op_index
    waiting = [0] * len(operations)
    readers: dict[int, list[int]] = {}
    for op_index, op in enumerate(operations):
        producers = {writer[i] for i in op.inputs}
        producers.discard(-1)
        waiting[op_index] = len(producers)
        for producer in producers:
            readers.setdefault(producer, []).append(op_index)
    ready = deque(i for i, n in enumerate(waiting) if n == 0)
    order: list[int] = []
    while ready:
        op_index = ready.popleft()
        order.append(op_index)
        for reader in readers.get(op_index, ()):
            waiting[reader] -= 1
            if waiting[reader] == 0:
                ready.append(reader)
    if len(order) != len(operations):
        stuck = [i for i, n in enumerate(waiting) if n > 0]
        shown = ", ".join(map(str, stuck[:10])) + (", ..." if len(stuck) > 10 else "")
        raise invalid(f"operations [{shown}] form a cycle (graph is not acyclic)")
    return order


def validate_subgraph(graph: Subgraph, model: HalModel, pool_sizes: Sequence[int],
                      check_operation: OperationCheck | None = None) -> list[int]:
    """Validate one subgraph of ``model``; return its operations' run order."""
    _check_operands(graph, model, pool_sizes)
    _check_io(graph)
    prefixes = {prefix: name for name, prefix in model.extension_name_to_prefix}
    writer = _check_operations(graph, check_operation, prefixes)
    return run_order(graph, writer)


def validate_model(model: HalModel, check_operation: OperationCheck | None = None) -> list[int]:
    """Validate a whole HAL model; return the run order of the main subgraph's operations.

    Args:
        model: The model to check (main and referenced subgraphs).
        check_operation: Per-operation signature check raising ValueError (the op registry).

    Raises:
        HalError: INVALID_ARGUMENT, the message naming the operand or operation.
    """
    problem = prefix_map_problem(model.extension_name_to_prefix)
    if problem:
        raise invalid(f"extensionNameToPrefix: {problem}")
    pool_sizes = [_buffer_length(pool) for pool in model.pools]
    for number, graph in enumerate(model.referenced):
        try:
            validate_subgraph(graph, model, pool_sizes, check_operation)
        except HalError as error:
            raise invalid(f"referenced subgraph {number}: {error}") from None
    return validate_subgraph(model.main, model, pool_sizes, check_operation)


def merge_dimensions(operand_dims: Sequence[int], dims: Sequence[int]) -> tuple[int, ...] | None:
    """Combine an operand's dimensions with request dimensions (0 = unknown); None on conflict."""
    if not dims:
        return tuple(operand_dims)
    if operand_dims and len(operand_dims) != len(dims):
        return None
    if not operand_dims:
        return tuple(dims)
    merged = []
    for have, given in zip(operand_dims, dims):
        if have and given and have != given:
            return None
        merged.append(have or given)
    return tuple(merged)


def argument_problem(kind: str, position: int, arg: RequestArgument, operand: Operand,
                     pool_sizes: Sequence[int], zero_sized_inputs: bool = False) -> str | None:
    """Check one request argument against its operand; return the problem or None.

    ``zero_sized_inputs`` (driver requests, built by the runtime) accepts an input whose request
    dimensions are all given, one of them 0, with no bytes: a zero-sized tensor passed between
    steps. The public API keeps rejecting it (a 0 there means "unknown", as in NNAPI)."""
    where = f"{kind} {position}"
    if arg.has_no_value:
        return f"{where}: outputs cannot be omitted" if kind == "output" else None
    if not 0 <= arg.pool_index < len(pool_sizes):
        return f"{where}: pool index {arg.pool_index} out of range ({len(pool_sizes)} pools)"
    if arg.offset < 0 or arg.length < 0 or arg.offset + arg.length > pool_sizes[arg.pool_index]:
        return (f"{where}: region [{arg.offset}, {arg.offset + arg.length}) outside pool "
                f"{arg.pool_index} of {pool_sizes[arg.pool_index]} bytes")
    dims = merge_dimensions(operand.dimensions, arg.dimensions)
    if dims is None:
        return (f"{where}: dimensions {list(arg.dimensions)} do not match operand "
                f"dimensions {list(operand.dimensions)}")
    known = Operand(operand.type, dims)
    needed = known.byte_size()
    if kind == "input" and needed is None and not is_scalar(operand.type) \
            and not is_opaque(operand.type) \
            and not (zero_sized_inputs and _zero_sized(arg, dims)):
        return f"{where}: dimensions {list(dims)} are not fully specified"
    if needed is not None and needed != arg.length:
        return f"{where}: {arg.length} bytes given, {list(dims)} needs {needed}"
    return None


def _zero_sized(arg: RequestArgument, dims: Sequence[int]) -> bool:
    return arg.length == 0 and len(arg.dimensions) == len(dims) > 0 and 0 in arg.dimensions


def validate_request(request: Request, model: HalModel) -> None:
    """Validate a request against ``model.main``'s inputs and outputs.

    Raises:
        HalError: INVALID_ARGUMENT naming the input/output position.
    """
    graph = model.main
    if len(request.inputs) != len(graph.input_indexes):
        raise invalid(f"request has {len(request.inputs)} inputs, model has {len(graph.input_indexes)}")
    if len(request.outputs) != len(graph.output_indexes):
        raise invalid(f"request has {len(request.outputs)} outputs, "
                      f"model has {len(graph.output_indexes)}")
    pool_sizes = [_buffer_length(pool) for pool in request.pools]
    for kind, args, indexes in (("input", request.inputs, graph.input_indexes),
                                ("output", request.outputs, graph.output_indexes)):
        for position, (arg, index) in enumerate(zip(args, indexes)):
            problem = argument_problem(kind, position, arg, graph.operands[index], pool_sizes,
                                       zero_sized_inputs=True)
            if problem:
                raise invalid(f"{problem} (operand {index})")


def is_constant(lifetime: int) -> bool:
    """True for CONSTANT_COPY and CONSTANT_REFERENCE."""
    return lifetime in _CONSTANTS
