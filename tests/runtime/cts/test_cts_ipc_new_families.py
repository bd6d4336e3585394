"""CTS vectors of the comparison, maths, reduction, shape and space families through a real
``sample-all`` driver process pass as on the in-process reference: BOOL8 outputs, a scalar
output (RANK), an omitted optional input (TRANSPOSE), several outputs (SPLIT, TOPK_V2), NCHW,
and expected failures (``nnscope cts --device sample-all``)."""
from __future__ import annotations

import pytest

from runtime import manager
from runtime.cli.cts import make_backend
from runtime.cts import harness, loader
from runtime.drivers.cpu import CpuDevice
from runtime.drivers.ipc import RemoteDevice

SUBSET = ("V1_2/less.json.gz", "V1_2/select_v1_2.json.gz", "V1_2/logical_and.json.gz",
          "V1_3/rank.json.gz", "V1_2/transpose_v1_2.json.gz", "V1_2/split_quant8_2.json.gz",
          "V1_2/topk_v2.json.gz", "V1_2/mean_float16.json.gz", "V1_2/reduce_any.json.gz",
          "V1_2/argmax_1.json.gz", "V1_2/prelu.json.gz", "V1_2/cast.json.gz",
          "V1_2/space_to_batch_v1_2.json.gz", "V1_2/channel_shuffle.json.gz",
          "V1_2/gather_higher_rank.json.gz", "V1_2/strided_slice_invalid.json.gz",
          "V1_3_cts_only/cast_mismatching_shapes.json.gz")


@pytest.fixture(scope="module")
def sample_all():
    device = RemoteDevice("sample-all", timeout_s=60.0)
    manager.forTest_set_devices([CpuDevice(), device])
    yield device
    manager.forTest_reset()
    device.shutdown()


@pytest.mark.skipif(not (loader.CTS_ROOT / "index.json").exists(), reason="no CTS vectors")
def test_new_families_pass_through_ipc(sample_all):
    paths = [loader.CTS_ROOT / name for name in SUBSET]
    report = harness.run_vectors(paths, make_backend("sample-all"))
    counts = report.counts()
    assert sample_all.process.alive()
    assert counts[harness.FAILED] == 0 and counts[harness.SKIPPED] == 0, harness.format_table(report)
    expected_failures = [r for r in report.results if r.message.startswith("rejected")]
    assert len(expected_failures) >= 3 and counts[harness.PASSED] > 450
