"""HAL-level model and request builders shared by the driver/IPC tests (no runtime API)."""
from __future__ import annotations

import numpy as np

from nnscope.runtime.drivers.ipc import SharedPool
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L, OperandType as T,
                               Operation, OperationType as Op, PaddingCode, Subgraph)


class _Values:
    """Accumulates constant bytes (CONSTANT_COPY) with 4-byte alignment."""

    def __init__(self):
        self.blob = bytearray()

    def add(self, operand_type, value, dims=()) -> Operand:
        data = np.asarray(value).tobytes()
        while len(self.blob) % 4:
            self.blob.append(0)
        loc = DataLocation(-1, len(self.blob), len(data))
        self.blob += data
        return Operand(operand_type, tuple(dims), lifetime=L.CONSTANT_COPY, location=loc)


def add_model(shape=(1, 4), operand_type=T.TENSOR_FLOAT32, scale=0.0, zero_point=0,
              out_shape=None) -> HalModel:
    """out = a + b (``out_shape`` may hold 0 for dimensions left unknown)."""
    values = _Values()
    io = dict(scale=scale, zero_point=zero_point)
    a = Operand(operand_type, shape, lifetime=L.SUBGRAPH_INPUT, **io)
    out = Operand(operand_type, shape if out_shape is None else out_shape, lifetime=L.SUBGRAPH_OUTPUT, **io)
    act = values.add(T.INT32, np.int32(0))
    graph = Subgraph((a, a, act, out), (Operation(Op.ADD, (0, 1, 2), (3,)),), (0, 1), (3,))
    return HalModel(graph, operand_values=bytes(values.blob))


def conv_model(weights: np.ndarray, bias: np.ndarray, hw=(8, 8)) -> HalModel:
    """CONV_2D (SAME padding, stride 1, NHWC) with constant weights and bias."""
    values = _Values()
    out_c, _, _, in_c = weights.shape
    x = Operand(T.TENSOR_FLOAT32, (1, *hw, in_c), lifetime=L.SUBGRAPH_INPUT)
    w = values.add(T.TENSOR_FLOAT32, weights.astype(np.float32), weights.shape)
    b = values.add(T.TENSOR_FLOAT32, bias.astype(np.float32), bias.shape)
    scalars = [values.add(T.INT32, np.int32(v)) for v in (PaddingCode.SAME, 1, 1, 0)]
    out = Operand(T.TENSOR_FLOAT32, (1, *hw, out_c), lifetime=L.SUBGRAPH_OUTPUT)
    operands = (x, w, b, *scalars, out)
    graph = Subgraph(operands, (Operation(Op.CONV_2D, tuple(range(7)), (7,)),), (0,), (7,))
    return HalModel(graph, operand_values=bytes(values.blob))


def make_request(model: HalModel, inputs, shared: bool = False, out_slack: int = 0):
    """One pool holding every input then every output.

    Returns (request, pool, outputs) where ``outputs`` are numpy views of the output regions.
    """
    graph = model.main
    ins = [np.ascontiguousarray(x) for x in inputs]
    out_sizes = [_dtype(graph.operands[i].type).itemsize * int(np.prod(graph.operands[i].dimensions))
                 + out_slack for i in graph.output_indexes]
    total = sum(x.nbytes for x in ins) + sum(out_sizes)
    pool = SharedPool(total) if shared else bytearray(total)
    view = pool.view if shared else memoryview(pool)
    offset, in_args, out_args, outs = 0, [], [], []
    for x in ins:
        view[offset:offset + x.nbytes] = x.tobytes()
        in_args.append(RequestArgument(pool_index=0, offset=offset, length=x.nbytes))
        offset += x.nbytes
    for index, size in zip(graph.output_indexes, out_sizes):
        operand = graph.operands[index]
        out_args.append(RequestArgument(pool_index=0, offset=offset, length=size))
        array = np.frombuffer(view, _dtype(operand.type), size // _dtype(operand.type).itemsize, offset)
        outs.append(array.reshape(operand.dimensions) if out_slack == 0 else array)
        offset += size
    return Request(tuple(in_args), tuple(out_args), (pool,)), pool, outs


def _dtype(operand_type):
    from nnscope.runtime.hal.types import numpy_dtype
    return numpy_dtype(operand_type)
