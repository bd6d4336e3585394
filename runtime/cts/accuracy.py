"""AOSP's default CTS accuracy criteria (fixture README, "Accuracy").

Every element is compared in float64. TENSOR_FLOAT32: ``atol = 1e-5``, ``rtol = 5 * 2**-23``;
TENSOR_FLOAT16, and float32 outputs of a relaxed model or of one with any TENSOR_FLOAT16 operand:
``atol = rtol = 5 * 2**-10``; quantized and int32 outputs: off by at most 1 (3 for quant8 tests
whose name contains ``mobilenet``); TENSOR_BOOL8: exact. Ignored outputs are not checked.
Multinomial tests compare per-batch class frequencies with ``softmax(input 0)``.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import OperandType
    >>> tolerance(OperandType.TENSOR_FLOAT32, relaxed=False, name="add")
    (1e-05, 5.960464477539062e-07)
    >>> compare(np.float32([1.0]), np.float32([1.00001]), 1e-5, 5.96e-7)
    []
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import OperandType

FLOAT32_ATOL = 1e-5
FLOAT32_RTOL = 5 * 1.1920928955078125e-7
FLOAT16_TOL = 5 * 0.0009765625
_INTEGER_TYPES = frozenset({
    OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
    OperandType.TENSOR_QUANT8_SYMM, OperandType.TENSOR_QUANT16_SYMM,
    OperandType.TENSOR_QUANT16_ASYMM, OperandType.TENSOR_INT32, OperandType.INT32,
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, OperandType.UINT32,
})
_QUANT8 = frozenset({OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
                     OperandType.TENSOR_QUANT8_SYMM})


def tolerance(output_type: OperandType, relaxed: bool, name: str) -> tuple[float, float]:
    """(atol, rtol) for one output; ``relaxed`` = relaxed model or any float16 operand."""
    if output_type in (OperandType.TENSOR_FLOAT16, OperandType.FLOAT16):
        return FLOAT16_TOL, FLOAT16_TOL
    if output_type in (OperandType.TENSOR_FLOAT32, OperandType.FLOAT32):
        return (FLOAT16_TOL, FLOAT16_TOL) if relaxed else (FLOAT32_ATOL, FLOAT32_RTOL)
    if output_type in _QUANT8 and "mobilenet" in name:
        return 3.0, 0.0
    if output_type in _INTEGER_TYPES:
        return 1.0, 0.0
    return 0.0, 0.0  # BOOL / TENSOR_BOOL8: exact


def compare(expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float,
            label: str = "output") -> list[str]:
    """Problems with ``actual`` (empty when it matches): shape, then worst element."""
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if expected.shape != actual.shape:
        return [f"{label}: shape {list(actual.shape)}, expected {list(expected.shape)}"]
    exp64 = expected.astype(np.float64)
    act64 = actual.astype(np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.abs(exp64 - act64)
        bad = ~(diff <= atol + rtol * np.abs(exp64))
    if not bad.any():
        return []
    worst = int(np.argmax(np.where(bad, np.nan_to_num(diff, nan=np.inf), -1.0)))
    return [f"{label}: {int(bad.sum())}/{bad.size} elements off; worst at flat index {worst}: "
            f"got {act64.flat[worst]!r}, expected {exp64.flat[worst]!r} "
            f"(atol {atol:g}, rtol {rtol:g})"]


def check_multinomial(inputs: Sequence[np.ndarray], output: np.ndarray, tol: float) -> list[str]:
    """Per-batch sample frequencies of ``output`` against ``softmax(inputs[0])``."""
    logits = np.asarray(inputs[0], np.float64)
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    samples = np.asarray(output)
    problems = []
    for batch in range(samples.shape[0]):
        counts = np.bincount(samples[batch].astype(np.int64), minlength=probs.shape[-1])
        share = counts[:probs.shape[-1]] / max(samples.shape[1], 1)
        worst = float(np.max(np.abs(share - probs[batch])))
        if worst > tol:
            problems.append(f"batch {batch}: class frequency off by {worst:.4f} > {tol}")
    return problems


def check_test_outputs(test, outputs: Sequence[np.ndarray]) -> list[str]:
    """Problems with a backend's ``outputs`` for a :class:`~runtime.cts.loader.CtsTest`."""
    if len(outputs) != len(test.expected):
        return [f"got {len(outputs)} outputs, expected {len(test.expected)}"]
    if test.multinomial_tolerance > 0:
        return check_multinomial(test.inputs, outputs[0], test.multinomial_tolerance)
    relaxed = test.is_relaxed or test.has_float16()
    problems: list[str] = []
    for index, (expected, actual, out_type, ignored) in enumerate(
            zip(test.expected, outputs, test.output_types, test.ignored)):
        if ignored:
            continue
        atol, rtol = tolerance(out_type, relaxed, test.name)
        problems += compare(expected, actual, atol, rtol, label=f"output {index}")
    return problems
