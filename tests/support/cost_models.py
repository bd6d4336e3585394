"""Tiny, valid models whose execution would cost a gigabyte or hours without the executor's
checks (issue 16, bug 8), and their requests: shared by the in-process executor tests and the
attacks on a real driver process."""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import (HalModel, Operand, OperandLifetime as L, OperandType as T, Operation,
                               OperationType as Op, PaddingCode, Subgraph)
from tests.runtime.drivers._hal import _Values, make_request

F32 = T.TENSOR_FLOAT32
HUGE_PAD = 2 ** 28  # 1 GiB of float32 once padded
BROADCAST = 16384  # [16384, 1] + [1, 16384]: 1 GiB of float32
POOL_WINDOW = 2 ** 26


def _graph(operands, operations, inputs, outputs, values: _Values) -> HalModel:
    return HalModel(Subgraph(tuple(operands), tuple(operations), inputs, outputs),
                    operand_values=bytes(values.blob))


def pad_model(pad: int = HUGE_PAD, chained: bool = False) -> HalModel:
    """``out = PAD(x [1, 4], [[0, 0], [0, pad]])``; ``chained``: ``out = ADD(PAD(x), 1)``, so the
    padded tensor is an intermediate."""
    values = _Values()
    x = Operand(F32, (1, 4), lifetime=L.SUBGRAPH_INPUT)
    paddings = values.add(T.TENSOR_INT32, np.int32([[0, 0], [0, pad]]), (2, 2))
    if not chained:
        out = Operand(F32, (0, 0), lifetime=L.SUBGRAPH_OUTPUT)
        return _graph((x, paddings, out), (Operation(Op.PAD, (0, 1), (2,)),), (0,), (2,), values)
    padded = Operand(F32, (0, 0), lifetime=L.TEMPORARY_VARIABLE)
    one = values.add(F32, np.float32([1.0]), (1,))
    act = values.add(T.INT32, np.int32(0))
    out = Operand(F32, (0, 0), lifetime=L.SUBGRAPH_OUTPUT)
    operations = (Operation(Op.PAD, (0, 1), (2,)), Operation(Op.ADD, (2, 3, 4), (5,)))
    return _graph((x, paddings, padded, one, act, out), operations, (0,), (5,), values)


def broadcast_add_model(size: int = BROADCAST) -> HalModel:
    """``out = a [size, 1] + b [1, size]`` with the output's dimensions left unknown."""
    values = _Values()
    a = Operand(F32, (size, 1), lifetime=L.SUBGRAPH_INPUT)
    b = Operand(F32, (1, size), lifetime=L.SUBGRAPH_INPUT)
    act = values.add(T.INT32, np.int32(0))
    out = Operand(F32, (0, 0), lifetime=L.SUBGRAPH_OUTPUT)
    return _graph((a, b, act, out), (Operation(Op.ADD, (0, 1, 2), (3,)),), (0, 1), (3,), values)


def max_pool_model(width: int = 8, window: int = POOL_WINDOW, op: Op = Op.MAX_POOL_2D) -> HalModel:
    """``out = MAX_POOL_2D(x [1, 1, width, 1])`` with a 1 x ``window`` window, SAME padding."""
    values = _Values()
    x = Operand(F32, (1, 1, width, 1), lifetime=L.SUBGRAPH_INPUT)
    scalars = [values.add(T.INT32, np.int32(v)) for v in (PaddingCode.SAME, 1, 1, window, 1, 0)]
    out = Operand(F32, (1, 1, width, 1), lifetime=L.SUBGRAPH_OUTPUT)
    return _graph((x, *scalars, out), (Operation(op, tuple(range(7)), (7,)),), (0,), (7,), values)


def small_output_request(model: HalModel, inputs, output_bytes: int = 16):
    """(request, pool, flat output view) with an output region of ``output_bytes`` bytes."""
    request, pool, outputs = make_request(model, inputs, out_slack=output_bytes)
    return request, pool, outputs[0]


def pad_inputs():
    return [np.float32([[1, 2, 3, 4]])]


def broadcast_inputs(size: int = BROADCAST):
    return [np.ones((size, 1), np.float32), np.ones((1, size), np.float32)]


def pool_inputs(width: int = 8):
    return [np.arange(width, dtype=np.float32).reshape(1, 1, width, 1)]


def tile_model(multiple: int = 2 ** 26) -> HalModel:
    """``out = TILE(x [1, 4], [1, multiple])``."""
    values = _Values()
    x = Operand(F32, (1, 4), lifetime=L.SUBGRAPH_INPUT)
    multiples = values.add(T.TENSOR_INT32, np.int32([1, multiple]), (2,))
    out = Operand(F32, (0, 0), lifetime=L.SUBGRAPH_OUTPUT)
    return _graph((x, multiples, out), (Operation(Op.TILE, (0, 1), (2,)),), (0,), (2,), values)


def resize_model(size: int = 2 ** 15) -> HalModel:
    """``out = RESIZE_BILINEAR(x [1, 2, 2, 1], width=height=size)``."""
    values = _Values()
    x = Operand(F32, (1, 2, 2, 1), lifetime=L.SUBGRAPH_INPUT)
    width, height = (values.add(T.INT32, np.int32(size)) for _ in range(2))
    out = Operand(F32, (0, 0, 0, 0), lifetime=L.SUBGRAPH_OUTPUT)
    return _graph((x, width, height, out), (Operation(Op.RESIZE_BILINEAR, (0, 1, 2), (3,)),), (0,), (3,),
                  values)
