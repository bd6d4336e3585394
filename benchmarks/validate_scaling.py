"""How model validation and a driver's prepare path scale with the number of operations.

Builds models of N independent operations (``ADD(in, in, 0)`` each writing its own operand; the
shape of the issue-16 attack) and times, in CPU seconds of this process (best of ``--repeat``):
``validate_model`` (HAL graph validation), ``run_order`` alone, and what a driver does with a
PREPARE_MODEL message: decode the model (``ipc.wire.codec``), then ``SampleDriver.prepare_model``
(validation, supported operations, the CPU executor's plan). Linear work gives a per-operation
cost that stays flat as N doubles; the ``growth`` figures are ``time(N) / time(N0) / (N / N0)``
(1.0 = linear; quadratic would give N / N0).

Usage:
    python benchmarks/validate_scaling.py [--sizes 75000 150000 300000] [--repeat 1]

Prints one line per size, writes ``benchmarks/results/validate_scaling.json`` and prints the same
JSON object as the last line (keys ``sizes``, ``validate_s``, ``run_order_s``, ``prepare_s``,
``*_us_per_op`` and ``*_growth``).
"""
from __future__ import annotations

import argparse
import gc
import time

from _common import write_results

from nnscope.runtime.drivers.ipc.wire.codec import Reader, decode_model, encode_model
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
from nnscope.runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L, OperandType as T,
                               Operation, OperationType, Subgraph)
from nnscope.runtime.hal.validate import run_order, validate_model


def independent_adds(count: int) -> HalModel:
    """``count`` ADD operations that all read the model input and write their own operand."""
    tensor = Operand(T.TENSOR_FLOAT32, (1,), lifetime=L.TEMPORARY_VARIABLE)
    operands = (Operand(T.TENSOR_FLOAT32, (1,), lifetime=L.SUBGRAPH_INPUT),
                Operand(T.INT32, lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 0, 4)),
                *(tensor,) * (count - 1), Operand(T.TENSOR_FLOAT32, (1,), lifetime=L.SUBGRAPH_OUTPUT))
    operations = tuple(Operation(OperationType.ADD, (0, 0, 1), (2 + i,)) for i in range(count))
    return HalModel(Subgraph(operands, operations, (0,), (count + 1,)), operand_values=bytes(4))


def cpu_seconds(work, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def driver_prepare(encoded: bytes) -> None:
    model, _ = decode_model(Reader(encoded))
    SampleDriver(SAMPLES["sample-all"]).prepare_model(model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[75_000, 150_000, 300_000])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    results: dict = {"sizes": args.sizes, "validate_s": [], "run_order_s": [], "prepare_s": []}
    for count in args.sizes:
        model = independent_adds(count)
        encoded = encode_model(model, values_inline=True)
        results["validate_s"].append(cpu_seconds(lambda: validate_model(model), args.repeat))
        results["run_order_s"].append(cpu_seconds(lambda: run_order(model.main), args.repeat))
        results["prepare_s"].append(cpu_seconds(lambda: driver_prepare(encoded), args.repeat))
        print(f"{count:>8} operations: validate {results['validate_s'][-1]:.3f} s, run_order "
              f"{results['run_order_s'][-1]:.3f} s, driver decode+prepare {results['prepare_s'][-1]:.3f} s")
    first = args.sizes[0]
    for key in ("validate", "run_order", "prepare"):
        times = results[f"{key}_s"]
        results[f"{key}_us_per_op"] = [round(t / n * 1e6, 3) for t, n in zip(times, args.sizes)]
        results[f"{key}_growth"] = [round(t / times[0] / (n / first), 3) for t, n in zip(times, args.sizes)]
        print(f"{key}: {results[f'{key}_us_per_op']} us/op, growth vs linear {results[f'{key}_growth']}")
    write_results("validate_scaling", results)


if __name__ == "__main__":
    main()
