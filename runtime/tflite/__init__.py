"""TFLite model import: a .tflite flatbuffer as an NNAPI ``HalModel``.

``load_tflite(path)`` reads the model with the ``tflite`` package (generated flatbuffer schema
code), maps tensors to operands (shapes, types, quantisation, per-channel scales), copies
constants into ``operand_values`` and maps builtin operators to NNAPI operations with their
options as scalar operands (see ``_operators.CONVERTERS`` for the supported set).

Example:
    >>> from runtime.tflite import load_tflite
    >>> from runtime.ops.executor import CpuExecutor
    >>> model, inputs, outputs = load_tflite("face_detection_short_range.tflite")  # doctest: +SKIP
    >>> regressors, scores = CpuExecutor(model).run([image])                      # doctest: +SKIP
"""
from runtime.tflite.loader import convert_tflite, load_tflite

__all__ = ["convert_tflite", "load_tflite"]
