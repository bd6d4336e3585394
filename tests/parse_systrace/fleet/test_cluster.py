"""The engine on a real Dask cluster made of the ``distributed`` command-line tools: the same
dataset as the embedded default, and a worker killed with SIGKILL mid-run costs no trace."""
from __future__ import annotations

import pytest

from nnscope.parse_systrace.fleet import build, query
from tests.parse_systrace.fleet.conftest import PATTERN
from tests.parse_systrace.fleet.support import DaskCluster, tables


@pytest.fixture
def cluster(tmp_path):
    dask_cluster = DaskCluster(tmp_path)
    try:
        yield dask_cluster
    finally:
        dask_cluster.stop()


def test_an_external_cluster_gives_the_embedded_dataset(lab, embedded, cluster, tmp_path):
    dataset = tmp_path / "external.fleet"
    report = build(dataset, [str(lab[0])], pattern=PATTERN, scheduler=cluster.address, progress=False)
    assert (report.parsed, report.failed) == (embedded[1].parsed, embedded[1].failed)
    assert tables(dataset) == tables(embedded[0])


def test_a_worker_killed_mid_run_loses_and_doubles_no_trace(lab, embedded, cluster, tmp_path):
    dataset, killed = tmp_path / "killed.fleet", []

    def kill_once(counts: dict) -> None:
        if counts["done"] >= 20 and not killed:
            cluster.kill_worker(0)
            killed.append(counts["remaining"])

    report = build(dataset, [str(lab[0])], pattern=PATTERN, scheduler=cluster.address,
                   progress=False, on_result=kill_once)
    assert killed and killed[0] > 0, "the worker was killed before the end"
    assert cluster.workers[0].poll() is not None
    assert report.parsed == embedded[1].parsed and report.duplicates == 0
    (ids,) = query(dataset, "SELECT count(*) = count(DISTINCT trace_id) FROM traces")[1]
    assert ids == (True,)
    assert tables(dataset) == tables(embedded[0])
