"""Example models using the ``com.example.fibonacci`` extension (``nnscope run --example fibonacci``).

:func:`fibonacci` is AOSP's example test: FIBONACCI from an EXAMPLE_INT64 n to an
EXAMPLE_TENSOR_QUANT64_ASYMM output with ``ExampleQuant64AsymmParams(scale, zero_point)``.
:func:`fibonacci_mixed` mixes ordinary and extension operations, so it partitions across
``sample-fibonacci`` and the other devices::

    n0 [1] --ADD(n0, one)--> n [1] --FIBONACCI--> f [n] (float32) --MUL(f, k)--> out [n]

Both need a program the extensions allowlist allows (see ``runtime._allowlist``).
:data:`EXAMPLES` are what ``nnscope run --example`` runs: ``fibonacci`` (the mixed model, n = 10)
and ``fibonacci-quant64`` (AOSP's quantized example, n = 10).

Example:
    >>> model = fibonacci_mixed(5)  # asks every device for the extension: starts all drivers  # doctest: +SKIP
    >>> [op.type.name for op in model.operations]  # needs the model above  # doctest: +SKIP
    ['ADD', 'com.example.fibonacci:FIBONACCI', 'MUL']
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal import fibonacci_extension as fx
from nnscope.runtime.hal.types import FuseCode, OperandType as T, OperationType as Op
from nnscope.runtime.model import Model

NAME = fx.EXAMPLE_FIBONACCI_EXTENSION_NAME


def fibonacci(scale: float = 0.5, zero_point: int = 10) -> Model:
    """A finished model: input n (EXAMPLE_INT64, 8 bytes), output the first n Fibonacci
    numbers quantized as ``F / scale + zero_point`` (EXAMPLE_TENSOR_QUANT64_ASYMM, uint64)."""
    model = Model("fibonacci")
    n = model.add_operand(model.get_extension_operand_type(NAME, fx.EXAMPLE_INT64))
    out = model.add_operand(model.get_extension_operand_type(NAME, fx.EXAMPLE_TENSOR_QUANT64_ASYMM), (0,))
    model.set_operand_extension_data(out, fx.ExampleQuant64AsymmParams(scale, zero_point).pack())
    model.add_operation(model.get_extension_operation_type(NAME, fx.FIBONACCI), [n], [out])
    model.identify_inputs_and_outputs([n], [out])
    model.finish()
    return model


def fibonacci_mixed(n: int, factor: float = 2.0) -> Model:
    """A finished model: ``out = FIBONACCI(n0 + 1) * factor`` in float32; input n0 [1] (so
    ``n = n0 + 1``), output [n]."""
    model = Model("fibonacci_mixed")
    n0, one = model.add_operand(T.TENSOR_FLOAT32, (1,)), model.add_operand(T.TENSOR_FLOAT32, (1,))
    act = model.add_operand(T.INT32)
    count = model.add_operand(T.TENSOR_FLOAT32, (1,))
    numbers = model.add_operand(T.TENSOR_FLOAT32, (n,))
    k, out = model.add_operand(T.TENSOR_FLOAT32, (1,)), model.add_operand(T.TENSOR_FLOAT32, (n,))
    model.set_operand_value(one, np.ones(1, np.float32))
    model.set_operand_value(act, FuseCode.NONE)
    model.set_operand_value(k, np.full(1, factor, np.float32))
    model.add_operation(Op.ADD, [n0, one, act], [count])
    model.add_operation(model.get_extension_operation_type(NAME, fx.FIBONACCI), [count], [numbers])
    model.add_operation(Op.MUL, [numbers, k, act], [out])
    model.identify_inputs_and_outputs([n0], [out])
    model.finish()
    return model


def fibonacci_input(n: int) -> np.ndarray:
    """The bytes of an EXAMPLE_INT64 n, as a numpy int64 scalar array."""
    return np.array(n, np.int64)


def _fibonacci_example():
    return fibonacci(), [fibonacci_input(10)], [np.zeros(10, np.uint64)]


def _mixed_example():
    return fibonacci_mixed(10), [np.array([9], np.float32)], [np.zeros(10, np.float32)]


#: ``nnscope run --example NAME``: a builder of (finished model, inputs, output buffers).
EXAMPLES = {"fibonacci": _mixed_example, "fibonacci-quant64": _fibonacci_example}
