"""Issue 16, bug 6: validating a model costs time linear in its size.

An attacker sends a driver a model of N independent operations that ends in a two-operation
cycle: the driver decodes it, runs every graph check and answers INVALID_ARGUMENT at the last
one, the run order. Before the fix ``run_order`` took ``ready.pop(0)`` (quadratic: 300k
operations cost 16 s). The figures asserted are counts of Python lines executed in our code for
two sizes (the same on any machine) and, for ``run_order`` alone, a CPU-time ratio measured side
by side with a wide margin; ``benchmarks/validate_scaling.py`` times the paths.
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from nnscope import runtime
from nnscope.runtime.drivers.ipc.wire.codec import Reader, decode_model, encode_model
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L, OperandType as T,
                               Operation, OperationType as Op, Subgraph)
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
from nnscope.runtime.hal.validate import run_order, validate_model
from tests.support.driver_attack import AttackedDriver, exchange

INVALID = 4  # ErrorStatus.INVALID_ARGUMENT


def independent_adds(count: int, cycle: bool = False) -> HalModel:
    """``count`` ADDs of the model input, each writing its own temporary; with ``cycle`` two
    more ADDs read each other's output (the graph is then rejected by the run order only)."""
    tensor = Operand(T.TENSOR_FLOAT32, (1,), lifetime=L.TEMPORARY_VARIABLE)
    temporaries = count - 1 + 2 * cycle
    operands = (Operand(T.TENSOR_FLOAT32, (1,), lifetime=L.SUBGRAPH_INPUT),
                Operand(T.INT32, lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 0, 4)),
                *(tensor,) * temporaries, Operand(T.TENSOR_FLOAT32, (1,), lifetime=L.SUBGRAPH_OUTPUT))
    operations = [Operation(Op.ADD, (0, 0, 1), (2 + i,)) for i in range(count - 1)]
    operations.append(Operation(Op.ADD, (0, 0, 1), (len(operands) - 1,)))
    if cycle:
        first, second = count + 1, count + 2
        operations += [Operation(Op.ADD, (second, 0, 1), (first,)), Operation(Op.ADD, (first, 0, 1), (second,))]
    return HalModel(Subgraph(operands, tuple(operations), (0,), (len(operands) - 1,)),
                    operand_values=bytes(4))


def line_events(work, where: str = "validate.py") -> int:
    """Python lines executed in files whose path ends with ``where`` while ``work()`` runs."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if not frame.f_code.co_filename.endswith(where) and not frame.f_code.co_filename.startswith(where):
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def test_validation_executes_a_linear_number_of_lines():
    """No per-operation scan of all operands: 4x the operations runs 4x the lines."""
    small, large = independent_adds(2_000), independent_adds(8_000)
    ratio = line_events(lambda: validate_model(large)) / line_events(lambda: validate_model(small))
    assert 3.8 < ratio < 4.2, ratio


def test_run_order_cost_grows_linearly():
    """``ready.pop(0)`` (one line, a C-level cost no line count sees) made 8x the operations cost
    ~64x; a queue keeps it ~8x. CPU time of this process, small and large alternating in one run,
    best of three each; the bound (24x) is three times linear and under half of quadratic."""
    small, large = independent_adds(12_500).main, independent_adds(100_000).main
    assert len(run_order(large)) == 100_000
    best = [float("inf"), float("inf")]
    for _ in range(3):
        for which, graph in enumerate((small, large)):
            start = time.process_time()
            run_order(graph)
            best[which] = min(best[which], time.process_time() - start)
    ratio = best[1] / max(best[0], 1e-6)
    assert ratio < 24, f"run_order(100k) / run_order(12.5k) = {ratio:.1f}"


def _driver_rejects(payload: bytes) -> None:
    """What a driver does with GET_SUPPORTED_OPERATIONS: decode, then validate (a cycle: refused)."""
    model, _ = decode_model(Reader(payload))
    with pytest.raises(HalError, match="form a cycle"):
        SampleDriver(SAMPLES["sample-all"]).supported_operations(model)


def test_a_cycle_is_still_reported_after_the_independent_operations():
    with pytest.raises(HalError, match=r"operations \[1000, 1001\] form a cycle"):
        validate_model(independent_adds(1_000, cycle=True))


def _supported_payload(count: int) -> bytes:
    """A GET_SUPPORTED_OPERATIONS payload: model structure, values inline, no pools."""
    return encode_model(independent_adds(count, cycle=True), values_inline=True) + bytes(4)


def test_the_drivers_path_executes_a_linear_number_of_lines():
    """Decoding and validating 8x the operations runs 8x the lines of our code (the fix made
    300k operations take seconds, not minutes; ``benchmarks/validate_scaling.py`` times it)."""
    small, large = _supported_payload(2_000), _supported_payload(16_000)
    ours = os.path.dirname(runtime.__file__)
    ratio = line_events(lambda: _driver_rejects(large), ours) / line_events(lambda: _driver_rejects(small), ours)
    assert 7.5 < ratio < 8.5, ratio


def test_a_driver_refuses_a_huge_cyclic_model():
    """A real driver answers INVALID_ARGUMENT (cycle) for 300k operations, and serves on."""
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            for count in (300_000, 10):
                reply = exchange(sock, MsgType.GET_SUPPORTED_OPERATIONS, _supported_payload(count), timeout=300.0)
                assert (reply.type, reply.status) == (REPLY | MsgType.GET_SUPPORTED_OPERATIONS, INVALID)
                assert b"form a cycle" in reply.body, reply.body[:200]
