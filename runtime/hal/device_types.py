"""HAL records a device exchanges with the runtime: capabilities, requests, results.

Example:
    >>> PerformanceInfo(exec_time=0.5, power_usage=0.5)
    PerformanceInfo(exec_time=0.5, power_usage=0.5)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from nnscope.runtime.hal.types import ErrorStatus, OperandType


@dataclass(frozen=True, slots=True)
class PerformanceInfo:
    """Relative to the CPU reference: lower is better (1.0 = reference)."""

    exec_time: float = 1.0
    power_usage: float = 1.0


@dataclass(frozen=True, slots=True)
class Capabilities:
    relaxed_float32_to_float16_performance_scalar: PerformanceInfo = PerformanceInfo()
    relaxed_float32_to_float16_performance_tensor: PerformanceInfo = PerformanceInfo()
    operand_performance: tuple[tuple[OperandType, PerformanceInfo], ...] = ()
    if_performance: PerformanceInfo = PerformanceInfo()
    while_performance: PerformanceInfo = PerformanceInfo()

    def performance(self, operand_type: OperandType) -> PerformanceInfo:
        """Performance for one operand type; types not listed are not supported (huge cost)."""
        for listed, info in self.operand_performance:
            if listed == operand_type:
                return info
        return PerformanceInfo(float("inf"), float("inf"))


@dataclass(frozen=True, slots=True)
class RequestArgument:
    """One input or output of a request: a region of pool ``pool_index``."""

    has_no_value: bool = False
    pool_index: int = 0
    offset: int = 0
    length: int = 0
    dimensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Request:
    """``pools`` are buffer-protocol objects (bytearray, mmap, SharedMemory.buf, ...)."""

    inputs: tuple[RequestArgument, ...]
    outputs: tuple[RequestArgument, ...]
    pools: tuple = field(default=())
    #: Longest time a WHILE loop may run (``loopTimeoutDuration`` of ``execute_1_3``); None: 2 s.
    loop_timeout_ns: int | None = None


@dataclass(frozen=True, slots=True)
class OutputShape:
    dimensions: tuple[int, ...]
    is_sufficient: bool = True


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """What IPreparedModel.execute* returns. ``timing`` is a ``timing.Timing`` or None."""

    status: ErrorStatus
    output_shapes: tuple[OutputShape, ...] = ()
    timing: object = None
