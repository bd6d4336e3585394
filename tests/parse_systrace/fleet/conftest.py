"""Shared by the fleet tests: one generated device lab and its dataset built on the embedded cluster.

The lab (tests/support/fleet_gen.py): 3 devices x 2 builds x 3 models, 12 traces each in every
format, the injected regressions of ``fleet_gen.REGRESSIONS`` and one broken file of each kind
in the groups of pixel6/b101. Both are made once per session, in a temporary folder.
"""
from __future__ import annotations

import pytest

pytest.importorskip("distributed")
pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

from nnscope.parse_systrace.fleet import build  # noqa: E402
from tests.support.fleet_gen import generate_fleet  # noqa: E402

PATTERN = "{device}/{build}/{model}/*"
#: Traces per device, build and model.
PER_GROUP = 12


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """(root folder, Truth) of the generated lab."""
    root = tmp_path_factory.mktemp("lab")
    return root, generate_fleet(root, traces_per_group=PER_GROUP, execs=8, seed=35)


@pytest.fixture(scope="session")
def embedded(lab, tmp_path_factory):
    """(dataset folder, BuildReport) of the lab built on the embedded cluster (2 workers)."""
    dataset = tmp_path_factory.mktemp("embedded") / "lab.fleet"
    report = build(dataset, [str(lab[0])], pattern=PATTERN, workers=2, progress=False)
    return dataset, report
