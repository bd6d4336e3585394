"""HAL-level builders of ``com.example.fibonacci`` models and requests (no runtime API, so no
allowlist: what a program speaking HAL directly sends)."""
from __future__ import annotations

import struct

import numpy as np

from nnscope.runtime.hal import fibonacci_extension as fx
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L,
                               OperandType as T, Operation, Subgraph)

NAME = fx.EXAMPLE_FIBONACCI_EXTENSION_NAME
PREFIX = 7  # any nonzero prefix: the model chooses it
INT64 = (PREFIX << 16) | fx.EXAMPLE_INT64
QUANT64 = (PREFIX << 16) | fx.EXAMPLE_TENSOR_QUANT64_ASYMM
FIBONACCI = (PREFIX << 16) | fx.FIBONACCI


def fib_model(n_type=INT64, out_type=QUANT64, scale=0.5, zero_point=10, out_dims=(0,),
              n_dims=(), extension_data=None, op_type=FIBONACCI, pairs=((NAME, PREFIX),),
              constant_n: int | None = None) -> HalModel:
    """out = FIBONACCI(n) as one HAL model (n a model input unless ``constant_n``)."""
    data = fx.ExampleQuant64AsymmParams(scale, zero_point).pack() if out_type == QUANT64 else None
    data = data if extension_data is None else extension_data
    values = b""
    if constant_n is None:
        n = Operand(n_type, n_dims, lifetime=L.SUBGRAPH_INPUT)
        inputs = (0,)
    else:
        values = struct.pack("<q", constant_n)
        n = Operand(n_type, n_dims, lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 0, 8))
        inputs = ()
    out = Operand(out_type, out_dims, lifetime=L.SUBGRAPH_OUTPUT, extension_data=data)
    graph = Subgraph((n, out), (Operation(op_type, (0,), (1,)),), inputs, (1,))
    return HalModel(graph, operand_values=values, extension_name_to_prefix=tuple(pairs))


def fib_request(n_bytes: bytes | None, out_bytes: int) -> tuple[Request, bytearray]:
    """A request with input n (``n_bytes``; None: no inputs) and an output region."""
    n_bytes = n_bytes or b""
    pool = bytearray(len(n_bytes) + out_bytes)
    pool[:len(n_bytes)] = n_bytes
    inputs = (RequestArgument(pool_index=0, offset=0, length=len(n_bytes)),) if n_bytes else ()
    output = RequestArgument(pool_index=0, offset=len(n_bytes), length=out_bytes)
    return Request(inputs, (output,), (pool,)), pool


def int64(n: int) -> bytes:
    return struct.pack("<q", n)


def outputs(pool: bytearray, offset: int, dtype, count: int) -> list:
    return np.frombuffer(bytes(pool), dtype, count, offset).tolist()
