"""Internal: an NNAPI model (one step) translated into a TFLite flatbuffer, operation by operation
with the translators of ``_writer_ops`` (the reverse of ``runtime.tflite``'s loader); what
``sample-litert`` prepares and claims.

Example::

    translation = translate(step_model)          # Untranslatable when an operation has no builtin
    supported(model, model.main.operations[0])   # one operation alone
"""
from __future__ import annotations

from nnscope.runtime.hal.types import HalModel, Operation
from nnscope.runtime.tflite._writer import CONSTANT_LIFETIMES, Translation, Untranslatable, Writer
from nnscope.runtime.tflite._writer_ops import TRANSLATORS


def translate(model: HalModel) -> Translation:
    """The TFLite flatbuffer of ``model.main``. Raises Untranslatable."""
    graph = model.main
    if model.referenced:
        raise Untranslatable("control flow (referenced subgraphs)")
    writer = Writer(model)
    inputs = [writer.tensor(i) for i in graph.input_indexes]
    for operation in graph.operations:
        _one(writer, operation, TRANSLATORS)
    outputs = [writer.tensor(i) for i in graph.output_indexes]
    if len(set(outputs)) != len(outputs) or set(inputs) & set(outputs):
        raise Untranslatable("a model output that is an input or another output")
    writer.out.inputs, writer.out.outputs = inputs, outputs
    quantized = any(t.type_name in ("UINT8", "INT8") for t in writer.out.tensors)
    return Translation(writer.out.serialize(), tuple(inputs), tuple(outputs), quantized)


def _one(writer: Writer, operation: Operation, translators) -> None:
    translate_one = translators.get(operation.type)
    if translate_one is None:
        raise Untranslatable(f"{operation.type.name} has no LiteRT builtin here")
    for index in operation.outputs:
        if writer.operand(index).lifetime in CONSTANT_LIFETIMES:
            raise Untranslatable("an operation writing a constant")
    try:
        translate_one(writer, operation)
    except (KeyError, IndexError, TypeError, ZeroDivisionError) as error:
        raise Untranslatable(f"{operation.type.name}: {type(error).__name__}: {error}") from None


def supported(model: HalModel, operation: Operation) -> bool:
    """Whether ``operation`` of ``model.main`` translates (alone) into LiteRT builtins."""
    try:
        _one(Writer(model), operation, TRANSLATORS)
    except (Untranslatable, ValueError):
        return False
    return True
