"""``nnscope run --per-op`` (issue 37, "a per-operation table in the terminal"): each
operation's device, step, median time, share and the reason it went there, the reason coming
from the partitioner as data (:class:`runtime.partition.Placement`)."""
from __future__ import annotations

import re

from nnscope.runtime.builtin_models import conv_pad_chain
from nnscope.runtime.cli._per_op import operation_times
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
from nnscope.runtime.hal.types import Preference
from nnscope.runtime.partition import partition
from nnscope.runtime.__main__ import main
from nnscope.tracing.span import ThreadTrack, TraceData


def test_the_partition_says_why_each_operation_went_where_it_did():
    model = conv_pad_chain(operations=3, size=4, channels=2).to_hal()  # CONV_2D, PAD, CONV_2D
    minimal = SampleDriver(SAMPLES["sample-minimal"])                  # has no PAD
    part = partition(model, [minimal, CpuDevice()], Preference.FAST_SINGLE_ANSWER)
    pad = part.placements[1]
    assert (pad.operation, pad.type_name, pad.device) == (1, "PAD", "nnapi-reference")
    assert pad.refused == ("sample-minimal",)
    assert pad.reason == "the only device that can; sample-minimal can't do PAD"
    assert part.placements[0].reason == "best execTime (0.40) of 2 that can"


def test_times_count_the_benchmark_executions_only_and_join_a_phase_switch():
    events = [(0, "[NN_LA_PWU]warmup"), (1, "[NN_LA_PE]execution"), (2, "[NN_LC_PE]addFloat32 #0"),
              (900, None), (901, None), (902, None),
              (1000, "[NN_LA_PBM]benchmark")]
    for start, ns in ((1000, 3000), (5000, 5000)):
        events += [(start + 1, "[NN_LA_PE]execution"), (start + 2, "[NN_LC_PT]addFloat32 #0"),
                   (start + 3, None), (start + 3, "[SW][NN_LC_PC]addFloat32 #0"),
                   (start + 2 + ns, None), (start + ns + 10, "[NN_LC_PE]reluFloat32 #1 (step 1 #0)"),
                   (start + ns + 20, None), (start + ns + 30, None)]
    events += [(20000, None)]
    trace = TraceData({1: "app"}, [ThreadTrack(1, 1, "main", events)])
    assert operation_times(trace) == {0: [0.003, 0.005], 1: [1e-05, 1e-05]}


def test_run_per_op_prints_every_operation_with_device_step_time_and_reason(capsys):
    assert main(["run", "--device", "sample-minimal", "--device", "nnapi-reference", "--per-op",
                 "--executions", "3", "--warmup", "1", "--no-summary"]) == 0
    out = capsys.readouterr().out
    assert "median over 3 benchmark executions (warm-up excluded)" in out
    rows = [line for line in out.splitlines() if re.match(r"\s+\d+  [A-Z_]", line)]
    assert len(rows) == 31  # the built-in MobileNet
    softmax = next(row for row in rows if " SOFTMAX " in row)
    assert re.search(r"SOFTMAX\s+nnapi-reference\s+\d+\s+\d+\.\d{3}\s+\d+\.\d%  the only device "
                     r"that can; sample-minimal can't do SOFTMAX$", softmax), softmax
    shares = [float(m) for m in re.findall(r" (\d+\.\d)%  ", out)]
    assert abs(sum(shares) - 100) < 0.1 * len(shares)


def test_run_without_per_op_names_the_flag_when_kernels_ran(capsys):
    assert main(["run", "--device", "nnapi-reference", "--executions", "1", "--warmup", "0",
                 "--no-summary"]) == 0
    out = capsys.readouterr().out
    assert "per-operation times of 31 operations: add --per-op" in out
    assert "why there" not in out
