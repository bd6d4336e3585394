"""CTS vectors through a real ``sample-all`` driver process give the same verdicts as the
in-process reference device (``nnscope cts --device sample-all``), family by family."""
from __future__ import annotations

import pytest

from nnscope.runtime.cli.cts import make_backend
from nnscope.runtime.cts import harness, loader

#: Per subset: its vector files, the fewest vectors that must pass, the fewest expected failures.
SUBSETS = {
    # float and quant8 core ops, relaxed float, dynamic shapes, an expected failure
    "core": (("V1_0/add.json.gz", "V1_0/add_quant8.json.gz", "V1_0/conv_float.json.gz",
              "V1_0/depthwise_conv2d_quant8.json.gz", "V1_0/fully_connected_float.json.gz",
              "V1_0/softmax_float_1.json.gz", "V1_0/reshape.json.gz", "V1_1/add_relaxed.json.gz",
              "V1_2/quantize.json.gz", "V1_3_cts_only/concat_invalid_rank.json.gz"), 20, 1),
    # zero-sized intermediates, outputs sized at execution (BOX_WITH_NMS_LIMIT, GENERATE_PROPOSALS)
    "detection": (("V1_2/roi_align.json.gz", "V1_2/roi_pooling.json.gz",
                   "V1_2/box_with_nms_limit_linear.json.gz", "V1_2/generate_proposals.json.gz",
                   "V1_2/heatmap_max_keypoint.json.gz", "V1_2/instance_normalization.json.gz",
                   "V1_0/l2_normalization.json.gz", "V1_3/embedding_lookup_v1_3.json.gz",
                   "V1_0/hashtable_lookup_float.json.gz", "V1_2/detection_postprocess.json.gz",
                   "V1_2/transpose_conv2d_large.json.gz", "V1_2/random_multinomial.json.gz"),
                  300, 0),
    # BOOL8 outputs, a scalar output (RANK), an omitted optional input (TRANSPOSE), several
    # outputs (SPLIT, TOPK_V2), NCHW, expected failures
    "tensor": (("V1_2/less.json.gz", "V1_2/select_v1_2.json.gz", "V1_2/logical_and.json.gz",
                "V1_3/rank.json.gz", "V1_2/transpose_v1_2.json.gz", "V1_2/split_quant8_2.json.gz",
                "V1_2/topk_v2.json.gz", "V1_2/mean_float16.json.gz", "V1_2/reduce_any.json.gz",
                "V1_2/argmax_1.json.gz", "V1_2/prelu.json.gz", "V1_2/cast.json.gz",
                "V1_2/space_to_batch_v1_2.json.gz", "V1_2/channel_shuffle.json.gz",
                "V1_2/gather_higher_rank.json.gz", "V1_2/strided_slice_invalid.json.gz",
                "V1_3_cts_only/cast_mismatching_shapes.json.gz"), 450, 3),
}


@pytest.mark.parametrize("subset", sorted(SUBSETS))
def test_subset_through_ipc_matches_the_reference(sample_all, subset):
    names, least_passed, least_rejected = SUBSETS[subset]
    paths = [loader.CTS_ROOT / name for name in names]
    through_ipc = harness.run_vectors(paths, make_backend("sample-all"))
    reference = harness.run_vectors(paths, make_backend("nnapi-reference"))
    assert sample_all.pid is not None and sample_all.process.alive()
    assert through_ipc.verdicts() == reference.verdicts()
    counts = through_ipc.counts()
    assert counts[harness.FAILED] == 0 and counts[harness.SKIPPED] == 0, \
        harness.format_table(through_ipc)
    assert counts[harness.PASSED] >= least_passed
    rejected = [r for r in through_ipc.results if r.message.startswith("rejected")]
    assert len(rejected) >= least_rejected
