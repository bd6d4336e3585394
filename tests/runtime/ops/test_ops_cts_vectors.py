"""Every CTS test whose operations all belong to the elementwise, activation, reshape and
quantization families must pass on the CpuExecutor with AOSP's accuracy criteria."""
from __future__ import annotations

import pytest

from nnscope.runtime.cts import harness, loader
from nnscope.runtime.hal.types import OperationType
from nnscope.runtime.ops import registry

FAMILIES = ("elementwise", "activation", "reshape", "quantization")
ROOT = loader.CTS_ROOT


def _family_ops() -> frozenset[OperationType]:
    return frozenset(op for op in registry.supported_types() if registry.get(op).family in FAMILIES)


def _candidate_files(ops: frozenset[OperationType]) -> list:
    """Spec files that can hold such tests. ADD is the dummy of every ``*_as_internal``
    variant, so a spec counts through ADD only when its own name is an ADD spec."""
    names = {op.name for op in ops}
    files = []
    for spec in loader.load_index(ROOT)["specs"]:
        spec_ops = set(spec["operations"])
        base = spec["spec"].split("/")[-1]
        if spec_ops <= names or (spec_ops & names) - {"ADD"} or base.startswith("add"):
            files.append(ROOT / spec["file"])
    return files


def _cases() -> list:
    if not (ROOT / "index.json").exists():
        return []
    ops = _family_ops()
    return [pytest.param(test, id=test.name) for path in _candidate_files(ops)
            for test in loader.load_file(path) if test.operations <= ops]


CASES = _cases()


def test_selection_covers_every_family_op():
    covered = set().union(*(case.values[0].operations for case in CASES))
    assert covered == set(_family_ops())
    assert len(CASES) >= 1000  # 1160 at the time of writing


@pytest.mark.parametrize("test", CASES)
def test_cts_vector_passes(test):
    result = harness.run_test(test)
    assert result.status == harness.PASSED, result.message
