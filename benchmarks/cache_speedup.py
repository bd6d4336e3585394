"""Compilation caching: the built-in MobileNet-style model compiled on a driver process,
uncached next to prepared from the cache, in alternating rounds of the same run.

Each round times ``Compilation.for_devices(model, [driver])`` + ``finish()`` twice: once
without caching (partitioning asks the driver ``getSupportedOperations``, then
``prepareModel_1_3`` sends the model and the driver validates it and plans its executor), and
once with ``set_caching`` on a warm cache (``prepareModelFromCache_1_3``: the driver checks and
reads its two cache files and restores the executor's plan). Both compilations run the same
input once per round outside the timed part, and their outputs must be identical. Also timed
once: the first cached compilation, which prepares and writes the cache files.

Usage:
    python benchmarks/cache_speedup.py [--rounds N] [--driver NAME]

Prints the figures, writes ``benchmarks/results/cache_speedup.json`` and prints the same JSON
object as the last line (keys ``uncached_ms``, ``cached_ms``, ``first_with_cache_ms`` and
``cache_speedup``: median uncached / median cached; target >= 5).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from _common import reusable_execution, write_results
from runtime import Compilation, manager
from runtime.builtin_models import mobilenet, sample_input


def compile_once(model, device, cache: tuple | None) -> tuple[Compilation, float]:
    start = time.perf_counter()
    compilation = Compilation.for_devices(model, [device])
    if cache is not None:
        compilation.set_caching(*cache)
    compilation.finish()
    return compilation, (time.perf_counter() - start) * 1e3


def outputs_of(compilation, inputs) -> np.ndarray:
    execution, outputs = reusable_execution(compilation, inputs)
    execution.compute()
    return outputs[0].copy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--driver", default="sample-all")
    args = parser.parse_args()
    model = mobilenet()
    inputs = sample_input(model)
    device = manager.get_device(args.driver)
    manager.start_devices([device])
    with tempfile.TemporaryDirectory(prefix="nnscope-cache-") as directory:
        cache = (directory, os.urandom(32))
        compile_once(model, device, None)[0].free()  # warm up imports and the driver
        first, first_ms = compile_once(model, device, cache)
        reference = outputs_of(first, inputs)
        first.free()
        uncached, cached = [], []
        for _ in range(args.rounds):
            for kind, times in (("uncached", uncached), ("cached", cached)):
                compilation, ms = compile_once(model, device, cache if kind == "cached" else None)
                times.append(ms)
                if not np.array_equal(outputs_of(compilation, inputs), reference):
                    raise SystemExit(f"{kind} compilation gave different outputs")
                compilation.free()
        cache_bytes = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))
    uncached_ms, cached_ms = statistics.median(uncached), statistics.median(cached)
    ratios = [u / c for u, c in zip(uncached, cached)]
    print(f"driver {args.driver}, model {model.name}, {args.rounds} alternating rounds")
    print(f"uncached compile   median {uncached_ms:7.2f} ms  (min {min(uncached):.2f})")
    print(f"from cache compile median {cached_ms:7.2f} ms  (min {min(cached):.2f})")
    print(f"first compile writing the cache {first_ms:.2f} ms; cache files {cache_bytes} bytes")
    print(f"speed-up {uncached_ms / cached_ms:.2f}x (median of per-round ratios "
          f"{statistics.median(ratios):.2f}x); outputs identical in every round")
    write_results("cache_speedup", {
        "driver": args.driver, "model": model.name, "rounds": args.rounds,
        "uncached_ms": round(uncached_ms, 3), "cached_ms": round(cached_ms, 3),
        "uncached_min_ms": round(min(uncached), 3), "cached_min_ms": round(min(cached), 3),
        "first_with_cache_ms": round(first_ms, 3), "cache_file_bytes": cache_bytes,
        "per_round_ratio_median": round(statistics.median(ratios), 3),
        "cache_speedup": round(uncached_ms / cached_ms, 3)})


if __name__ == "__main__":
    main()
