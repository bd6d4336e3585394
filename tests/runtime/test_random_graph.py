"""Random graphs agree across devices (AOSP's TestRandomGraph, ``nn/runtime/test/fuzzing``).

Each seed's graph (``tests.support.random_graph``) runs on nnapi-reference, partitioned across
all devices (``Compilation(model)``: the CPU plus every sample-driver process), and alone on every
sample driver that supports all of its operations. Every run must match the values the numpy
kernels gave while the graph was generated, within the CTS accuracy criteria.

``--random-graph-seeds N`` runs seeds 0..N-1 (default 500); ``--random-graph-seed S`` runs one.
"""
from __future__ import annotations

import collections

import numpy as np
import pytest

from nnscope.runtime import Compilation, NnError, manager
from nnscope.runtime.cli._backend import compute_arrays
from nnscope.runtime.cts import accuracy
from nnscope.runtime.ops import registry
from tests.support.random_graph import generate
from tests.support.random_graph_ops import GENERATORS, NOT_COVERED

CI_SEEDS = 500
REPRO = "python -m pytest tests/runtime/test_random_graph.py -p no:randomly --random-graph-seed {}"


def pytest_generate_tests(metafunc):
    if "seed" not in metafunc.fixturenames:
        return
    one = metafunc.config.getoption("random_graph_seed")
    count = metafunc.config.getoption("random_graph_seeds")
    seeds = [one] if one is not None else range(count)
    metafunc.parametrize("seed", seeds, ids=[f"seed{s}" for s in seeds])


@pytest.fixture(scope="module")
def devices():
    """All devices, the sample-driver processes started once for the module."""
    manager.forTest_reset()
    found = manager.devices()
    manager.start_devices(found)
    yield found
    manager.forTest_reset()


def _run(compilation: Compilation, inputs) -> list[np.ndarray]:
    try:
        compilation.finish()
        return compute_arrays(compilation, inputs)
    finally:
        compilation.free()  # a driver holds at most 256 prepared models per client


def _backends(model, devices):
    """(name, compilation) for each way the graph runs."""
    yield "nnapi-reference", Compilation.for_devices(model, [manager.cpu_device()])
    yield "partitioned", Compilation(model)
    for device in devices:
        if device.name != manager.cpu_device().name and \
                all(model.get_supported_operations_for_devices([device])):
            yield device.name, Compilation.for_devices(model, [device])


def _problems(graph, outputs) -> list[str]:
    expected = graph.outputs()
    if len(outputs) != len(expected):
        return [f"{len(outputs)} outputs, expected {len(expected)}"]
    problems = []
    for position, (tensor, actual) in enumerate(zip(expected, outputs)):
        atol, rtol = accuracy.tolerance(tensor.type, relaxed=False, name="random_graph")
        problems += accuracy.compare(tensor.value, np.asarray(actual).reshape(tensor.shape),
                                     atol, rtol, label=f"output {position} (operand {tensor.index})")
    return problems


def test_random_graph_agrees_across_devices(seed, devices):
    graph = generate(seed)
    model = graph.to_model()
    failures = []
    ran = []
    for name, compilation in _backends(model, devices):
        try:
            outputs = _run(compilation, graph.inputs())
        except NnError as error:
            failures.append(f"{name}: {error}")
            continue
        ran.append(name)
        failures += [f"{name}: {problem}" for problem in _problems(graph, outputs)]
    assert not failures, (f"{graph.describe()}\n  " + "\n  ".join(failures)
                          + f"\nreproduce: {REPRO.format(seed)}")
    assert {"nnapi-reference", "partitioned", "sample-all"} <= set(ran)


def test_every_registered_operation_has_a_generator_or_a_reason():
    registered = registry.supported_types()
    assert not set(GENERATORS) & set(NOT_COVERED)
    missing = sorted(op.name for op in registered - set(GENERATORS) - set(NOT_COVERED))
    assert not missing, f"add a generator to tests/support/random_graph_ops.py or a reason: {missing}"


def test_ci_seeds_use_every_generator():
    used = collections.Counter(op for seed in range(CI_SEEDS) for op in generate(seed).operation_types)
    unused = sorted(op.name for op in GENERATORS if registry.get(op) and not used[op])
    assert not unused, f"generators that never made an operation in {CI_SEEDS} seeds: {unused}"


def test_same_seed_same_graph():
    first, again = generate(7), generate(7)
    assert first.describe() == again.describe()
    assert all(np.array_equal(a, b) for a, b in zip(first.inputs(), again.inputs()))
    assert 2 <= len(first.steps) <= 40
