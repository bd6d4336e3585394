"""CTS vectors through a real ``sample-all`` driver process give the same verdicts as the
in-process reference device (``nnscope cts --device sample-all``)."""
from __future__ import annotations

import pytest

from runtime import manager
from runtime.cli.cts import make_backend
from runtime.cts import harness, loader
from runtime.drivers.cpu import CpuDevice
from runtime.drivers.ipc import RemoteDevice

ROOT = loader.CTS_ROOT
#: A representative subset: float and quant8 ops, relaxed float, dynamic shapes, an expected failure.
SUBSET = ("V1_0/add.json.gz", "V1_0/add_quant8.json.gz", "V1_0/conv_float.json.gz",
          "V1_0/depthwise_conv2d_quant8.json.gz", "V1_0/fully_connected_float.json.gz",
          "V1_0/softmax_float_1.json.gz", "V1_0/reshape.json.gz", "V1_1/add_relaxed.json.gz",
          "V1_2/quantize.json.gz", "V1_3_cts_only/concat_invalid_rank.json.gz")


@pytest.fixture(scope="module")
def sample_all():
    device = RemoteDevice("sample-all", timeout_s=60.0)
    manager.forTest_set_devices([CpuDevice(), device])
    yield device
    manager.forTest_reset()
    device.shutdown()


def _verdicts(report: harness.Report) -> dict[str, str]:
    return {result.name: result.status for result in report.results}


def test_subset_through_ipc_matches_the_reference(sample_all):
    paths = [ROOT / name for name in SUBSET if (ROOT / name).exists()]
    assert len(paths) >= 8
    through_ipc = harness.run_vectors(paths, make_backend("sample-all"))
    reference = harness.run_vectors(paths, make_backend("nnapi-reference"))
    assert sample_all.pid is not None and sample_all.process.alive()
    assert _verdicts(through_ipc) == _verdicts(reference)
    counts = through_ipc.counts()
    assert counts[harness.PASSED] > 20 and counts[harness.FAILED] == 0, harness.format_table(through_ipc)
