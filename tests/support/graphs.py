"""Hand-built HAL graphs for the partitioning and sub-model tests: :class:`GraphBuilder`, the
ADD/MUL/ADD :func:`chain` with inputs :data:`X` and :data:`Y`, and :func:`run_steps`."""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L,
                               OperandType as T, Operation, OperationType as Op, Subgraph)
from nnscope.runtime.ops.executor import CpuExecutor


class GraphBuilder:
    """Builds a HalModel operand by operand; constants go to values or to bytearray pools."""

    def __init__(self):
        self.operands: list[Operand] = []
        self.operations: list[Operation] = []
        self.values = bytearray()
        self.pools: list[bytearray] = []

    def tensor(self, dims=(2, 3), type_=T.TENSOR_FLOAT32, scale=0.0, zero_point=0) -> int:
        self.operands.append(Operand(type_, tuple(dims), scale, zero_point))
        return len(self.operands) - 1

    def const(self, value, type_=T.TENSOR_FLOAT32, pool=None, scale=0.0, zero_point=0) -> int:
        array = np.asarray(value, dtype=np.int32 if type_ == T.INT32 else np.float32)
        data = array.tobytes()
        if pool is None:
            self.values.extend(b"\0" * (-len(self.values) % 8))
            location, lifetime = DataLocation(-1, len(self.values), len(data)), L.CONSTANT_COPY
            self.values.extend(data)
        else:
            while len(self.pools) <= pool:
                self.pools.append(bytearray())
            location = DataLocation(pool, len(self.pools[pool]), len(data))
            lifetime = L.CONSTANT_REFERENCE
            self.pools[pool].extend(data)
        self.operands.append(Operand(type_, array.shape, scale, zero_point, lifetime, location))
        return len(self.operands) - 1

    def op(self, type_: Op, inputs, outputs) -> int:
        self.operations.append(Operation(type_, tuple(inputs), tuple(outputs)))
        return len(self.operations) - 1

    def binary(self, type_: Op, a: int, b: int, out: int | None = None, dims=None) -> int:
        out = self.tensor(dims or self.operands[a].dimensions,
                          self.operands[a].type, self.operands[a].scale,
                          self.operands[a].zero_point) if out is None else out
        self.op(type_, (a, b, self.const(0, T.INT32)), (out,))
        return out

    def build(self, inputs, outputs, relax=False) -> HalModel:
        operands = list(self.operands)
        for index, lifetime in [(i, L.SUBGRAPH_INPUT) for i in inputs] + \
                               [(o, L.SUBGRAPH_OUTPUT) for o in outputs]:
            operand = operands[index]
            operands[index] = Operand(operand.type, operand.dimensions, operand.scale,
                                      operand.zero_point, lifetime)
        main = Subgraph(tuple(operands), tuple(self.operations), tuple(inputs), tuple(outputs))
        return HalModel(main, operand_values=bytes(self.values),
                        pools=tuple(self.pools), relax_float32_to_float16=relax)


def run_steps(steps, model: HalModel, inputs) -> list[np.ndarray]:
    """Run (sub-model, input operands, output operands) steps in order, routing by operand."""
    values = dict(zip(model.main.input_indexes, inputs))
    for sub_model, step_inputs, step_outputs in steps:
        results = CpuExecutor(sub_model).run([values[o] for o in step_inputs])
        values.update(zip(step_outputs, results))
    return [values[o] for o in model.main.output_indexes]


def chain():
    """out = ((x + c) * y) + c, constant c in operand_values: ops ADD, MUL, ADD."""
    g = GraphBuilder()
    x, y = g.tensor(), g.tensor()
    c = g.const(np.full((2, 3), 0.5))
    t1 = g.binary(Op.ADD, x, c)
    t2 = g.binary(Op.MUL, t1, y)
    out = g.binary(Op.ADD, t2, c)
    return g.build([x, y], [out]), (x, y, c, t1, t2, out)


X = np.arange(6, dtype=np.float32).reshape(2, 3)
Y = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
