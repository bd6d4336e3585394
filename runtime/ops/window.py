"""The 2-D window geometry shared by convolution, pooling and the layout-moving operations.

NNAPI's explicit (left, right, top, bottom) and implicit (SAME/VALID code) padding, strides,
dilation and the optional NCHW ``layout`` input (:func:`is_implicit`, :func:`read_window`),
the strided tap views convolutions are evaluated on (:func:`window_taps`), the output size
(:func:`checked_output_hw`) and the NHWC layout helpers. AOSP keeps the same in
``common/OperationsUtils.cpp`` (``calculateExplicitPadding``, ``computeOutSize``).

Example:
    >>> import numpy as np
    >>> x = np.zeros((1, 4, 4, 1), np.float32)
    >>> window = read_window([x, 2, 2, 2, 2, 2, 0], first=1,
    ...                      names=("stride_w", "stride_h", "filter_w", "filter_h", "fuse"),
    ...                      explicit=False, in_hw=(4, 4), kernel=(2, 2))
    >>> window, checked_output_hw(window, (4, 4))
    (Window(kernel=(2, 2), stride=(2, 2), dilation=(1, 1), pads=(0, 0, 0, 0)), (2, 2))
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType, PaddingCode
from nnscope.runtime.ops._common import constant_pad, expect_type
from nnscope.runtime.ops.registry import OpValidationError

_T = OperandType
_WINDOWS: dict = {}  # read_window's memo
_WINDOWS_KEPT = 1024


class Window(NamedTuple):
    """A resolved 2-D window: (height, width) pairs and pads (top, bottom, left, right)."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int, int, int]

    def output_hw(self, in_hw: Sequence[int]) -> tuple[int, int]:
        """NNAPI ``computeOutSize`` for both spatial dimensions."""
        sizes = []
        for axis in (0, 1):
            effective = (self.kernel[axis] - 1) * self.dilation[axis] + 1
            padded = in_hw[axis] + self.pads[2 * axis] + self.pads[2 * axis + 1]
            sizes.append((padded - effective + self.stride[axis]) // self.stride[axis])
        return sizes[0], sizes[1]


def is_implicit(count: int, operands: Sequence[Operand], implicit_count: int) -> bool:
    """AOSP's rule: implicit padding if exactly ``implicit_count`` inputs, or if the input at
    that position (layout in the implicit form, an INT32 in the explicit one) is a BOOL."""
    return count == implicit_count or (
        count > implicit_count and operands[implicit_count].type == _T.BOOL)


def implicit_padding(in_size: int, stride: int, dilation: int, kernel: int,
                     code: int) -> tuple[int, int]:
    """AOSP ``calculateExplicitPadding``: (head, tail) for a SAME/VALID padding code."""
    if code not in (PaddingCode.SAME, PaddingCode.VALID):
        raise OpValidationError(f"unknown implicit padding code {code}")
    if code == PaddingCode.VALID:
        return 0, 0
    effective = (kernel - 1) * dilation + 1
    out_size = (in_size + stride - 1) // stride
    total = max((out_size - 1) * stride + effective - in_size, 0)
    return total // 2, total - total // 2


def read_scalars(inputs: Sequence, first: int, names: Sequence[str], explicit: bool) -> dict:
    """Name the scalar inputs from position ``first``: ``pad`` (4-tuple l, r, t, b, or the
    implicit code) followed by ``names``; omitted trailing/optional inputs are absent."""
    pad_count = 4 if explicit else 1
    pad = tuple(inputs[first:first + pad_count])
    values = {name: value for name, value in zip(names, inputs[first + pad_count:])
              if value is not None}
    values["pad"] = pad if explicit else pad[0]
    return values


def read_window(inputs: Sequence, first: int, names: Sequence[str], explicit: bool,
                in_hw: Sequence[int], kernel: Sequence[int]) -> Window:
    """Resolve strides, dilation and padding of a conv/pool signature into a :class:`Window`
    (remembered per signature: a model runs the same few windows every execution)."""
    key = (first, names, explicit, *in_hw, *kernel, *inputs[first:])
    try:
        return _WINDOWS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable scalar input
        return _resolve_window(inputs, first, names, explicit, in_hw, kernel)
    if len(_WINDOWS) >= _WINDOWS_KEPT:
        _WINDOWS.clear()
    window = _WINDOWS[key] = _resolve_window(inputs, first, names, explicit, in_hw, kernel)
    return window


def _resolve_window(inputs: Sequence, first: int, names: Sequence[str], explicit: bool,
                    in_hw: Sequence[int], kernel: Sequence[int]) -> Window:
    values = read_scalars(inputs, first, names, explicit)
    stride = (int(values["stride_h"]), int(values["stride_w"]))
    dilation = (int(values.get("dilation_h", 1)), int(values.get("dilation_w", 1)))
    if min(stride) < 1 or min(dilation) < 1:
        raise OpValidationError(f"bad stride {stride} or dilation {dilation}")
    if explicit:
        left, right, top, bottom = (int(p) for p in values["pad"])
        pads = (top, bottom, left, right)
    else:
        code = int(values["pad"])
        pads = (implicit_padding(in_hw[0], stride[0], dilation[0], kernel[0], code)
                + implicit_padding(in_hw[1], stride[1], dilation[1], kernel[1], code))
    if min(pads) < 0:
        raise OpValidationError(f"negative padding {pads}")
    return Window((int(kernel[0]), int(kernel[1])), stride, dilation, pads)


def window_taps(padded: np.ndarray, window: Window,
                out_hw: Sequence[int]) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield (kh, kw, view) where view[n, oh, ow, c] = padded[n, oh*sh + kh*dh, ow*sw + kw*dw, c]."""
    (sh, sw), (dh, dw) = window.stride, window.dilation
    for kh in range(window.kernel[0]):
        for kw in range(window.kernel[1]):
            y0, x0 = kh * dh, kw * dw
            yield kh, kw, padded[:, y0:y0 + (out_hw[0] - 1) * sh + 1:sh,
                                 x0:x0 + (out_hw[1] - 1) * sw + 1:sw, :]


def pad_nhwc(x: np.ndarray, window: Window, fill) -> np.ndarray:
    """``x`` inside a border of ``fill`` (the window's pads)."""
    top, bottom, left, right = window.pads
    if not (top or bottom or left or right):
        return x
    return constant_pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), fill)


def checked_output_hw(window: Window, in_hw: Sequence[int]) -> tuple[int, int]:
    out_hw = window.output_hw(in_hw)
    if min(out_hw) <= 0:
        raise OpValidationError(f"window {window} gives an empty output for input {tuple(in_hw)}")
    return out_hw


def to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return x.transpose(0, 2, 3, 1) if nchw else x


def from_nhwc(y: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2)) if nchw else y


def expect_scalars(operands: Sequence[Operand], first: int, names: Sequence[str],
                   explicit: bool) -> None:
    """Check the scalar inputs from ``first`` on: INT32 everywhere but a BOOL ``layout``."""
    kinds = ["pad"] * (4 if explicit else 1) + list(names)
    for index in range(first, len(operands)):
        wanted = _T.BOOL if kinds[index - first] == "layout" else _T.INT32
        expect_type(operands, index, wanted)
