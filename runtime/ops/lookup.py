"""EMBEDDING_LOOKUP, HASHTABLE_LOOKUP, RANDOM_MULTINOMIAL and LSH_PROJECTION (AOSP
``EmbeddingLookup.cpp``, ``HashtableLookup.cpp``, ``Multinomial.cpp``, ``LSHProjection.cpp``).

EMBEDDING_LOOKUP: ``lookups [n] (INT32), values [rows, ...]`` -> ``values[lookups]``; an index
outside [0, rows) fails the execution. HASHTABLE_LOOKUP: ``lookups [n], keys [k], values [k, ...]``
-> ``output [n, ...]`` (zeros where the key is missing) and ``hits [n]`` (TENSOR_QUANT8_ASYMM,
1 or 0). RANDOM_MULTINOMIAL: ``logits [batch, classes], samples (INT32), seed [2]`` -> class
indexes [batch, samples] drawn from ``softmax(logits)``; the draws come from a numpy generator
seeded with the seed tensor, so a given seed always gives the same samples. LSH_PROJECTION:
``hash [num_hash, num_bits] (float), input [n, ...], weight [n] (optional), type`` -> per
(hash, bit) the sign of ``sum_k weight[k] * Fingerprint64(float32 seed bytes + input row k)``
(signed); DENSE (2) gives those bits, SPARSE (3) one ``bits + i * 2**num_bits`` per hash function
and SPARSE_DEPRECATED (1) the bits alone.

Example:
    >>> import numpy as np
    >>> hashtable_lookup(np.int32([5, 7]), np.int32([7, 9]), np.float32([[1, 2], [3, 4]]))[1].tolist()
    [0, 1]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops._farmhash import fingerprint64
from nnscope.runtime.ops.budget import OutputPlan
from nnscope.runtime.ops._common import expect, expect_count, expect_rank, expect_type
from nnscope.runtime.ops.registry import OpContext, register

_VALUE_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM,
                T.TENSOR_QUANT8_ASYMM_SIGNED)


# --------------------------------------------------------------------------- EMBEDDING_LOOKUP
def _execute_embedding(ctx: OpContext) -> list:
    lookups, values = np.asarray(ctx.inputs[0]).reshape(-1), ctx.inputs[1]
    bad = (lookups < 0) | (lookups >= values.shape[0])
    expect(not bad.any(), f"input 0: lookup {lookups[bad][:1].tolist()} outside "
           f"[0, {values.shape[0]})")
    return [values[lookups.astype(np.int64)]]


def _validate_embedding(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 2, "inputs")
    expect_count(outputs, 1, "outputs")
    expect_type(inputs, 0, T.TENSOR_INT32)
    expect_rank(inputs, 0, exact=1)
    value_type = expect_type(inputs, 1, _VALUE_TYPES)
    expect(len(inputs[1].dimensions) != 1, "input 1: values need rank >= 2")
    expect_type(outputs, 0, value_type, "output")


# --------------------------------------------------------------------------- HASHTABLE_LOOKUP
def hashtable_lookup(lookups: np.ndarray, keys: np.ndarray, values: np.ndarray):
    """(rows of ``values`` whose key is looked up, zeros when absent; hits as uint8)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    position = np.clip(np.searchsorted(sorted_keys, lookups), 0, max(len(keys) - 1, 0))
    hits = (sorted_keys[position] == lookups) if len(keys) else np.zeros(len(lookups), bool)
    rows = values[order[position]] if len(keys) else np.zeros((len(lookups), *values.shape[1:]),
                                                              values.dtype)
    rows = np.where(hits.reshape(-1, *([1] * (values.ndim - 1))), rows, np.zeros_like(rows))
    return rows.astype(values.dtype), hits.astype(np.uint8)


def _execute_hashtable(ctx: OpContext) -> list:
    lookups, keys, values = (np.asarray(a) for a in ctx.inputs)
    expect(len(keys) == values.shape[0], f"input 1: {len(keys)} keys for {values.shape[0]} rows")
    return list(hashtable_lookup(lookups.reshape(-1), keys.reshape(-1), values))


def _validate_hashtable(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 3, "inputs")
    expect_count(outputs, 2, "outputs")
    expect_type(inputs, 0, T.TENSOR_INT32)
    expect_type(inputs, 1, T.TENSOR_INT32)
    value_type = expect_type(inputs, 2, (T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM))
    expect_rank(inputs, 0, exact=1)
    expect_rank(inputs, 1, exact=1)
    expect_type(outputs, 0, value_type, "output")
    expect_type(outputs, 1, T.TENSOR_QUANT8_ASYMM, "output")


# --------------------------------------------------------------------------- RANDOM_MULTINOMIAL
def _execute_multinomial(ctx: OpContext) -> list:
    logits, samples, seed = ctx.inputs
    expect(int(samples) >= 0, f"input 1: sample count {samples} must be >= 0")
    x = np.asarray(logits, np.float64)
    probs = np.exp(x - x.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    rng = np.random.default_rng([int(s) & 0xFFFFFFFF for s in np.asarray(seed).reshape(-1)])
    cumulative = np.cumsum(probs, axis=1)
    draws = rng.random((x.shape[0], int(samples)))
    indexes = (draws[:, :, None] >= cumulative[:, None, :]).sum(axis=2)
    return [np.minimum(indexes, x.shape[1] - 1).astype(np.int32)]


def _validate_multinomial(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 3, "inputs")
    expect_count(outputs, 1, "outputs")
    expect_type(inputs, 0, (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16))
    expect_rank(inputs, 0, exact=2)
    expect_type(inputs, 1, T.INT32)
    expect_type(inputs, 2, T.TENSOR_INT32)
    expect_type(outputs, 0, T.TENSOR_INT32, "output")


# --------------------------------------------------------------------------- LSH_PROJECTION
_SPARSE_DEPRECATED, _DENSE, _SPARSE = 1, 2, 3


def _sign_bit(seed: float, rows: list[bytes], weight) -> int:
    prefix = np.float32(seed).tobytes()
    signatures = [fingerprint64(prefix + row) for row in rows]
    signed = np.float64([h - (1 << 64) if h >= 1 << 63 else h for h in signatures])
    score = signed.sum() if weight is None else (np.asarray(weight, np.float64) * signed).sum()
    return int(score > 0)


def lsh_projection(hashes: np.ndarray, values: np.ndarray, weight, kind: int) -> np.ndarray:
    """The LSH_PROJECTION output (TENSOR_INT32) for a projection type 1, 2 or 3."""
    rows = [np.ascontiguousarray(row).tobytes() for row in values.reshape(values.shape[0], -1)]
    bits = np.int32([[_sign_bit(seed, rows, weight) for seed in hash_row] for hash_row in hashes])
    if kind == _DENSE:
        return bits.reshape(-1)
    signatures = (bits.astype(np.int64) << np.arange(bits.shape[1] - 1, -1, -1)).sum(axis=1)
    if kind == _SPARSE:
        signatures += np.arange(bits.shape[0]) << bits.shape[1]
    return signatures.astype(np.int32)


def _execute_lsh(ctx: OpContext) -> list:
    hashes, values, weight, kind = ctx.inputs
    weight = weight if weight is not None and np.asarray(weight).size else None
    expect(kind in (_SPARSE_DEPRECATED, _DENSE, _SPARSE), f"input 3: unknown projection type {kind}")
    expect(hashes.shape[1] <= 32, f"input 0: {hashes.shape[1]} bits per hash exceed 32")
    expect(weight is None or weight.shape == (values.shape[0],),
           f"input 2: weight must be [{values.shape[0]}]")
    return [lsh_projection(np.asarray(hashes, np.float32), values, weight, int(kind))]


def _validate_lsh(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 4, "inputs")
    expect_count(outputs, 1, "outputs")
    hash_type = expect_type(inputs, 0, (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16))
    expect_rank(inputs, 0, exact=2)
    expect_type(inputs, 1, (T.TENSOR_INT32, T.TENSOR_FLOAT32, T.TENSOR_FLOAT16,
                            T.TENSOR_QUANT8_ASYMM))
    expect_type(inputs, 2, hash_type)
    expect_rank(inputs, 2, exact=1)
    expect_type(inputs, 3, T.INT32)
    expect_type(outputs, 0, T.TENSOR_INT32, "output")


def _infer_embedding(ctx: OpContext) -> OutputPlan:
    lookups, values = np.asarray(ctx.inputs[0]), ctx.inputs[1]
    return OutputPlan([(lookups.size * (values.size // max(values.shape[0], 1) if values.ndim else 1),)])


register(OperationType.EMBEDDING_LOOKUP, "lookup", _validate_embedding, _execute_embedding,
         infer_shapes=_infer_embedding)
register(OperationType.HASHTABLE_LOOKUP, "lookup", _validate_hashtable, _execute_hashtable)
register(OperationType.RANDOM_MULTINOMIAL, "lookup", _validate_multinomial, _execute_multinomial)
register(OperationType.LSH_PROJECTION, "lookup", _validate_lsh, _execute_lsh)
