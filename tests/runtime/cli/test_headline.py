"""The figures ``nnscope run`` prints add up (issue 37, item 4): driver start-up, cold and warm
compilation each on their own; the latency's n is the benchmark executions, warm-up said and
not counted; ``--json`` carries the same figures."""
from __future__ import annotations

import json
import re

from nnscope.runtime.__main__ import main


def test_run_shows_start_up_cold_and_warm_compilation_and_what_the_latency_counts(capsys):
    assert main(["run", "--device", "nnapi-reference", "--executions", "3", "--warmup", "2",
                 "--no-summary"]) == 0
    out = capsys.readouterr().out
    text = " ".join(out.split())  # the compilation line wraps at 100 columns
    figures = re.search(r"compilation: driver start-up (\d+\.\d\d) ms \(the table's Initialization\), "
                        r"cold (\d+\.\d\d) ms \(first finish, drivers up\), warm (\d+\.\d\d) ms", text)
    assert figures, out
    assert "latency over 3 executions (after 2 warm-up, not counted): p50 " in out


def test_run_json_has_the_executions_counted_the_warm_up_and_the_compilation_figures(capsys):
    assert main(["run", "--device", "nnapi-reference", "--executions", "2", "--warmup", "1",
                 "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["executions"] == 2 and stats["warmup_executions"] == 1
    assert all(stats[key] >= 0 for key in ("startup_ms", "cold_compile_ms", "warm_compile_ms"))
