"""The page of a delegate-mode run (issue 36) in headless Chromium at 1400 px: the page's
self-test (``#selftest``) sees no script error, the Delegation table has one row per operator,
and the timeline draws the app's CPU operator spans (named by their TFLite operator) next to the
``TfLiteNnapiDelegate`` spans of the partitions and the drivers' NNAPI spans."""
from __future__ import annotations

from tests.dashboards.test_browser_pictures import selftest
from tests.dashboards.test_browser_views import expected_lanes
from tests.support.programs import needs_chromium

pytestmark = needs_chromium


def test_delegate_mode_page_at_1400_px(tmp_path, delegate_run):
    data, _ = selftest(tmp_path, delegate_run.page)  # no script errors, 1400 px wide
    report = delegate_run.delegation
    assert data["delegationRows"] == len(report["operators"]) == report["total"]
    assert data["delegationSummary"] == report["summary"]
    assert data["lanes"] == data["lanesDrawn"] == expected_lanes(delegate_run.trace)
    drawn = set(data["namesDrawn"])
    cpu = {row["operator"] for row in report["operators"] if row["partition"] is None}
    assert cpu & drawn, (cpu, drawn)
    assert "TfLiteNnapiDelegate" in drawn
    assert any(name.startswith("[NN_LD_PE]") for name in drawn), drawn  # a driver's execution
    assert data["overflow"]["cards"] == [] and data["overflow"]["page"] <= 0, data["overflow"]
