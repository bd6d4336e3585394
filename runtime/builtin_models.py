"""Built-in models for ``nnscope run`` and the benchmarks, built through the public Model API.

:func:`mobilenet` is a MobileNet-v1-style float32 network: a strided 3x3 CONV_2D stem, then
depthwise-separable blocks (3x3 DEPTHWISE_CONV_2D + 1x1 CONV_2D, ReLU6 fused), a global
AVERAGE_POOL_2D, a FULLY_CONNECTED classifier and SOFTMAX. Weights are deterministic (seeded
numpy RNG, He-scaled). :func:`tiny_add` is ADD of two float32 [1, 4] tensors.
:func:`conv_pad_chain` alternates a 3x3 CONV_2D (ReLU fused) with a PAD: ``sample-minimal``
has no PAD, so across every device the default plan has one step per operation.

Example:
    >>> model = mobilenet()
    >>> model.name, len(model.operations), model.operands[model.inputs[0]].dimensions
    ('mobilenet_v1_0.5_224', 31, (1, 224, 224, 3))
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import FuseCode, OperandType as T, OperationType as Op, PaddingCode
from nnscope.runtime.model import Model

#: (output channels, stride) of MobileNet v1's depthwise-separable blocks.
MOBILENET_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1),
                    (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1))


class _Builder:
    def __init__(self, model: Model, seed: int):
        self.model = model
        self.rng = np.random.default_rng(seed)
        self._scalars: dict[int, int] = {}

    def tensor(self, shape, value=None) -> int:
        index = self.model.add_operand(T.TENSOR_FLOAT32, shape)
        if value is not None:
            self.model.set_operand_value(index, np.asarray(value, np.float32))
        return index

    def scalar(self, value: int) -> int:
        if value not in self._scalars:
            self._scalars[value] = self.model.add_operand(T.INT32)
            self.model.set_operand_value(self._scalars[value], value)
        return self._scalars[value]

    def weights(self, shape, fan_in: int) -> int:
        data = self.rng.standard_normal(shape).astype(np.float32) * np.float32(np.sqrt(2.0 / fan_in))
        return self.tensor(shape, data)

    def conv(self, x: int, shape, channels: int, kernel: int, stride: int) -> tuple[int, tuple]:
        n, h, w, c = shape
        out_shape = (n, -(-h // stride), -(-w // stride), channels)
        filt = self.weights((channels, kernel, kernel, c), kernel * kernel * c)
        bias = self.tensor((channels,), np.zeros(channels, np.float32))
        out = self.tensor(out_shape)
        self.model.add_operation(Op.CONV_2D, [x, filt, bias, self.scalar(PaddingCode.SAME),
                                              self.scalar(stride), self.scalar(stride),
                                              self.scalar(FuseCode.RELU6)], [out])
        return out, out_shape

    def depthwise(self, x: int, shape, stride: int) -> tuple[int, tuple]:
        n, h, w, c = shape
        out_shape = (n, -(-h // stride), -(-w // stride), c)
        filt = self.weights((1, 3, 3, c), 9)
        bias = self.tensor((c,), np.zeros(c, np.float32))
        out = self.tensor(out_shape)
        self.model.add_operation(Op.DEPTHWISE_CONV_2D, [x, filt, bias, self.scalar(PaddingCode.SAME),
                                                        self.scalar(stride), self.scalar(stride),
                                                        self.scalar(1), self.scalar(FuseCode.RELU6)],
                                 [out])
        return out, out_shape


def mobilenet(size: int = 224, alpha: float = 0.5, classes: int = 1000, seed: int = 0) -> Model:
    """A finished MobileNet-v1-style model (input [1, size, size, 3], output [1, classes]).

    Args:
        size: Input height and width (multiple of 32).
        alpha: Width multiplier applied to every layer's channels.
        classes: Classifier outputs.
        seed: Seed of the weight RNG (same seed, same weights).
    """
    model = Model(f"mobilenet_v1_{alpha:g}_{size}")
    b = _Builder(model, seed)
    shape = (1, size, size, 3)
    image = b.tensor(shape)
    x, shape = b.conv(image, shape, max(8, int(32 * alpha)), 3, 2)
    for channels, stride in MOBILENET_BLOCKS:
        x, shape = b.depthwise(x, shape, stride)
        x, shape = b.conv(x, shape, max(8, int(channels * alpha)), 1, 1)
    _, h, w, c = shape
    pooled = b.tensor((1, 1, 1, c))
    model.add_operation(Op.AVERAGE_POOL_2D, [x, b.scalar(PaddingCode.VALID), b.scalar(1), b.scalar(1),
                                             b.scalar(w), b.scalar(h), b.scalar(FuseCode.NONE)], [pooled])
    flat = b.tensor((1, c))
    shape_operand = model.add_operand(T.TENSOR_INT32, (2,))
    model.set_operand_value(shape_operand, np.array([1, c], np.int32))
    model.add_operation(Op.RESHAPE, [pooled, shape_operand], [flat])
    logits = b.tensor((1, classes))
    model.add_operation(Op.FULLY_CONNECTED, [flat, b.weights((classes, c), c),
                                             b.tensor((classes,), np.zeros(classes, np.float32)),
                                             b.scalar(FuseCode.NONE)], [logits])
    probabilities = b.tensor((1, classes))
    beta = model.add_operand(T.FLOAT32)
    model.set_operand_value(beta, np.float32(1.0))
    model.add_operation(Op.SOFTMAX, [logits, beta], [probabilities])
    model.identify_inputs_and_outputs([image], [probabilities])
    model.finish()
    return model


def tiny_add(shape=(1, 4)) -> Model:
    """A finished model computing ``a + b`` for two float32 tensors of ``shape``."""
    model = Model("tiny_add")
    a = model.add_operand(T.TENSOR_FLOAT32, shape)
    b = model.add_operand(T.TENSOR_FLOAT32, shape)
    act = model.add_operand(T.INT32)
    out = model.add_operand(T.TENSOR_FLOAT32, shape)
    model.set_operand_value(act, FuseCode.NONE)
    model.add_operation(Op.ADD, [a, b, act], [out])
    model.identify_inputs_and_outputs([a, b], [out])
    model.finish()
    return model


def conv_pad_chain(operations: int = 90, size: int = 16, channels: int = 8, seed: int = 0) -> Model:
    """A finished chain of ``operations`` operations on [1, size, size, channels] float32:
    CONV_2D (3x3, SAME, stride 1, ReLU) at even positions, PAD (by zero) at odd ones."""
    model = Model(f"conv_pad_chain_{operations}")
    b = _Builder(model, seed)
    shape = (1, size, size, channels)
    first = x = b.tensor(shape)
    zero_pads = model.add_operand(T.TENSOR_INT32, (4, 2))
    model.set_operand_value(zero_pads, np.zeros((4, 2), np.int32))
    for position in range(operations):
        out = b.tensor(shape)
        if position % 2:
            model.add_operation(Op.PAD, [x, zero_pads], [out])
        else:
            weights = b.tensor((channels, 3, 3, channels),
                               b.rng.standard_normal((channels, 3, 3, channels)) * (2 / (9 * channels)) ** 0.5)
            bias = b.tensor((channels,), np.full(channels, 0.01))
            model.add_operation(Op.CONV_2D, [x, weights, bias, b.scalar(PaddingCode.SAME), b.scalar(1),
                                             b.scalar(1), b.scalar(FuseCode.RELU)], [out])
        x = out
    model.identify_inputs_and_outputs([first], [x])
    model.finish()
    return model


def sample_input(model: Model, seed: int = 0) -> list[np.ndarray]:
    """Deterministic random inputs in [-1, 1] for every model input (known shapes only)."""
    from nnscope.runtime.hal.types import numpy_dtype  # noqa: PLC0415
    rng = np.random.default_rng(seed)
    arrays = []
    for index in model.inputs:
        operand = model.operands[index]
        dims = tuple(d or 1 for d in operand.dimensions)
        arrays.append((rng.uniform(-1, 1, dims)).astype(numpy_dtype(operand.type)))
    return arrays


BUILTIN = {"mobilenet": mobilenet, "tiny_add": tiny_add}
