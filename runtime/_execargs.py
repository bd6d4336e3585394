"""Internal: an execution argument (buffer and dimensions) checked against its operand.

``setInput``/``setOutput`` accept numpy arrays, bytes-like objects and, for inputs, Python
scalars/sequences (converted to the operand's dtype). Given dimensions follow AOSP's
``checkDimensionInfo``: they may only fill in unknown (0) dimensions, a scalar takes none, and
their byte size must fit in uint32. Every problem is BAD_DATA naming the argument (``where``).

Example:
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T
    >>> checked_dimensions([2, 3], Operand(T.TENSOR_FLOAT32, (0, 3)), "setInput: input 0")
    (2, 3)
    >>> as_array([1, 2], Operand(T.TENSOR_INT32, (2,)), "setInput: input 0").dtype.name
    'int32'
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime import _checks as checks
from nnscope.runtime.hal.types import Operand, is_opaque, is_scalar, numpy_dtype
from nnscope.runtime.hal.validate import merge_dimensions


def checked_dimensions(dimensions, operand: Operand, where: str) -> tuple[int, ...]:
    """Caller-given dimensions for ``operand``; BAD_DATA when they are malformed or conflict."""
    dims = checks.dimensions(dimensions, where)
    if is_scalar(operand.type) and dims:
        raise checks.bad(where, f"a scalar takes no dimensions, got {list(dims)}")
    if dims and merge_dimensions(operand.dimensions, dims) is None:
        raise checks.bad(where, f"dimensions {list(dims)} do not match operand dimensions "
                         f"{list(operand.dimensions)}")
    if checks.size_overflows(operand.type, dims):
        raise checks.bad(where, f"dimensions {list(dims)}: byte size overflows uint32")
    return dims


def as_array(buffer, operand: Operand, where: str):
    """An input given as a Python scalar or sequence, converted to the operand's dtype."""
    if isinstance(buffer, np.ndarray) or not isinstance(buffer, (int, float, bool, list, tuple)):
        return buffer
    if is_opaque(operand.type):
        raise checks.bad(where, f"{operand.type.name} is a driver-defined type: pass its bytes "
                         f"(a bytes-like object or numpy array)")
    try:
        return np.asarray(buffer, numpy_dtype(operand.type))
    except (ValueError, TypeError, OverflowError) as error:
        raise checks.bad(where, f"cannot convert the value to {operand.type.name}: {error}") from None


def dims_for(buffer, operand: Operand, dimensions: Sequence[int] | None) -> tuple[int, ...]:
    """Given dimensions, else an array's shape when the operand's shape is not fully known."""
    if dimensions is not None:
        return tuple(dimensions)
    unknown = not operand.dimensions or 0 in operand.dimensions
    if isinstance(buffer, np.ndarray) and unknown and buffer.ndim and not is_scalar(operand.type):
        return buffer.shape if merge_dimensions(operand.dimensions, buffer.shape) is not None else ()
    return ()


def as_buffer(buffer, operand: Operand, writable: bool, where: str):
    """The array or memoryview the request reads (input) or writes (output)."""
    if isinstance(buffer, np.ndarray):
        dtype = None if is_opaque(operand.type) else numpy_dtype(operand.type)  # opaque: any bytes
        if dtype is not None and buffer.dtype != dtype:
            raise checks.bad(where, f"{operand.type.name} needs dtype {dtype}, buffer has {buffer.dtype}")
        if not buffer.flags.c_contiguous:
            raise checks.bad(where, "array is not C-contiguous")
        if writable and not buffer.flags.writeable:
            raise checks.bad(where, "array is read-only")
        return buffer
    try:
        view = memoryview(buffer)
    except TypeError:
        raise checks.bad(where, f"{type(buffer).__name__} is not a buffer") from None
    if writable and view.readonly:
        raise checks.bad(where, "buffer is read-only")
    return view


def insufficient_message(result, out_operands, bound_args, operand_index) -> str:
    """OUTPUT_INSUFFICIENT_SIZE's message: each short output, the shape and bytes it needs."""
    parts = []
    n_in = len(bound_args) - len(out_operands)
    for index, shape in enumerate(result.output_shapes):
        if not shape.is_sufficient:
            operand = out_operands[index]
            needed = Operand(operand.type, tuple(shape.dimensions)).byte_size()
            arg = bound_args[n_in + index]
            parts.append(f"output {index} (operand {operand_index('output', index)}) needs "
                         f"shape {list(shape.dimensions)} ({needed} bytes), buffer has {arg.length} bytes")
    return "; ".join(parts) or "an output buffer is too small"
