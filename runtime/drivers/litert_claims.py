"""What ``sample-litert`` claims in ``getSupportedOperations``: an operation that translates
into LiteRT builtins *and* that LiteRT accepts.

:class:`Claims` translates each operation alone (``runtime.tflite._writer.supported``), then
builds a LiteRT interpreter of it (its non-constant inputs as the graph's inputs, its outputs as
outputs) and allocates its tensors, as ``prepareModel`` would: a kernel or XNNPACK refusing the
operation's shapes or quantisation (say, a quantized CONCATENATION whose scales differ), or
output shapes other than the declared ones (which NNAPI rejects), make it unclaimed rather than
a failed or wrong preparation later. The verdict is remembered per signature (the
operation type, its operands' types, dimensions, quantisation and scalar values; not the
constant tensors' values), at most :data:`MAX_REMEMBERED` of them.

Example:
    >>> from nnscope.runtime.builtin_models import conv_pad_chain
    >>> model = conv_pad_chain(operations=3, size=4, channels=2).to_hal()  # CONV_2D, PAD, CONV_2D
    >>> claims = Claims(threads=1)
    >>> [claims.claims(model, op) for op in model.main.operations]
    [True, True, True]
"""
from __future__ import annotations

import dataclasses

from nnscope.runtime.hal.types import HalModel, Operation, OperandLifetime as L, Subgraph, is_scalar
from nnscope.runtime.ops.executor import read_constant
from nnscope.runtime.drivers.litert_engine import LiteRtEngine
from nnscope.runtime.tflite._translate import supported, translate
from nnscope.runtime.tflite._writer import Untranslatable

MAX_REMEMBERED = 4096
_CONSTANT = (L.CONSTANT_COPY, L.CONSTANT_REFERENCE)


class Claims:
    """The remembered verdicts of one driver."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._verdicts: dict[tuple, bool] = {}

    def claims(self, model: HalModel, operation: Operation) -> bool:
        if not supported(model, operation):
            return False
        key = _signature(model, operation)
        verdict = self._verdicts.get(key)
        if verdict is None:
            if len(self._verdicts) >= MAX_REMEMBERED:
                self._verdicts.clear()
            verdict = self._verdicts[key] = _builds(model, operation, self.threads)
        return verdict


def _signature(model: HalModel, operation: Operation) -> tuple:
    operands = model.main.operands
    parts = [operation.type]
    for index in (*operation.inputs, *operation.outputs):
        o = operands[index]
        value = read_constant(model, o) if is_scalar(o.type) and o.lifetime in _CONSTANT else None
        parts.append((o.type, o.dimensions, o.scale, o.zero_point, o.channel_quant,
                      o.lifetime in _CONSTANT, o.lifetime == L.NO_VALUE, value))
    return tuple(parts)


def _alone(model: HalModel, operation: Operation) -> HalModel:
    """``operation`` as the only one of a model: the same operands, its non-constant inputs as
    the model's inputs and its outputs as outputs."""
    operands = list(model.main.operands)
    inputs = tuple(i for i in dict.fromkeys(operation.inputs)
                   if operands[i].lifetime not in (*_CONSTANT, L.NO_VALUE))
    for index in inputs:
        operands[index] = dataclasses.replace(operands[index], lifetime=L.SUBGRAPH_INPUT)
    for index in operation.outputs:
        operands[index] = dataclasses.replace(operands[index], lifetime=L.SUBGRAPH_OUTPUT)
    main = Subgraph(tuple(operands), (operation,), inputs, tuple(operation.outputs))
    return dataclasses.replace(model, main=main)


def _builds(model: HalModel, operation: Operation, threads: int) -> bool:
    """Whether LiteRT builds and allocates the operation alone (engine as ``prepareModel``'s)."""
    try:
        engine = LiteRtEngine(translate(_alone(model, operation)), threads)
    except (Untranslatable, RuntimeError, ValueError):
        return False
    operands = model.main.operands
    if any(0 in operands[i].dimensions for i in operation.inputs if operands[i].dimensions):
        return True  # shapes known only at execution
    computed = [tuple(int(d) for d in detail["shape"]) for detail in engine.interpreter.get_output_details()]
    return all(len(c) == len(operands[i].dimensions) and all(d in (0, e) for d, e in
                                                              zip(operands[i].dimensions, c))
               for i, c in zip(operation.outputs, computed))
