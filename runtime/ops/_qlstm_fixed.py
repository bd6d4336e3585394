"""gemmlowp 16-bit fixed point for the quantized LSTM kernels (gemmlowp ``fixedpoint.h``).

Values are int16 raw integers held in int64 numpy arrays; ``bits`` is the number of integer bits
of the format (``FixedPoint<int16_t, bits>``: raw / 2**(15 - bits)). Plain adds and negations
wrap to int16 as in C++, multiplications are saturating rounding doubling high multiplies, and
``logistic``/``tanh`` follow gemmlowp's polynomial/Newton-Raphson evaluation bit for bit.
:func:`inv_sqrt_multiplier` is TFLite's ``GetInvSqrtQuantizedMultiplierExp`` (int32).

Example:
    >>> import numpy as np
    >>> logistic(np.array([0, 4096, -4096]), bits=3).tolist()   # 0, 1.0, -1.0 in Q3.12
    [16384, 23952, 8815]
    >>> tanh(np.array([0, 4096]), bits=3).tolist()   # tanh(1.0) = 0.7616 in Q0.15
    [0, 24964]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.ops._common import rounding_divide_by_pot

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def wrap16(x) -> np.ndarray:
    """C++ narrowing of an int to int16 (two's complement wrap)."""
    return ((np.asarray(x, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def trunc_div(x, divisor: int):
    """C++ integer division (toward zero) of int64 arrays by a positive divisor."""
    x = np.asarray(x, np.int64)
    return np.where(x >= 0, x // divisor, -((-x) // divisor))


def srdhm16(a, b) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` for int16 (element-wise, arrays or ints)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    product = a * b
    nudge = np.where(product >= 0, 1 << 14, 1 - (1 << 14))
    high = trunc_div(product + nudge, 1 << 15)
    return np.where((a == b) & (a == INT16_MIN), INT16_MAX, high)


def srdhm32(a: int, b: int) -> int:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` for two int32 Python ints."""
    if a == b == INT32_MIN:
        return INT32_MAX
    product = a * b
    total = product + ((1 << 30) if product >= 0 else 1 - (1 << 30))
    return total // (1 << 31) if total >= 0 else -((-total) // (1 << 31))


def multiply_by_pot(x, exponent: int, total_bits: int = 16) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT``: saturating left shift or rounding right
    shift of signed ``total_bits`` integers."""
    x = np.asarray(x, np.int64)
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    if exponent == 0:
        return x
    lo, hi = -(1 << (total_bits - 1)), (1 << (total_bits - 1)) - 1
    threshold = (1 << (total_bits - 1 - exponent)) - 1
    shifted = np.clip(x * (1 << exponent), lo, hi)
    return np.where(x > threshold, hi, np.where(x < -threshold, lo, shifted))


def rescale(x, src_bits: int, dst_bits: int) -> np.ndarray:
    """gemmlowp ``Rescale<dst>`` of a Q``src_bits`` int16 value."""
    return multiply_by_pot(x, src_bits - dst_bits)


def saturating_add16(a, b) -> np.ndarray:
    return np.clip(np.asarray(a, np.int64) + np.asarray(b, np.int64), INT16_MIN, INT16_MAX)


def _constant(raw32: int) -> int:
    """gemmlowp's int32 constant initializer narrowed to int16 (rounding shift by 16)."""
    return int(rounding_divide_by_pot(np.int64(raw32), 16))


def _one(bits: int) -> int:
    return INT16_MAX if bits == 0 else 1 << (15 - bits)


# --------------------------------------------------------------------------- exp
def _exp_on_interval_between_negative_one_quarter_and_0_excl(a: np.ndarray) -> np.ndarray:
    constant_term, one_third = _constant(1895147668), _constant(715827883)
    x = wrap16(a + (1 << 12))  # a + 1/8
    x2 = srdhm16(x, x)
    x3 = srdhm16(x2, x)
    x4 = srdhm16(x2, x2)
    x4_over_4 = multiply_by_pot(x4, -2)
    poly = multiply_by_pot(wrap16(srdhm16(wrap16(x4_over_4 + x3), one_third) + x2), -1)
    return saturating_add16(constant_term, srdhm16(constant_term, wrap16(x + poly)))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, bits: int) -> np.ndarray:
    """exp(a) in Q0.15 for a <= 0 given in Q``bits``."""
    a = np.asarray(a, np.int64)
    fractional = 15 - bits
    one_quarter = 1 << (fractional - 2)
    a_mod_quarter_minus_one_quarter = wrap16((a & (one_quarter - 1)) - one_quarter)
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        rescale(a_mod_quarter_minus_one_quarter, bits, 0))
    remainder = wrap16(a_mod_quarter_minus_one_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if bits > exponent:
            bit = 1 << (fractional + exponent)
            result = np.where(remainder & bit, srdhm16(result, _constant(multiplier)), result)
    if bits > 5:
        clamp = _constant(-(1 << (36 - bits)))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT16_MAX, result)


# --------------------------------------------------------------------------- division
def _newton_reciprocal(half_denominator: np.ndarray) -> np.ndarray:
    """1 / (2 * half_denominator) in Q2.13 by three Newton-Raphson steps."""
    x = wrap16(_constant(1515870810) + srdhm16(half_denominator, _constant(-1010580540)))
    for _ in range(3):
        one_minus = wrap16(_one(2) - srdhm16(half_denominator, x))
        x = wrap16(x + rescale(srdhm16(x, one_minus), 4, 2))
    return x


def _rounding_half_sum(a: np.ndarray, b: int) -> np.ndarray:
    total = a + b
    return trunc_div(total + np.where(total >= 0, 1, -1), 2)


def one_over_one_plus_x(a) -> np.ndarray:
    """1 / (1 + a) in Q0.15 for a in (0, 1) in Q0.15."""
    x = _newton_reciprocal(_rounding_half_sum(np.asarray(a, np.int64), INT16_MAX))
    return rescale(x, 1, 0)  # ExactMulByPot<-1> turns Q2 into Q1


def one_minus_x_over_one_plus_x(a) -> np.ndarray:
    """(1 - a) / (1 + a) in Q0.15 for a in (0, 1) in Q0.15."""
    x = _newton_reciprocal(_rounding_half_sum(np.asarray(a, np.int64), INT16_MAX))
    return rescale(wrap16(x - _one(2)), 2, 0)


# --------------------------------------------------------------------------- activations
def logistic(a, bits: int) -> np.ndarray:
    """gemmlowp ``logistic``: Q``bits`` int16 in, Q0.15 out."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    magnitude = np.where(positive, a, wrap16(-a))
    if_positive = one_over_one_plus_x(exp_on_negative_values(wrap16(-magnitude), bits))
    if_negative = wrap16(INT16_MAX - if_positive)
    return np.where(a == 0, _constant(1 << 30), np.where(positive, if_positive, if_negative))


def tanh(a, bits: int) -> np.ndarray:
    """gemmlowp ``tanh``: Q``bits`` int16 in, Q0.15 out."""
    a = np.asarray(a, np.int64)
    negative = a < 0
    n = np.where(negative, a, wrap16(-a))
    t = one_minus_x_over_one_plus_x(exp_on_negative_values(n, bits + 1))  # ExactMulByPot<1>
    return np.where(a == 0, 0, np.where(negative, wrap16(-t), t))


# --------------------------------------------------------------------------- inverse sqrt
def _multiply_by_pot32(x: int, exponent: int) -> int:
    return int(multiply_by_pot(np.int64(x), exponent, total_bits=32))


def inv_sqrt_multiplier(value: int, reverse_shift: int = -1) -> tuple[int, int]:
    """TFLite ``GetInvSqrtQuantizedMultiplierExp``: (multiplier, shift) of 1 / sqrt(value)."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= (1 << 29):
        value //= 4
        shift += 1
    left_shift_bit_pairs = (32 - value.bit_length() - 1) // 2 - 1
    shift -= left_shift_bit_pairs
    value <<= 2 * left_shift_bit_pairs
    half_input = _multiply_by_pot32(value >> 1, -1)
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28  # 1.0 in Q3.28
    for _ in range(5):
        x3 = _multiply_by_pot32(srdhm32(srdhm32(x, x), x), 6)
        difference = srdhm32(half_three, x) - srdhm32(half_input, x3)
        x = _multiply_by_pot32(((difference + (1 << 31)) % (1 << 32)) - (1 << 31), 3)
    multiplier = srdhm32(x, 1518500250)  # times sqrt(2) / 2
    if shift < 0:
        multiplier <<= -shift
        shift = 0
    return multiplier, shift * reverse_shift
