"""``nnscope run --per-op``: the per-operation table in the terminal, as ``benchmark_model
--enable_op_profiling`` prints it.

One row per operation of the model, in model order: its index and type, the device and step
that run it, its median time over the benchmark executions and its share, and why the
partitioner put it there (:class:`~runtime.partition.Placement`, data, not a log line).

Times come from the CPU layer's kernel spans of the traced run (``[NN_LC_P*]conv2dFloat32 #12
(step 3 #1)``: the kernel and the operation's index in the model, see
``runtime.ops.calls.span_detail``), in whichever process ran them. Only the executions
of the Benchmark phase count (``[NN_LA_PE]`` spans under ``[NN_LA_PBM]``; warm-up excluded).
An operation's time in one execution is the sum of its spans there (a ``[SW]`` phase switch
splits one operation into two spans); its row shows the median over the executions, and its
share is that median over the sum of every row's median. A step whose device runs it as one
opaque call (``sample-litert``: one LiteRT invoke) has no kernel spans: its rows show ``-``.

Example:
    >>> from nnscope.tracing.span import ThreadTrack, TraceData
    >>> events = [(0, "[NN_LA_PBM]benchmark"), (1, "[NN_LA_PE]execution"),
    ...           (2, "[NN_LC_PE]addFloat32 #0"), (5, None), (6, None), (7, None)]
    >>> operation_times(TraceData({1: "app"}, [ThreadTrack(1, 1, "main", events)]))
    {0: [3e-06]}
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from nnscope.tracing import Layer, Phase
from nnscope.tracing.naming import parse_name, tag
from nnscope.tracing.span import TraceData

_BENCHMARK = tag(Layer.APPLICATION, Phase.BENCHMARK)
_EXECUTION = tag(Layer.APPLICATION, Phase.EXECUTION)


def _model_index(detail: str) -> int | None:
    """The model operation index of a kernel span's detail (``conv2dFloat32 #12 ...`` -> 12);
    None for a kernel of a referenced subgraph (no index: counted in its IF/WHILE operation)
    or a span that is not a kernel (``CpuExecutor::run``)."""
    if "::" in detail:
        return None
    _, _, rest = detail.partition(" #")
    number = rest.partition(" ")[0]
    return int(number) if number.isdigit() else None


def operation_times(trace: TraceData) -> dict[int, list[float]]:
    """``{model operation index: [ms in each benchmark execution that ran it, ...]}``."""
    return _profile(trace)[0]


def _profile(trace: TraceData) -> tuple[dict[int, list[float]], int]:
    """:func:`operation_times` and the number of benchmark executions."""
    spans = list(trace.spans())
    benchmarks = [(s.start_ns, s.end_ns) for s in spans if s.name.startswith(_BENCHMARK)]
    windows = sorted((s.start_ns, s.end_ns) for s in spans if s.name.startswith(_EXECUTION)
                     and any(a <= s.start_ns and s.end_ns <= b for a, b in benchmarks))
    per_execution: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for span in spans:
        parsed = parse_name(span.name)
        if parsed is None or parsed.layer is not Layer.CPU:
            continue
        index = _model_index(parsed.detail)
        execution = _window(windows, span.start_ns)
        if index is not None and execution is not None:
            per_execution[index][execution] += span.duration_ns
    return {index: [ns / 1e6 for _, ns in sorted(runs.items())]
            for index, runs in sorted(per_execution.items())}, len(windows)


def _window(windows: list[tuple[int, int]], at: int) -> int | None:
    for position, (start, end) in enumerate(windows):
        if start <= at <= end:
            return position
    return None


def table(compilation, trace: TraceData) -> str:
    """The per-operation table of a finished ``compilation`` and the trace of its run."""
    plan = compilation.plan
    graph = plan.model.main
    times, runs = _profile(trace)
    medians = {index: statistics.median(ms) for index, ms in times.items()}
    total = sum(medians.values())
    step_of = {op: step for step in plan.steps for op in step.operations}
    placement = {p.operation: p for p in plan.placements}
    lines = [f"per-operation profile: median over {runs} benchmark executions (warm-up excluded); "
             f"share: of the sum of the medians, {total:.3f} ms" if times else
             f"per-operation profile: no kernel spans in the {runs} benchmark executions"]
    header = f"{'#':>4}  {'operation':<24} {'device':<18} {'step':>4} {'median ms':>10} {'share':>6}  why there"
    lines += [header, "-" * len(header)]
    for index, operation in enumerate(graph.operations):
        step = step_of.get(index)
        device = step.device.name if step is not None else "-"
        why = placement[index].reason if index in placement else "the whole model on one step"
        if index in medians:
            timing = f"{medians[index]:>10.3f} {medians[index] / total if total else 0:>6.1%}"
        else:
            timing = f"{'-':>10} {'-':>6}"
        lines.append(f"{index:>4}  {operation.type.name:<24} {device:<18} "
                     f"{step.index if step is not None else '-':>4} {timing}  {why}")
    opaque = sorted({step_of[i].device.name for i in range(len(graph.operations))
                     if i not in medians and i in step_of})
    if not runs:
        lines.append("- : no benchmark executions to time (--executions 0)")
    elif opaque:
        lines.append(f"- : no kernel spans: {', '.join(opaque)} ran its step(s) as one call "
                     f"(for per-operation times: --device nnapi-reference or sample-all)")
    return "\n".join(lines) + "\n"


def hint(trace: TraceData) -> str:
    """One line naming ``--per-op`` when the run has per-operation times, else ``""``."""
    count = len(operation_times(trace))
    return f"per-operation times of {count} operations: add --per-op\n" if count else ""
