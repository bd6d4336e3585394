"""The NNAPI CTS-vector tests shared by the operation-family test modules."""
from __future__ import annotations

import pytest

from nnscope.runtime.cts import harness, loader
from nnscope.runtime.hal.types import OperationType
from nnscope.runtime.ops import registry


def cts_cases(ops: frozenset[OperationType]) -> list:
    """One ``pytest.param`` per CTS vector that uses an operation of ``ops`` and only operations
    the registry supports (none when the CTS vectors are not installed)."""
    if not (loader.CTS_ROOT / "index.json").exists():
        return []
    supported = registry.supported_types()
    return [pytest.param(test, id=test.name)
            for path in loader.select_files(ops) for test in loader.load_file(path)
            if test.operations & ops and test.operations <= supported]


def cts_vector_tests(ops: frozenset[OperationType], min_passed: dict[str, int]):
    """The two CTS-vector tests of an operation family, to bind to the same names in the test
    module: every operation of ``min_passed`` has at least that many vectors, and every vector
    of :func:`cts_cases` passes (with output shapes known, and left unknown)."""
    cases = cts_cases(ops)

    def test_every_operation_is_covered_by_enough_vectors():
        for name, minimum in min_passed.items():
            count = sum(OperationType[name] in case.values[0].operations for case in cases)
            assert count >= minimum, name

    @pytest.mark.parametrize("unknown_shapes", [False, True], ids=["shapes", "unknown_shapes"])
    @pytest.mark.parametrize("test", cases)
    def test_cts_vector_passes(test, unknown_shapes):
        result = harness.run_test(test, unknown_output_shapes=unknown_shapes)
        assert result.status == harness.PASSED, result.message

    return test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes
