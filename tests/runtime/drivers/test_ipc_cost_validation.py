"""Issue 16, bug 6: validating a model costs time linear in its size.

An attacker sends a driver a model of N independent operations that ends in a two-operation
cycle: the driver decodes it, runs every graph check and answers INVALID_ARGUMENT at the last
one, the run order. Before the fix ``run_order`` took ``ready.pop(0)`` (quadratic: 300k
operations cost 16 s). The figures asserted are work ratios between two sizes, never wall times.
"""
from __future__ import annotations

import sys
import time

import pytest

from runtime.drivers.ipc.codec import encode_model
from runtime.drivers.ipc.protocol import REPLY, MsgType
from runtime.hal.errors import HalError
from runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L, OperandType as T,
                               Operation, OperationType as Op, Subgraph)
from runtime.hal.validate import run_order, validate_model
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


def line_events(work) -> int:
    """Python lines executed inside ``runtime/hal/validate.py`` while ``work()`` runs."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if not frame.f_code.co_filename.endswith("validate.py"):
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


def cpu_seconds(work, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def test_validation_executes_a_linear_number_of_lines():
    """No per-operation scan of all operands: 4x the operations runs 4x the lines."""
    small, large = independent_adds(2_000), independent_adds(8_000)
    ratio = line_events(lambda: validate_model(large)) / line_events(lambda: validate_model(small))
    assert 3.8 < ratio < 4.2, ratio


def test_run_order_cost_grows_linearly():
    """``ready.pop(0)`` made 4x the operations cost ~16x; a queue keeps it ~4x (bound: 8x)."""
    small, large = independent_adds(25_000).main, independent_adds(100_000).main
    assert len(run_order(large)) == 100_000
    ratio = cpu_seconds(lambda: run_order(large)) / cpu_seconds(lambda: run_order(small))
    assert ratio < 8, f"run_order(100k) / run_order(25k) = {ratio:.1f}"


def test_a_cycle_is_still_reported_after_the_independent_operations():
    with pytest.raises(HalError, match=r"operations \[1000, 1001\] form a cycle"):
        validate_model(independent_adds(1_000, cycle=True))


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _supported_payload(count: int) -> bytes:
    """A GET_SUPPORTED_OPERATIONS payload: model structure, values inline, no pools."""
    return encode_model(independent_adds(count, cycle=True), values_inline=True) + bytes(4)


def test_driver_validates_a_huge_model_in_linear_time():
    """A real driver answers INVALID_ARGUMENT (cycle) for 37.5k and for 300k operations; its CPU
    time for 8x the operations stays within 12x (linear: 8x; before the fix over 20x)."""
    payloads = {count: _supported_payload(count) for count in (37_500, 300_000)}
    with AttackedDriver() as driver:
        spent = {}
        with driver.attack() as attacker:
            sock = attacker.connect()
            for count, payload in payloads.items():
                before = _cpu_ticks(driver.pid)
                reply = exchange(sock, MsgType.GET_SUPPORTED_OPERATIONS, payload, timeout=120.0)
                spent[count] = _cpu_ticks(driver.pid) - before
                assert (reply.type, reply.status) == (REPLY | MsgType.GET_SUPPORTED_OPERATIONS, INVALID)
                assert b"form a cycle" in reply.body, reply.body[:200]
        ratio = spent[300_000] / max(spent[37_500], 1)
        assert ratio < 12, f"driver CPU ticks {spent}: ratio {ratio:.1f}"
