"""A driver killed mid-run: its spans up to the kill, the failed call (status ERROR,
DEAD_OBJECT), the CPU fallback and the restarted driver's spans all arrive at an OTLP/HTTP
receiver as the one trace of the run."""
from __future__ import annotations

import os
import signal

from nnscope import tracing
from nnscope.runtime import Compilation
from tests.runtime.helpers import chain_model
from tests.runtime.test_driver_restart import _run
from tests.support.otlp_receiver import OtlpReceiver, ancestors, check_one_trace
from nnscope.tracing import Phase
from nnscope.tracing.exporters import ExportResult
from nnscope.tracing.exporters.otel import OtelExporter

STATUS_ERROR = 2  # opentelemetry.proto Status.STATUS_CODE_ERROR


def test_a_killed_driver_and_its_fallback_stay_in_the_one_trace(fast):
    with tracing.TraceSession() as session:
        with tracing.application(Phase.OVERALL, "killed driver"):
            compilation = Compilation(chain_model())
            compilation.finish()
            _run(compilation, 0)
            killed = fast.pid
            os.kill(killed, signal.SIGKILL)
            _run(compilation, 1)  # DEAD_OBJECT, then the CPU fallback
            _run(compilation, 2)  # on the restarted driver
            restarted = fast.pid
            with tracing.application(Phase.TERMINATION, "shutdown"):
                fast.shutdown()
    with OtlpReceiver() as receiver:
        exporter = OtelExporter(endpoint=receiver.endpoint)
        assert exporter.export(session.collect()) is ExportResult.SUCCESS
        exporter.shutdown()
    assert len(receiver.spans) == session.collect().span_count()
    by_id = check_one_trace(receiver.spans)
    pids = {r.attribute("process.pid") for r in receiver.spans}
    assert {killed, restarted, os.getpid()} <= pids and killed != restarted
    for received in receiver.spans:
        if received.attribute("process.pid") in (killed, restarted):
            assert any(a.service == "nnscope" for a in ancestors(by_id, received))
    failed = [r for r in receiver.spans if r.span.status.code == STATUS_ERROR]
    assert failed and {r.attribute("error.type") for r in failed} == {"DEAD_OBJECT"}
    assert all(r.service == "nnscope" for r in failed)
    fallback = [r for r in receiver.spans if r.span.name.startswith("[NN_LC_")
                and r.attribute("process.pid") == os.getpid()]
    assert fallback, "the CPU fallback's spans"
