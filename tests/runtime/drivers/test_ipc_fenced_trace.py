"""A fenced execution on a driver process, traced: the driver's executeFenced server span and
the spans of the run it starts once the fences signalled (an event of the driver's serve loop,
after the launch's reply) are linked to the runtime's ``executeFenced`` client span, so the
OpenTelemetry export has one root."""
from __future__ import annotations

import numpy as np
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nnscope import tracing
from nnscope.runtime import Execution
from tests.runtime.drivers.test_ipc_fenced import (NBYTES, SHAPE, _array, _compiled,  # noqa: F401
                                                   _shared, two_drivers)
from nnscope.tracing import Phase
from nnscope.tracing.exporters import ExportResult
from nnscope.tracing.exporters.otel import OtelExporter


def test_fenced_execution_spans_form_one_tree(two_drivers):  # noqa: F811
    device = two_drivers[0]
    a, b, out = _shared(np.ones(SHAPE)), _shared(np.full(SHAPE, 2.0)), _shared()
    with tracing.TraceSession() as session:
        with tracing.application(Phase.OVERALL, "fenced"):
            compilation = _compiled(device)
            execution = Execution(compilation)
            execution.set_input_from_memory(0, a, 0, NBYTES)
            execution.set_input_from_memory(1, b, 0, NBYTES)
            execution.set_output_from_memory(0, out, 0, NBYTES)
            event = execution.start_compute_with_dependencies([], 0)
            event.wait()
            event.free()
            with tracing.application(Phase.TERMINATION, "shutdown"):
                device.shutdown()  # its last spans are written before it exits
    np.testing.assert_allclose(_array(out), 3.0)
    memory = InMemorySpanExporter()
    exporter = OtelExporter(span_exporter=memory)
    assert exporter.export(session.collect()) is ExportResult.SUCCESS
    exporter.shutdown()
    spans = memory.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    roots = [s.name for s in spans if s.parent is None]
    assert roots == ["[NN_LA_PO]fenced"]
    assert all(s.parent.span_id in by_id for s in spans if s.parent is not None)
    server = [s for s in spans if s.name == "HIDL::IPreparedModel::executeFenced::server"]
    assert len(server) == 1
    assert by_id[server[0].parent.span_id].name == "HIDL::IPreparedModel::executeFenced::client"
    runs = [s for s in spans if s.name == "[NN_LD_PE]SampleDriver::executeFenced"]
    assert len(runs) == 2, "the launch and the run each record the driver's executeFenced"
    assert any(s.name == "[NN_LC_PE]CpuExecutor::run" for s in spans)
    for span in runs:
        names = []
        while span.parent is not None:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        assert "HIDL::IPreparedModel::executeFenced::client" in names
