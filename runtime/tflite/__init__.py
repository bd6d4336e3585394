"""TFLite model import: a .tflite flatbuffer as an NNAPI ``HalModel``.

``load_tflite(path)`` reads the model with the ``tflite`` package (generated flatbuffer schema
code), maps tensors to operands (shapes, types, quantisation, per-channel scales), copies
constants into ``operand_values`` and maps builtin operators to NNAPI operations with their
options as scalar operands (``supported_operators()`` lists the builtins; ``_lowered_operators``
those that become several NNAPI operations; ``_hard_swish`` HARD_SWISH, built from MUL and ADD
when ``convert_tflite`` is given a feature level below 30). Sparse constants are densified at
load time. An operator with no NNAPI form raises :class:`UnsupportedOperator` naming it; a
truncated or corrupt file raises :class:`TfliteFormatError` (every offset and length is checked
against the file before anything is read). Both are ValueErrors of one line.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.tflite import convert_tflite, load_tflite
    >>> from nnscope.runtime.ops.executor import CpuExecutor
    >>> model, inputs, outputs = load_tflite("tests/data/models/face_detection_short_range.tflite")  # from a clone  # doctest: +SKIP
    >>> regressors, scores = CpuExecutor(model).run([image])  # needs the model above  # doctest: +SKIP

    The same with a flatbuffer in memory (here our own translation of a tiny ADD model):

    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.tflite._translate import translate
    >>> model, inputs, outputs = convert_tflite(translate(tiny_add().to_hal()).flatbuffer)
    >>> inputs, outputs
    (['t0', 't1'], ['t3'])
    >>> x = np.ones((1, 4), np.float32)
    >>> [array.tolist() for array in CpuExecutor(model).run([x, x])]
    [[[2.0, 2.0, 2.0, 2.0]]]
"""
from nnscope.runtime.tflite._builder import UnsupportedOperator
from nnscope.runtime.tflite._verify import TfliteFormatError
from nnscope.runtime.tflite.loader import convert_tflite, load_tflite, supported_operators

__all__ = ["TfliteFormatError", "UnsupportedOperator", "convert_tflite", "load_tflite",
           "supported_operators"]
