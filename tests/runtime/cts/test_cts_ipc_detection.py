"""The newer operation families (detection, ROI, normalisation, lookup, transpose conv) give
the same CTS verdicts through a real ``sample-all`` driver process as on the in-process
reference device, including zero-sized intermediates and outputs whose size is only known at
execution (BOX_WITH_NMS_LIMIT, GENERATE_PROPOSALS)."""
from __future__ import annotations

import pytest

from runtime import manager
from runtime.cli.cts import make_backend
from runtime.cts import harness, loader
from runtime.drivers.cpu import CpuDevice
from runtime.drivers.ipc import RemoteDevice

ROOT = loader.CTS_ROOT
SUBSET = ("V1_2/roi_align.json.gz", "V1_2/roi_pooling.json.gz",
          "V1_2/box_with_nms_limit_linear.json.gz", "V1_2/generate_proposals.json.gz",
          "V1_2/heatmap_max_keypoint.json.gz", "V1_2/instance_normalization.json.gz",
          "V1_0/l2_normalization.json.gz", "V1_3/embedding_lookup_v1_3.json.gz",
          "V1_0/hashtable_lookup_float.json.gz", "V1_2/detection_postprocess.json.gz",
          "V1_2/transpose_conv2d_large.json.gz", "V1_2/random_multinomial.json.gz")


@pytest.fixture(scope="module")
def sample_all():
    device = RemoteDevice("sample-all", timeout_s=60.0)
    manager.forTest_set_devices([CpuDevice(), device])
    yield device
    manager.forTest_reset()
    device.shutdown()


def test_new_families_through_ipc_match_the_reference(sample_all):
    paths = [ROOT / name for name in SUBSET if (ROOT / name).exists()]
    assert len(paths) == len(SUBSET)
    through_ipc = harness.run_vectors(paths, make_backend("sample-all"))
    reference = harness.run_vectors(paths, make_backend("nnapi-reference"))
    assert sample_all.process.alive()
    assert {r.name: r.status for r in through_ipc.results} == \
        {r.name: r.status for r in reference.results}
    counts = through_ipc.counts()
    assert counts[harness.FAILED] == 0 and counts[harness.SKIPPED] == 0, \
        harness.format_table(through_ipc)
    assert counts[harness.PASSED] >= 300  # 307 when written
