"""Every shipped CTS vector passes, in-process (nnapi-reference) and through a driver process
(sample-all), with static and with unknown output shapes: ``nnscope cts`` as a user runs it.
The per-operation table of each run is printed at the end of the pytest output."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nnscope.runtime.cts import loader
from tests.support.paths import REPO

TOTAL = sum(spec["tests"] for spec in loader.load_index(loader.PACKAGED_VECTORS)["specs"])


@pytest.mark.parametrize("device", ["nnapi-reference", "sample-all"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic-output-shapes"])
def test_every_vector_passes(device, dynamic, record_property):
    flags = ["--device", device, "--json"] + (["--dynamic-output-shapes"] if dynamic else [])
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "cts", *flags], capture_output=True,
                          text=True, cwd=REPO, timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    record_property("cts_table", _table(f"nnscope cts {' '.join(flags[:2] + flags[3:])}", report))
    failed = [r for r in report["results"] if r["status"] != "passed"]
    assert report["summary"] == f"{TOTAL} passed, 0 failed, 0 skipped", failed[:5]
    assert TOTAL == 9127


def _table(title: str, report: dict) -> str:
    rows = [f"{title}: {report['summary']}"]
    for operation, counts in sorted(report["perOperation"].items()):
        rows.append(f"  {operation:34}" + "".join(f"{counts.get(k, 0):>8}" for k in ("passed", "failed", "skipped")))
    return "\n".join(rows)
