"""``nnscope cts --device sample-litert``: every vector whose operations the driver claims
passes, with static and with unknown output shapes; the vectors it does not claim are skipped
("sample-litert does not support ..."). The claimed count is pinned: a change in what the driver
claims shows here (and must be reflected in the README's table)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.runtime.cts.test_cts_full import TOTAL, _table
from tests.support.paths import REPO
from tests.support.programs import needs_litert

pytestmark = needs_litert
#: Vectors sample-litert claims in full and runs (expected-failure vectors it rejects excluded).
CLAIMED = 2914
REJECTED = 61  # expectFailure vectors: compilation refused, as the test expects


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic-output-shapes"])
def test_claimed_vectors_pass(dynamic, record_property):
    flags = ["--device", "sample-litert", "--json"] + (["--dynamic-output-shapes"] if dynamic else [])
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "cts", *flags], capture_output=True,
                          text=True, cwd=REPO, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    record_property("cts_table", _table(f"nnscope cts {' '.join(flags[:2] + flags[3:])}", report))
    results = report["results"]
    assert [r for r in results if r["status"] == "failed"] == []
    ran = [r for r in results if r["status"] == "passed" and "rejected: " not in r["message"]]
    skipped = [r for r in results if r["status"] == "skipped"]
    assert len(ran) == CLAIMED
    assert len(results) - len(ran) - len(skipped) == REJECTED
    assert all("sample-litert does not support " in r["message"] for r in skipped)  # maybe after the static-form note
    assert len(results) == TOTAL
