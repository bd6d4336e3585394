"""Partitions: TFLite's node subsets and the delegate's limit (default 3, the largest kept);
constant-only operators folded into their consumers."""
from __future__ import annotations

import pytest

from nnscope.runtime.delegate import Category, CpuOperator, Partition, decide
from tests.support.tflite_models import conv_gelu_conv, relu_chains


@pytest.mark.parametrize("limit, sizes", [(3, [2, 3, 4]), (1, [4]), (2, [3, 4]), (0, [1, 2, 3, 4]),
                                          (-1, [1, 2, 3, 4]), (4, [1, 2, 3, 4])])
def test_partitions_match_the_limit_option(limit, sizes):
    delegation = decide(relu_chains((1, 2, 3, 4)), max_partitions=limit)
    assert [len(p.operators) for p in delegation.partitions] == sizes
    assert [p.number for p in delegation.partitions] == list(range(len(sizes)))
    dropped = [v for v in delegation.verdicts if v.category == Category.OVER_PARTITION_LIMIT]
    assert len(dropped) == 10 - sum(sizes)
    assert delegation.summary() == (f"{sum(sizes)} of 13 operators delegated, in {len(sizes)} "
                                    f"partition{'s' if len(sizes) != 1 else ''}")


def test_default_limit_is_three_keeping_the_largest():
    assert [len(p.operators) for p in decide(relu_chains((4, 1, 3, 2))).partitions] == [4, 3, 2]


def test_ties_keep_the_earlier_partition():
    delegation = decide(relu_chains((2, 2, 2, 2)), max_partitions=2)
    assert [p.operators for p in delegation.partitions] == [(0, 1), (3, 4)]


def test_a_cpu_operator_in_the_middle_splits_the_graph_in_three_steps():
    delegation = decide(conv_gelu_conv())
    assert [type(s) for s in delegation.steps] == [Partition, CpuOperator, Partition]
    first, gelu, last = delegation.steps
    assert first.outputs == gelu.inputs and gelu.outputs == last.inputs


def test_steps_run_in_an_order_that_reads_only_written_tensors():
    delegation = decide(relu_chains((1, 2, 3, 4)), max_partitions=2)
    written = {0}
    for step in delegation.steps:
        assert set(step.inputs) <= written
        written |= set(step.outputs)
