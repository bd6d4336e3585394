"""Request pools <-> numpy arrays for drivers: read the inputs, write the outputs back.

A HAL ``Request`` names a region of one of its pools for every input and output. Pools are any
writable buffer (bytearray, mmap, memoryview of shared memory). Inputs are read without copying
(``np.frombuffer`` views); outputs are copied into their regions. Callers validate the request
first (``runtime.hal.validate.validate_request``): regions here are assumed in bounds.

Example:
    >>> import numpy as np
    >>> from runtime.hal.types import *
    >>> from runtime.hal.device_types import Request, RequestArgument
    >>> x = Operand(OperandType.TENSOR_FLOAT32, (2,))
    >>> pool = bytearray(np.float32([1, 2]).tobytes() + bytes(8))
    >>> req = Request((RequestArgument(pool_index=0, offset=0, length=8),),
    ...               (RequestArgument(pool_index=0, offset=8, length=8),), (pool,))
    >>> read_inputs(req, (x,))[0].tolist()
    [1.0, 2.0]
    >>> write_outputs(req, (x,), [np.float32([5, 6])])[0].name
    'NONE'
    >>> np.frombuffer(pool, np.float32).tolist()
    [1.0, 2.0, 5.0, 6.0]
    >>> plan = IoPlan((x,), (x,))         # same, with per-model precomputation
    >>> plan.write(req, [plan.read(req)[0] * 2])[1][0].dimensions
    (2,)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from runtime.hal.device_types import OutputShape, Request
from runtime.hal.types import ErrorStatus, Operand, numpy_dtype
from runtime.hal.validate import merge_dimensions


def read_inputs(request: Request, operands: Sequence[Operand]) -> list:
    """One array (or None for an omitted input) per request input; ``operands`` are the model
    input operands in order."""
    arrays: list = []
    pools = request.pools
    for arg, operand in zip(request.inputs, operands):
        if arg.has_no_value:
            arrays.append(None)
            continue
        dtype = numpy_dtype(operand.type)
        dims = merge_dimensions(operand.dimensions, arg.dimensions) or ()
        array = np.frombuffer(pools[arg.pool_index], dtype, arg.length // dtype.itemsize, arg.offset)
        arrays.append(array.reshape(dims))
    return arrays


def write_outputs(request: Request, operands: Sequence[Operand],
                  results: Sequence[np.ndarray]) -> tuple[ErrorStatus, tuple[OutputShape, ...]]:
    """Copy ``results`` into the output regions; OUTPUT_INSUFFICIENT_SIZE when one does not fit
    (then nothing is written and the shapes say which ones were too small)."""
    shapes = []
    fits = True
    converted = []
    for arg, operand, result in zip(request.outputs, operands, results):
        array = np.asarray(result, numpy_dtype(operand.type))
        sufficient = array.nbytes <= arg.length
        fits = fits and sufficient
        shapes.append(OutputShape(tuple(array.shape), sufficient))
        converted.append(array)
    if not fits:
        return ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, tuple(shapes)
    pools = request.pools
    for arg, array in zip(request.outputs, converted):
        if array.nbytes:
            target = np.frombuffer(pools[arg.pool_index], np.uint8, array.nbytes, arg.offset)
            target[:] = array.reshape(-1).view(np.uint8)
    return ErrorStatus.NONE, tuple(shapes)


_SMALL = 4096


class IoPlan:
    """:func:`read_inputs` / :func:`write_outputs` for one model, with dtypes and fixed shapes
    worked out once and OutputShape records reused (identical tuples for identical shapes)."""

    def __init__(self, inputs: Sequence[Operand], outputs: Sequence[Operand]):
        self._in = tuple((numpy_dtype(o.type), _fixed(o), o) for o in inputs)
        self._out = tuple(numpy_dtype(o.type) for o in outputs)
        self._out_operands = tuple(outputs)
        self._shapes: dict = {}

    def read(self, request: Request) -> list:
        arrays: list = []
        pools = request.pools
        for arg, (dtype, fixed, operand) in zip(request.inputs, self._in):
            if arg.has_no_value:
                arrays.append(None)
                continue
            dims = fixed if fixed is not None and not arg.dimensions else \
                (merge_dimensions(operand.dimensions, arg.dimensions) or ())
            array = np.frombuffer(pools[arg.pool_index], dtype, arg.length // dtype.itemsize, arg.offset)
            arrays.append(array.reshape(dims))
        return arrays

    def write(self, request: Request, results: Sequence[np.ndarray]):
        arrays = []
        for dtype, result in zip(self._out, results):
            arrays.append(result if type(result) is np.ndarray and result.dtype == dtype
                          else np.asarray(result, dtype))
        key = tuple(a.shape for a in arrays)
        shapes = self._shapes.get(key)
        fits = all(a.nbytes <= arg.length for a, arg in zip(arrays, request.outputs))
        if not fits:
            return write_outputs(request, self._out_operands, arrays)
        if shapes is None:
            shapes = tuple(OutputShape(shape, True) for shape in key)
            if len(self._shapes) < 64:
                self._shapes[key] = shapes
        pools = request.pools
        for arg, array in zip(request.outputs, arrays):
            n = array.nbytes
            if n <= _SMALL:
                pools[arg.pool_index][arg.offset:arg.offset + n] = array.tobytes()
            elif n:
                target = np.frombuffer(pools[arg.pool_index], np.uint8, n, arg.offset)
                target[:] = array.reshape(-1).view(np.uint8)
        return ErrorStatus.NONE, shapes


def _fixed(operand: Operand):
    dims = tuple(operand.dimensions)
    return dims if all(dims) else None
