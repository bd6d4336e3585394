"""FarmHash ``Fingerprint64`` (``farmhashna::Hash64``, Geoff Pike's public FarmHash algorithm) in
pure Python, as LSH_PROJECTION needs it. Bytes are read little-endian, as on every Android ABI.

Example:
    >>> hex(fingerprint64(b""))   # an empty key hashes to the constant k2
    '0x9ae16a3b2f90404f'
"""
from __future__ import annotations

_MASK = (1 << 64) - 1
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F


def _fetch64(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 8], "little")


def _fetch32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 4], "little")


def _rotate(value: int, shift: int) -> int:
    return value if shift == 0 else ((value >> shift) | (value << (64 - shift))) & _MASK


def _shift_mix(value: int) -> int:
    return value ^ (value >> 47)


def _hash_len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _MASK
    a ^= a >> 47
    b = ((v ^ a) * mul) & _MASK
    b ^= b >> 47
    return (b * mul) & _MASK


def _len0to16(s: bytes) -> int:
    n = len(s)
    mul = (_K2 + n * 2) & _MASK
    if n >= 8:
        a = (_fetch64(s, 0) + _K2) & _MASK
        b = _fetch64(s, n - 8)
        c = (_rotate(b, 37) * mul + a) & _MASK
        d = ((_rotate(a, 25) + b) * mul) & _MASK
        return _hash_len16(c, d, mul)
    if n >= 4:
        return _hash_len16((n + (_fetch32(s, 0) << 3)) & _MASK, _fetch32(s, n - 4), mul)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_shift_mix(((y * _K2) ^ (z * _K0)) & _MASK) * _K2) & _MASK
    return _K2


def _len17to32(s: bytes) -> int:
    n = len(s)
    mul = (_K2 + n * 2) & _MASK
    a = (_fetch64(s, 0) * _K1) & _MASK
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & _MASK
    d = (_fetch64(s, n - 16) * _K2) & _MASK
    return _hash_len16((_rotate((a + b) & _MASK, 43) + _rotate(c, 30) + d) & _MASK,
                       (a + _rotate((b + _K2) & _MASK, 18) + c) & _MASK, mul)


def _len33to64(s: bytes) -> int:
    n = len(s)
    mul = (_K2 + n * 2) & _MASK
    a = (_fetch64(s, 0) * _K2) & _MASK
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & _MASK
    d = (_fetch64(s, n - 16) * _K2) & _MASK
    y = (_rotate((a + b) & _MASK, 43) + _rotate(c, 30) + d) & _MASK
    z = _hash_len16(y, (a + _rotate((b + _K2) & _MASK, 18) + c) & _MASK, mul)
    e = (_fetch64(s, 16) * mul) & _MASK
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & _MASK
    h = ((z + _fetch64(s, n - 24)) * mul) & _MASK
    return _hash_len16((_rotate((e + f) & _MASK, 43) + _rotate(g, 30) + h) & _MASK,
                       (e + _rotate((f + a) & _MASK, 18) + g) & _MASK, mul)


def _weak32(s: bytes, at: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = (_fetch64(s, at + 8 * k) for k in range(4))
    a = (a + w) & _MASK
    b = _rotate((b + a + z) & _MASK, 21)
    c = a
    a = (a + x + y) & _MASK
    b = (b + _rotate(a, 44)) & _MASK
    return (a + z) & _MASK, (b + c) & _MASK


def _round(s, at, x, y, z, v, w, mul, last: bool):
    x = (_rotate((x + y + v[0] + _fetch64(s, at + 8)) & _MASK, 37) * mul) & _MASK
    y = (_rotate((y + v[1] + _fetch64(s, at + 48)) & _MASK, 42) * mul) & _MASK
    x ^= (w[1] * (9 if last else 1)) & _MASK
    y = (y + v[0] * (9 if last else 1) + _fetch64(s, at + 40)) & _MASK
    z = (_rotate((z + w[0]) & _MASK, 33) * mul) & _MASK
    v = _weak32(s, at, (v[1] * mul) & _MASK, (x + w[0]) & _MASK)
    w = _weak32(s, at + 32, (z + w[1]) & _MASK, (y + _fetch64(s, at + 16)) & _MASK)
    return z, y, x, v, w  # x and z swap


def _long(s: bytes) -> int:
    n, seed = len(s), 81
    y = (seed * _K1 + 113) & _MASK
    z = (_shift_mix((y * _K2 + 113) & _MASK) * _K2) & _MASK
    x = (seed * _K2 + _fetch64(s, 0)) & _MASK
    v, w = (0, 0), (0, 0)
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    for at in range(0, end, 64):
        x, y, z, v, w = _round(s, at, x, y, z, v, w, _K1, False)
    mul = (_K1 + ((z & 0xFF) << 1)) & _MASK
    w0 = (w[0] + ((n - 1) & 63)) & _MASK
    v0 = (v[0] + w0) & _MASK
    w = ((w0 + v0) & _MASK, w[1])
    v = (v0, v[1])
    x, y, z, v, w = _round(s, last64, x, y, z, v, w, mul, True)
    return _hash_len16((_hash_len16(v[0], w[0], mul) + _shift_mix(y) * _K0 + z) & _MASK,
                       (_hash_len16(v[1], w[1], mul) + x) & _MASK, mul)


def fingerprint64(data: bytes) -> int:
    """The unsigned 64-bit FarmHash fingerprint of ``data``."""
    n = len(data)
    if n <= 16:
        return _len0to16(data)
    if n <= 32:
        return _len17to32(data)
    if n <= 64:
        return _len33to64(data)
    return _long(data)
