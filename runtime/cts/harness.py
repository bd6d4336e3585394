"""Run CTS vector files against a backend and count passed/failed/skipped per operation.

A backend is any callable ``(hal_model, inputs) -> outputs`` (default: :func:`cpu_backend`,
the CpuExecutor directly). A test whose operations are not all in ``supported`` (default: the
op registry, so every registered family takes part) is SKIPPED, and so is one whose backend
raises :class:`Unsupported` (the chosen device cannot run the model, as AOSP's generated tests
skip a model the device under test does not fully support). An ``expectFailure`` test
passes when the backend raises. Each test is counted once, in the totals and in the row of the
operation it tests (:func:`tested_operations`: not under the helpers AOSP's generator adds, such
as the dummy ``ADD``s of ``*_as_internal``), so the rows add up to the totals; ``index.json`` and
each result's ``operations`` list every operation type a test uses.

Example:
    >>> from nnscope.runtime.cts import harness, loader
    >>> report = harness.run_vectors([loader.CTS_ROOT / "V1_0/add.json.gz"])
    >>> report.summary()
    '2 passed, 0 failed, 0 skipped'
"""
from __future__ import annotations

import collections
import dataclasses
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from nnscope.runtime.cts import accuracy
from nnscope.runtime.cts.loader import CTS_ROOT, CtsTest, load_file
from nnscope.runtime.hal.types import HalModel, OperationType
from nnscope.runtime.ops import registry

Backend = Callable[[HalModel, Sequence[np.ndarray]], Sequence[np.ndarray]]
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


def cpu_backend(model: HalModel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Reference backend: a fresh :class:`~runtime.ops.executor.CpuExecutor` per model."""
    from nnscope.runtime.ops.executor import CpuExecutor  # noqa: PLC0415 - avoid import cycle at load
    return CpuExecutor(model).run(inputs)


class Unsupported(Exception):
    """Raised by a backend whose device cannot run the model: the test is SKIPPED, the message
    saying why."""


@dataclass(frozen=True)
class TestResult:
    name: str
    spec: str
    status: str
    operations: tuple[str, ...]
    message: str = ""
    #: The operation the test tests (:func:`tested_operations`); its row in the table.
    tested: str = ""


@dataclass
class Report:
    """All results of one run, with per-operation counts."""

    results: list[TestResult] = field(default_factory=list)

    def counts(self) -> collections.Counter:
        return collections.Counter(r.status for r in self.results)

    def per_operation(self) -> dict[str, collections.Counter]:
        """Counts by status per tested operation: each test once, so the rows add up to
        :meth:`counts`."""
        table: dict[str, collections.Counter] = {}
        for result in self.results:
            table.setdefault(result.tested, collections.Counter())[result.status] += 1
        return dict(sorted(table.items()))

    @property
    def ok(self) -> bool:
        return self.counts()[FAILED] == 0

    def summary(self) -> str:
        counts = self.counts()
        return f"{counts[PASSED]} passed, {counts[FAILED]} failed, {counts[SKIPPED]} skipped"

    def failures(self) -> list[TestResult]:
        return [r for r in self.results if r.status == FAILED]

    def verdicts(self) -> dict[str, str]:
        """Status by test name (to compare two runs of the same vectors)."""
        return {result.name: result.status for result in self.results}

    def to_dict(self) -> dict:
        return {"summary": self.summary(),
                "perOperation": {op: dict(c) for op, c in self.per_operation().items()},
                "results": [dataclasses.asdict(r) for r in self.results]}


#: Operations whose models AOSP leaves out of the dynamic-shape variant (``hasScalarOutputs`` in
#: ``TestHarness.h``): RANK's output is a scalar; IF/WHILE do not take referenced-model outputs
#: of unknown shape.
NO_DYNAMIC_VARIANT = frozenset({OperationType.RANK, OperationType.IF, OperationType.WHILE})


def has_dynamic_variant(test: CtsTest) -> bool:
    """Whether AOSP runs ``test`` as a ``DynamicOutputShapeTest`` (``TestGenerated.cpp``): not an
    expected failure and no operation of :data:`NO_DYNAMIC_VARIANT`."""
    return not test.expect_failure and not (test.operations & NO_DYNAMIC_VARIANT)


def with_unknown_output_shapes(model: HalModel) -> HalModel:
    """The model with every main output's dimensions set to 0, rank kept (AOSP's dynamic-shape
    rerun: ``getOperandType`` in ``GeneratedTestUtils.cpp``)."""
    operands = list(model.main.operands)
    for index in model.main.output_indexes:
        operands[index] = dataclasses.replace(operands[index],
                                              dimensions=(0,) * len(operands[index].dimensions))
    main = dataclasses.replace(model.main, operands=tuple(operands))
    return dataclasses.replace(model, main=main)


def feed_inputs(test: CtsTest) -> list[np.ndarray | None]:
    """The test's inputs as AOSP feeds them: an input without data is omitted
    (``setInput(i, nullptr, 0)`` in ``TestGenerated.cpp``), e.g. TRANSPOSE's optional perm."""
    return [None if value.size == 0 else value for value in test.inputs]


def tested_operations(tests: Sequence[CtsTest]) -> list[str]:
    """The operation each test of one spec file tests: the one operation type the main model of
    every test of the spec uses, else the test's last operation (AOSP's generator puts its helpers
    first: the dummy ``ADD``s of ``*_as_internal``, the ``BOX_WITH_NMS_LIMIT`` and ``ROI_ALIGN``
    that feed a ``*_zero_sized`` test's operation)."""
    kinds = [frozenset(op.type for op in test.model.main.operations) for test in tests]
    common = frozenset.intersection(*kinds) if kinds else frozenset()
    if len(common) == 1:
        return [next(iter(common)).name] * len(tests)
    return [_last_operation(test) for test in tests]


def _last_operation(test: CtsTest) -> str:
    operations = test.model.main.operations
    return operations[-1].type.name if operations else "(no operation)"


def run_test(test: CtsTest, backend: Backend = cpu_backend,
             supported: Iterable[OperationType] | None = None,
             unknown_output_shapes: bool = False, tested: str | None = None) -> TestResult:
    """Run one test and judge it; with ``unknown_output_shapes``, a test that has a dynamic
    variant runs with its outputs' shapes unknown, any other in its static form (as AOSP, which
    runs those in its other suites), its message starting with :data:`STATIC_FORM`. ``tested``
    is the operation it tests (default: its last operation; see :func:`tested_operations`)."""
    supported = registry.supported_types() if supported is None else frozenset(supported)
    ops = tuple(sorted(op.name for op in test.operations))
    tested = _last_operation(test) if tested is None else tested
    missing = sorted(op.name for op in test.operations - supported)
    if missing:
        return TestResult(test.name, test.spec, SKIPPED, ops, f"unsupported: {', '.join(missing)}", tested)
    dynamic = unknown_output_shapes and has_dynamic_variant(test)
    status, message = _judge(test, backend, with_unknown_output_shapes(test.model) if dynamic
                             else test.model)
    if unknown_output_shapes and not dynamic:
        message = f"{STATIC_FORM}; {message}" if message else STATIC_FORM
    return TestResult(test.name, test.spec, status, ops, message, tested)


#: Message prefix of a test run in its static form by a ``--dynamic-output-shapes`` run.
STATIC_FORM = "static form (AOSP has no dynamic-shape variant)"


def _judge(test: CtsTest, backend: Backend, model: HalModel) -> tuple[str, str]:
    try:
        outputs = backend(model, feed_inputs(test))
    except Unsupported as why:  # refused up front: what an expected failure wants
        return (PASSED, f"rejected: {why}") if test.expect_failure else (SKIPPED, str(why))
    except Exception as error:  # noqa: BLE001 - any backend error is a test outcome
        if test.expect_failure:
            return PASSED, f"rejected: {error}"
        return FAILED, "".join(traceback.format_exception_only(type(error), error)).strip()
    if test.expect_failure:
        return FAILED, "expected a failure, run succeeded"
    problems = accuracy.check_test_outputs(test, outputs)
    return (FAILED if problems else PASSED), "; ".join(problems)


def vector_files(paths: Iterable[str | Path] | None = None) -> list[Path]:
    """Expand files and directories (recursively, ``*.json.gz``); None = the whole fixture."""
    files: list[Path] = []
    for path in [CTS_ROOT] if paths is None else paths:
        path = Path(path)
        files += sorted(path.rglob("*.json.gz")) if path.is_dir() else [path]
    return files


def _selected(test: CtsTest, wanted: frozenset[str] | None) -> bool:
    return wanted is None or any(op.name in wanted for op in test.operations)


def run_vectors(paths: Iterable[str | Path] | None, backend: Backend | None = None,
                ops_filter: Iterable[str | OperationType] | None = None,
                supported: Iterable[OperationType] | None = None,
                unknown_output_shapes: bool = False) -> Report:
    """Run every test of the vector files; ``ops_filter`` keeps tests using any listed op."""
    wanted = None if ops_filter is None else frozenset(
        op.name if isinstance(op, OperationType) else str(op).upper() for op in ops_filter)
    supported = registry.supported_types() if supported is None else frozenset(supported)
    report = Report()
    for path in vector_files(paths):
        tests = load_file(path)
        for test, tested in zip(tests, tested_operations(tests)):
            if _selected(test, wanted):
                report.results.append(run_test(test, backend or cpu_backend, supported,
                                               unknown_output_shapes, tested))
    return report


#: What the table's rows count, printed above it.
TABLE_NOTE = "each test counts once, under the operation it tests (not its helpers, e.g. *_as_internal's ADDs)"


def format_table(report: Report) -> str:
    """What the rows count, the tests per tested operation as fixed-width text, their total
    row, then the summary line."""
    def row(name: str, counts) -> str:
        return f"{name:<32}{counts[PASSED]:>8}{counts[FAILED]:>8}{counts[SKIPPED]:>9}"
    lines = [TABLE_NOTE, f"{'operation tested':<32}{'passed':>8}{'failed':>8}{'skipped':>9}"]
    lines += [row(op, counts) for op, counts in report.per_operation().items()]
    lines += [row("total", report.counts()), report.summary()]
    return "\n".join(lines)
