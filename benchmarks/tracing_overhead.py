"""Cost of NNTRACE scopes (off, on) next to an OpenTelemetry SDK span, and export of 1M spans.

Scope costs are measured side by side (round robin, best of several repeats, in process
CPU time) since the machine is noisy; export targets are checked on CPU seconds, and
wall seconds are reported too. Each export runs in a fresh subprocess that builds a synthetic
1,000,000-span trace (4 processes x 3 threads, contract names, nesting up to depth 3),
then reports the export's seconds and its peak RSS growth (VmHWM reset through
/proc/self/clear_refs where Linux allows, else the ru_maxrss delta).

Usage:
    python benchmarks/tracing_overhead.py [--spans N] [--quick]

Prints human-readable lines, writes ``benchmarks/results/tracing_overhead.json`` and
prints the same JSON object as the last line.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nnscope import tracing  # noqa: E402
from nnscope.tracing import Phase, TraceSession, _buffer  # noqa: E402
from nnscope.tracing.exporters import ExportResult, get_exporter  # noqa: E402
from nnscope.tracing.span import ThreadTrack, TraceData  # noqa: E402

from _common import write_results  # noqa: E402

TARGETS = {"disabled_us": 0.15, "enabled_us": 1.5, "otel_over_enabled": 10.0,
           "export_s": 5.0, "export_peak_mb": 400.0}
_CLOCK = time.process_time  # CPU time: other jobs on a busy machine do not count
NAMES = [
    ("[NN_LA_PE]runInference", "[NN_LR_PE]ANeuralNetworksExecution_compute",
     "[NN_LI_PE]StepExecutor::startComputeOnDevice::execute"),
    ("[NN_LD_PE]SampleDriver::execute", "HIDL::IPreparedModel::execute::server",
     "[NN_LC_PCO]conv2dFloat32"),
    ("[NN_LR_PIO]ANeuralNetworksExecution_setInput", "[NN_LU_PU]validateRequest",
     "[SW][NN_LC_PCO]depthwiseConvFloat32"),
]


def _scope_timer(kind: str, number: int):
    """Return a function timing ``number`` scopes of ``kind`` (seconds per scope)."""
    if kind == "otel":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        otel = provider.get_tracer("bench")
        stmt = "with otel.start_as_current_span('[NN_LR_PE]ANeuralNetworksExecution_compute'): pass"
        timer = timeit.Timer(stmt, timer=_CLOCK, globals={"otel": otel})
        return lambda: (timer.timeit(number) / number, exporter.clear())[0]
    stmt = "with runtime(P, 'ANeuralNetworksExecution_compute'): pass"
    timer = timeit.Timer(stmt, timer=_CLOCK, globals={"runtime": tracing.runtime, "P": Phase.EXECUTION})

    def run() -> float:
        if kind == "disabled":
            return timer.timeit(number) / number
        with TraceSession():
            result = timer.timeit(number) / number
            _buffer.clear()  # keep the session from collecting millions of events
        return result
    return run


def measure_scopes(repeats: int, number: int) -> dict[str, float]:
    """Best per-scope microseconds of each kind, measured round robin."""
    counts = {"disabled": number, "enabled": number, "otel": max(1000, number // 20)}
    timers = {kind: _scope_timer(kind, count) for kind, count in counts.items()}
    best = {kind: float("inf") for kind in timers}
    for _ in range(repeats):
        for kind, run in timers.items():
            best[kind] = min(best[kind], run() * 1e6)
    return {f"{kind}_us": round(value, 4) for kind, value in best.items()}


def synthetic_trace(spans: int) -> TraceData:
    """``spans`` spans over 4 processes x 3 threads, nested three deep, 1-3 us apart."""
    processes = {1000 + p * 100: f"nn-process-{p}" for p in range(4)}
    tracks = [ThreadTrack(pid, pid + t, f"NeuralNetworks-{t}") for pid in processes for t in range(3)]
    ts = 10_000_000_000_000
    groups, single = divmod(spans, 3)
    for index, track in enumerate(tracks):
        outer, middle, inner = NAMES[index % len(NAMES)]
        append = track.events.append
        for step in range(groups // len(tracks) + (index < groups % len(tracks))):
            base = ts + step * 9_000 + index * 7
            append((base, outer))
            append((base + 1_000, middle))
            append((base + 2_100, inner))
            append((base + 5_300, None))
            append((base + 6_000, None))
            append((base + 8_000, None))
    for step in range(single):  # the remainder, after everything else on the first thread
        last = tracks[0].events[-1][0] if tracks[0].events else ts
        tracks[0].events += [(last + 1_000, NAMES[0][0]), (last + 2_000, None)]
    return TraceData(processes, tracks)


def _rss_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def export_step(exporter_name: str, spans: int) -> dict:
    """Build the trace, export it once; return seconds and the step's peak RSS growth."""
    trace = synthetic_trace(spans)
    gc.collect()
    before_kb = _rss_kb("VmRSS") or 0
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reset = _reset_peak()
    suffix = {"chrome-json": ".json", "systrace": ".txt"}[exporter_name]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "trace" + suffix)
        start, cpu_start = time.perf_counter(), time.process_time()
        result = get_exporter(exporter_name)(path).export(trace)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        size_mb = os.path.getsize(path) / 2**20 if result is ExportResult.SUCCESS else 0.0
    if reset and _rss_kb("VmHWM") is not None:
        peak_kb = _rss_kb("VmHWM") - before_kb
    else:
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - maxrss_before
    return {"ok": result is ExportResult.SUCCESS, "seconds": round(seconds, 3), "cpu_s": round(cpu, 3),
            "peak_mb": round(max(peak_kb, 0) / 1024, 1), "file_mb": round(size_mb, 1),
            "trace_rss_mb": round(before_kb / 1024, 1), "spans": trace.span_count()}


def run_export(exporter_name: str, spans: int) -> dict:
    """Run :func:`export_step` in a fresh interpreter (results come back as JSON)."""
    done = subprocess.run([sys.executable, __file__, "--export-step", exporter_name,
                           "--spans", str(spans)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and iterations")
    parser.add_argument("--export-step", choices=["chrome-json", "systrace"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.export_step:
        print(json.dumps(export_step(args.export_step, args.spans)))
        return
    scopes = measure_scopes(repeats=3 if args.quick else 7, number=50_000 if args.quick else 300_000)
    scopes["otel_over_enabled"] = round(scopes["otel_us"] / scopes["enabled_us"], 1)
    for kind in ("disabled", "enabled", "otel"):
        print(f"{kind:>8} scope: {scopes[kind + '_us']:.3f} us")
    print(f"OpenTelemetry span / enabled NNTRACE scope: {scopes['otel_over_enabled']}x")
    results = dict(scopes)
    for name in ("chrome-json", "systrace"):
        step = run_export(name, args.spans)
        key = name.replace("-", "_")
        print(f"export {step['spans']} spans to {name}: {step['seconds']:.2f} s "
              f"({step['cpu_s']:.2f} s CPU), peak +"
              f"{step['peak_mb']:.0f} MB (trace in memory {step['trace_rss_mb']:.0f} MB, "
              f"file {step['file_mb']:.0f} MB)")
        results.update({f"{key}_s": step["seconds"], f"{key}_cpu_s": step["cpu_s"],
                        f"{key}_peak_mb": step["peak_mb"],
                        f"{key}_ok": step["ok"]})
    results["spans"] = args.spans
    results["targets_met"] = all([
        scopes["disabled_us"] <= TARGETS["disabled_us"], scopes["enabled_us"] <= TARGETS["enabled_us"],
        scopes["otel_over_enabled"] >= TARGETS["otel_over_enabled"],
        *(results[f"{k}_cpu_s"] <= TARGETS["export_s"] for k in ("chrome_json", "systrace")),
        *(results[f"{k}_peak_mb"] <= TARGETS["export_peak_mb"] for k in ("chrome_json", "systrace"))])
    write_results("tracing_overhead", results)


if __name__ == "__main__":
    main()
