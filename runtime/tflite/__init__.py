"""TFLite model import: a .tflite flatbuffer as an NNAPI ``HalModel``.

``load_tflite(path)`` reads the model with the ``tflite`` package (generated flatbuffer schema
code), maps tensors to operands (shapes, types, quantisation, per-channel scales), copies
constants into ``operand_values`` and maps builtin operators to NNAPI operations with their
options as scalar operands (``supported_operators()`` lists the builtins; ``_lowered_operators``
those that become several NNAPI operations). Sparse constants are densified at load time. An
operator with no NNAPI form raises :class:`UnsupportedOperator` naming it.

Example:
    >>> from nnscope.runtime.tflite import load_tflite
    >>> from nnscope.runtime.ops.executor import CpuExecutor
    >>> model, inputs, outputs = load_tflite("face_detection_short_range.tflite")  # doctest: +SKIP
    >>> regressors, scores = CpuExecutor(model).run([image])                      # doctest: +SKIP
"""
from nnscope.runtime.tflite._builder import UnsupportedOperator
from nnscope.runtime.tflite.loader import convert_tflite, load_tflite, supported_operators

__all__ = ["UnsupportedOperator", "convert_tflite", "load_tflite", "supported_operators"]
