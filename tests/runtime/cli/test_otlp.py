"""``nnscope run --otlp``: one run arrives at an OTLP/HTTP receiver (127.0.0.1, decoded with
``opentelemetry-proto``) as one trace: every span of the Chrome JSON export, one root
(``[NN_LA_PO]``), no missing parent, each driver span under the runtime's client span of the
request that caused it, with CLIENT/SERVER kinds and per-process service names; the same with
bursts and with a collector that is down (one warning line, the trace file still written)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support.otlp_receiver import (CLIENT, SERVER, OtlpReceiver, ancestors, check_one_trace,
                                         closed_port_endpoint)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUN = ["run", "--executions", "2", "--warmup", "1", "--no-summary"]
EXECUTIONS = ("executeSynchronously", "execute", "executeBurst", "executeFenced")


def _nnscope(*args, env=None):
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=600, env=env)


def chrome_span_count(path) -> int:
    events = json.loads(path.read_text())["traceEvents"]
    return sum(1 for e in events if e.get("ph") == "B") + sum(1 for e in events if e.get("ph") == "X")


def check_driver_spans(by_id) -> int:
    """Every driver span descends from the runtime's client span of its request (and, for an
    execution, from the application's execution span); kinds and services as the issue asks."""
    servers = 0
    for received in by_id.values():
        name, kind = received.span.name, received.span.kind
        if name.startswith("HIDL::") and name.endswith("::client"):
            assert kind == CLIENT, name
        elif name.startswith("HIDL::") and name.endswith("::server"):
            assert kind == SERVER, name
        process = received.attribute("process.title")
        if received.service == "nnscope":
            assert not process.endswith("-driver")
            continue
        assert received.service == f"nnscope-driver/{process.removesuffix('-driver')}"
        chain = list(ancestors(by_id, received))
        runtime_side = next(a for a in chain if a.service == "nnscope")
        if name.startswith("HIDL::") and name.endswith("::server"):
            servers += 1
            assert runtime_side.span.name == name.replace("::server", "::client")
            if name.split("::")[2] in EXECUTIONS:
                assert any(a.span.name.startswith("[NN_LA_PE]") for a in chain), name
    return servers


def _table(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()
            if line.startswith(("Application", "Runtime", "IPC", "Driver", "CPU", "Total"))]


def _in_microseconds(path, out) -> None:
    """The Chrome JSON trace ``path`` with every timestamp cut to the microsecond as the
    systrace text the run summarizes cuts it (a span's begin and end each, not its duration),
    written to ``out``: the same instants, so the same table to the last digit."""
    data = json.loads(path.read_text())
    for event in data["traceEvents"]:
        if "ts" in event:
            begin = round(event["ts"] * 1000)
            if "dur" in event:
                event["dur"] = (begin + round(event["dur"] * 1000)) // 1000 - begin // 1000
            event["ts"] = begin // 1000
    out.write_text(json.dumps(data))


def _summary_of(path) -> str:
    from nnscope import parse_systrace

    return "".join(parse_systrace.render_text(r) for r in parse_systrace.summarize(str(path), tolerant=True))


def _same_summary(printed: str, trace, tmp_path) -> None:
    """The Chrome JSON (nanoseconds) reads back to a table of the same rows and missing cells;
    cut to the systrace text's microseconds, to the very table the run printed."""
    rows, read_back = _table(printed), _table(_summary_of(trace))
    assert rows and [r[0] for r in rows] == [r[0] for r in read_back]
    for row, back in zip(rows, read_back):
        assert [c for c in row if not c[0].isdigit()] == [c for c in back if not c[0].isdigit()]
    microseconds = tmp_path / "t_us.json"
    _in_microseconds(trace, microseconds)
    assert _table(_summary_of(microseconds)) == rows


@pytest.mark.parametrize("burst", [False, True], ids=["execute", "burst"])
def test_run_sends_one_trace_per_run(tmp_path, burst):
    trace = tmp_path / "t.json"
    run = [*RUN, "--burst"] if burst else [arg for arg in RUN if arg != "--no-summary"]
    with OtlpReceiver() as receiver:
        done = _nnscope(*run, "--otlp", receiver.endpoint, "--trace", trace)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert set(receiver.paths) == {"/v1/traces"}
    assert len(receiver.spans) == chrome_span_count(trace)
    by_id = check_one_trace(receiver.spans)
    assert check_driver_spans(by_id) > 0
    names = {r.span.name for r in by_id.values() if r.service != "nnscope"}
    server = "HIDL::IBurstContext::executeBurst::server" if burst \
        else "HIDL::IPreparedModel::executeSynchronously::server"
    assert server in names
    if not burst:  # the Chrome JSON of the same run reads back to the summary the run printed
        _same_summary(done.stdout, trace, tmp_path)


def test_otlp_without_a_value_uses_the_environment(tmp_path):
    with OtlpReceiver() as receiver:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        done = _nnscope(*RUN, "--device", "sample-all", "--otlp", env=env)
    assert done.returncode == 0, done.stderr
    check_one_trace(receiver.spans)


@pytest.mark.parametrize("form", ["otlp://HOST:PORT", "otlp"])
def test_nnscope_trace_otlp_sends_any_program(tmp_path, form):
    program = ("from nnscope import tracing\nfrom tracing import Phase\n"
               "with tracing.application(Phase.OVERALL, 'p'):\n"
               "    with tracing.runtime(Phase.EXECUTION, 'x'):\n        pass\n")
    with OtlpReceiver() as receiver:
        env = {**os.environ, "NNSCOPE_TRACE": "otlp://" + receiver.endpoint.split("://")[1]}
        if form == "otlp":
            env.update(NNSCOPE_TRACE="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                              cwd=REPO, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert sorted(r.span.name for r in receiver.spans) == ["[NN_LA_PO]p", "[NN_LR_PE]x"]
    check_one_trace(receiver.spans)


def test_a_collector_that_is_down_costs_one_warning_line(tmp_path):
    trace = tmp_path / "t.json"
    done = _nnscope(*RUN, "--device", "sample-all", "--otlp", closed_port_endpoint(),
                    "--trace", trace)
    assert done.returncode == 0, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "warning" in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith(f"files written: {trace}"), done.stderr
    assert chrome_span_count(trace) > 0


def test_no_collector_listening_is_said_within_seconds():
    """Issue 37: with nothing at $OTEL_EXPORTER_OTLP_ENDPOINT the run waited ~67 s (the
    exporter's retries, batch after batch) and then claimed trace files no one asked for."""
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": closed_port_endpoint()}
    start = time.monotonic()
    done = _nnscope("run", "--executions", "1", "--no-summary", "--otlp", env=env)
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert line == (f"nnscope: warning: trace not sent: no OTLP collector listens at "
                    f"{env['OTEL_EXPORTER_OTLP_ENDPOINT']} (connection refused); files written: none")
    assert elapsed < 30, elapsed  # the whole run; the retries alone took over 60 s


def test_a_malformed_endpoint_is_a_usage_error():
    done = _nnscope(*RUN, "--otlp", "ftp://host")
    assert done.returncode == 2
    assert "--otlp" in done.stderr and "Traceback" not in done.stderr


def test_bench_sends_one_trace_per_model_and_device():
    with OtlpReceiver() as receiver:
        done = _nnscope("bench", "tiny_add", "--device", "sample-all", "--device", "nnapi-reference",
                        "--executions", "2", "--warmup", "0", "--otlp", receiver.endpoint)
    assert done.returncode == 0, done.stderr
    traces: dict = {}
    for received in receiver.spans:
        traces.setdefault(received.span.trace_id, []).append(received)
    roots = {}
    for spans in traces.values():
        by_id = {r.span.span_id: r for r in spans}
        (root,) = [r for r in spans if not r.span.parent_span_id]
        assert all(r.span.parent_span_id in by_id for r in spans if r is not root)
        roots[root.span.name] = spans
    assert {"[NN_LA_PO]tiny_add on sample-all", "[NN_LA_PO]tiny_add on nnapi-reference"} <= set(roots)
    assert set(roots) <= {"[NN_LA_PO]tiny_add on sample-all", "[NN_LA_PO]tiny_add on nnapi-reference",
                          "[NN_LA_PO]tiny_add reference outputs", "[NN_LA_PI]start drivers",
                          "[NN_LA_PT]shutdown drivers"}
    case = roots["[NN_LA_PO]tiny_add on sample-all"]
    assert any(r.service == "nnscope-driver/sample-all" and r.span.kind == SERVER for r in case)
