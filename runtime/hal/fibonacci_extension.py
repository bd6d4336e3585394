"""The example extension ``com.example.fibonacci`` (AOSP ``extensions/example/fibonacci``).

What an application and the ``sample-fibonacci`` driver both compile against, as
``FibonacciExtension.h``: the extension name, its operand types ``EXAMPLE_INT64`` (a signed 64-bit
scalar) and ``EXAMPLE_TENSOR_QUANT64_ASYMM`` (a tensor of unsigned 64-bit integers whose real
value is ``(q - zeroPoint) * scale``, with :class:`ExampleQuant64AsymmParams` attached as the
operand's extension data), and its operation ``FIBONACCI`` (AOSP: ``EXAMPLE_FIBONACCI``):

* input 0: a scalar n, ``EXAMPLE_INT64`` or a one-element ``TENSOR_FLOAT32``;
* output 0: a 1-D tensor of size n, ``EXAMPLE_TENSOR_QUANT64_ASYMM`` or ``TENSOR_FLOAT32``,
  holding the first n Fibonacci numbers 1, 1, 2, 3, 5, ... (quantized: ``F / scale + zeroPoint``).

Example:
    >>> params = ExampleQuant64AsymmParams(0.5, 10)
    >>> ExampleQuant64AsymmParams.unpack(params.pack()) == params, len(params.pack())
    (True, 16)
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from nnscope.runtime.hal.extension_headers import ExtensionHeader, register_header

EXAMPLE_FIBONACCI_EXTENSION_NAME = "com.example.fibonacci"
EXAMPLE_INT64 = 0
EXAMPLE_TENSOR_QUANT64_ASYMM = 1
FIBONACCI = 0
EXAMPLE_FIBONACCI = FIBONACCI  # AOSP's spelling

_PARAMS = struct.Struct("<dq")  # struct ExampleQuant64AsymmParams { double scale; int64_t zeroPoint; }

HEADER = register_header(ExtensionHeader(
    EXAMPLE_FIBONACCI_EXTENSION_NAME,
    {EXAMPLE_INT64: "EXAMPLE_INT64", EXAMPLE_TENSOR_QUANT64_ASYMM: "EXAMPLE_TENSOR_QUANT64_ASYMM"},
    {FIBONACCI: "FIBONACCI"}))


@dataclass(frozen=True)
class ExampleQuant64AsymmParams:
    """Quantization of an ``EXAMPLE_TENSOR_QUANT64_ASYMM`` operand (its extension data)."""

    scale: float
    zero_point: int

    SIZE = _PARAMS.size

    def pack(self) -> bytes:
        return _PARAMS.pack(self.scale, self.zero_point)

    @classmethod
    def unpack(cls, data: bytes) -> ExampleQuant64AsymmParams:
        """Raises ValueError unless ``data`` is exactly one packed struct."""
        if data is None or len(data) != _PARAMS.size:
            raise ValueError(f"ExampleQuant64AsymmParams needs {_PARAMS.size} bytes, "
                             f"got {None if data is None else len(data)}")
        return cls(*_PARAMS.unpack(data))
