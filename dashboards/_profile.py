"""Per-operation profile, executions and per-device latency, from paired :class:`Spans`.

- **Operations:** an operation span is a CPU-layer (``LC``) span whose detail is a kernel
  name (no ``::``, so not ``CpuExecutor::run``), with the operation's index in the model
  (``conv2dFloat32 #12``, see :func:`kernel_of`), and whose parent is not one; a ``[SW]``
  span that directly follows a sibling of the same kernel continues it (AOSP switches the
  phase from transformation to computation inside one operation). Operations are numbered
  by their position under their parent (one executor run) and the parent's position among
  the runs inside one execution (the plan's step).
- **Executions:** the application's innermost ``[NN_LA_PE]`` spans, or, without any, the
  runtime's execution calls (``ANeuralNetworksExecution_compute`` and friends).
- **Benchmark executions:** when the application marks a warm-up (``[NN_LA_PWU]``) and a
  benchmark (``[NN_LA_PBM]``), the latency counts only the executions inside the benchmark, as
  ``nnscope run``'s latency line does (:func:`benchmark_executions`).
- **Per device:** in each execution, the time of the top-level execution spans of each
  driver process, and of the executor runs in the runtime's own process (CPU fallback); in
  delegate mode also the operators left on LiteRT (their spans, named by the operator).

Example:
    >>> import os, tempfile
    >>> import numpy as np
    >>> from nnscope import tracing
    >>> from nnscope.dashboards._spans import collect_spans
    >>> from nnscope.parse_systrace.readers import open_rows
    >>> from nnscope.runtime import Compilation, Execution, get_device
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> x, y = np.ones((1, 4), np.float32), np.empty((1, 4), np.float32)
    >>> with tracing.TraceSession() as session:  # one execution of ADD on the CPU
    ...     compilation = Compilation.for_devices(tiny_add(), [get_device("nnapi-reference")])
    ...     compilation.finish()
    ...     execution = Execution(compilation)
    ...     execution.set_input(0, x); execution.set_input(1, x); execution.set_output(0, y)
    ...     execution.compute(); execution.free(); compilation.free()
    >>> tmp = tempfile.TemporaryDirectory()  # not the current directory
    >>> trace = os.path.join(tmp.name, "trace.json"); _ = session.export(trace)
    >>> spans = collect_spans(open_rows(trace))
    >>> ops = operation_spans(spans)
    >>> positions = step_positions(spans, ops, executions(spans))
    >>> [(kind["name"], kind["count"]) for kind in profile(ops, positions)["types"]]
    [('addFloat32', 1)]
    >>> tmp.cleanup()
"""
from __future__ import annotations

import numpy as np

from nnscope.dashboards._spans import detail_of

RUNTIME_EXECUTION_CALLS = ("ANeuralNetworksExecution_compute",
                           "ANeuralNetworksExecution_startCompute",
                           "ANeuralNetworksExecution_burstCompute")
EXECUTION_SERVER_MARKS = ("IPreparedModel::", "IBurstContext::", "[NN_LD_PE]")
#: A driver's wait for a sync fence (a fenced step waiting for the one before): not its work.
WAIT_MARK = "::syncWait"
#: Individual operations the page shows before "show all" (every one is listed, the most
#: expensive first).
TOP_OPERATIONS = 40


def parents(spans) -> np.ndarray:
    """Index of each span's enclosing span (``-1`` at depth 0)."""
    parent = np.full(len(spans), -1, dtype=np.int64)
    keys = spans.lane.astype(np.int64) * 4096 + spans.depth
    bounds = np.flatnonzero(np.diff(keys)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(spans)]))
    block = {int(keys[a]): (a, b) for a, b in zip(starts, ends)} if len(spans) else {}
    for key, (a, b) in block.items():
        if key % 4096 == 0 or key - 1 not in block:
            continue
        pa, pb = block[key - 1]
        found = np.searchsorted(spans.start[pa:pb], spans.start[a:b], side="right") - 1
        parent[a:b] = np.where(found >= 0, pa + found, -1)
    return parent


def operation_spans(spans, parent=None) -> list:
    """``[(first span, total seconds, kernel, parent span, spans), ...]`` in time order."""
    if parent is None:
        parent = parents(spans)
    layers = np.array([_is_kernel(name) for name in spans.names] or [False])
    candidate = layers[spans.name] if len(spans) else np.zeros(0, bool)
    top = candidate & ~np.where(parent >= 0, candidate[np.maximum(parent, 0)], False)
    index = np.flatnonzero(top)
    index = index[np.lexsort((spans.start[index], parent[index]))]
    ops, previous = [], None
    kernels, graph_ops = zip(*[kernel_of(detail_of(name)) for name in spans.names]) if spans.names else ((), ())
    switches = [name.startswith("[SW]") for name in spans.names]
    names, starts, ends = spans.name.tolist(), spans.start.tolist(), spans.end.tolist()
    for i in index.tolist():
        kernel, seconds = kernels[names[i]], ends[i] - starts[i]
        if (previous is not None and switches[names[i]] and previous[2] == kernel
                and previous[3] == parent[i]):
            previous[1] += seconds
            previous[4].append(i)
            continue
        previous = [i, seconds, kernel, int(parent[i]), [i], graph_ops[names[i]]]
        ops.append(previous)
    return sorted(ops, key=lambda op: starts[op[0]])


def kernel_of(detail: str) -> tuple:
    """``(kernel, model operation index or None)`` of a kernel span's detail: ``conv2dFloat32
    #12 (step 3 #1)`` gives ``("conv2dFloat32", 12)``; a bare kernel name gives no index."""
    kernel, _, rest = detail.partition(" ")
    index = rest[1:].partition(" ")[0] if rest.startswith("#") else ""
    return kernel, int(index) if index.isdigit() else None


def _is_kernel(name: str) -> bool:
    return name.startswith(("[NN_LC_", "[SW][NN_LC_", "[SUB][NN_LC_")) and \
        "::" not in detail_of(name)


def executions(spans) -> list:
    """``[(start, end), ...]`` of the executions, in time order."""
    names = spans.names
    app = {i for i, name in enumerate(names) if name.startswith("[NN_LA_PE]")}
    chosen = _innermost(spans, app)
    if not chosen:
        calls = {i for i, name in enumerate(names)
                 if name.startswith("[NN_LR_PE]") and detail_of(name) in RUNTIME_EXECUTION_CALLS}
        chosen = [i for i in np.flatnonzero(np.isin(spans.name, list(calls))).tolist()]
    pairs = sorted((float(spans.start[i]), float(spans.end[i])) for i in chosen)
    return pairs


def benchmark_executions(spans, windows) -> tuple[list, int]:
    """The executions of ``windows`` inside the application's benchmark spans (``[NN_LA_PBM]``)
    and how many were left out as warm-up; all of them (and 0) when the trace marks no
    benchmark."""
    marked = [i for i, name in enumerate(spans.names) if name.startswith("[NN_LA_PBM]")]
    index = np.flatnonzero(np.isin(spans.name, marked)) if marked else []
    phases = [(float(spans.start[i]), float(spans.end[i])) for i in index]
    if not phases:
        return list(windows), 0
    inside = [w for w in windows if any(start <= w[0] and w[1] <= end for start, end in phases)]
    return inside, len(windows) - len(inside)


def _innermost(spans, name_ids) -> list:
    """The spans named in ``name_ids`` at the deepest level each lane has them."""
    if not name_ids:
        return []
    index = np.flatnonzero(np.isin(spans.name, list(name_ids)))
    lanes, depths = spans.lane[index], spans.depth[index]
    deepest = np.zeros(int(lanes.max()) + 1 if len(lanes) else 1, dtype=np.int64)
    np.maximum.at(deepest, lanes, depths)
    return index[depths == deepest[lanes]].tolist()


def step_positions(spans, ops, windows) -> list:
    """Each operation's ``(step, position)``: parent's rank in its execution, rank under it."""
    starts = np.array([window[0] for window in windows]) if windows else np.zeros(0)
    parent_rank, seen, result = {}, {}, []
    for op in ops:
        parent = op[3]
        if parent not in parent_rank:
            at = float(spans.start[parent if parent >= 0 else op[0]])
            execution = int(np.searchsorted(starts, at, side="right")) - 1
            parent_rank[parent] = seen.get(execution, 0)
            seen[execution] = parent_rank[parent] + 1
            seen[("k", parent)] = 0
        position = seen[("k", parent)]
        seen[("k", parent)] = position + 1
        result.append((parent_rank[parent], position))
    return result


def profile(ops, positions, link=None, devices=None) -> dict:
    """Operation types and every individual operation ranked by time (ms), with shares;
    each operation's ``device`` is its plan step's (``devices``: ``{step: device}``), None
    when the plan is not known."""
    total = sum(op[1] for op in ops) or 1.0
    types, single = {}, {}
    for op, (step, position) in zip(ops, positions):
        entry = types.setdefault(op[2], [0, 0.0])
        entry[0] += 1
        entry[1] += op[1]
        one = single.setdefault((step, position, op[2]), [0, 0.0, op[0], op[5]])
        one[0] += 1
        one[1] += op[1]
    type_rows = [dict(name=name, count=n, total_ms=t * 1e3, mean_ms=t * 1e3 / n,
                      share=t / total) for name, (n, t) in types.items()]
    op_rows = []
    for (step, position, kernel), (n, t, first, named) in single.items():
        graph_op = named if named is not None else (link or {}).get((step, position, kernel))
        op_rows.append(dict(name=kernel, step=step, position=position, graph_op=graph_op,
                            device=(devices or {}).get(step), count=n, total_ms=t * 1e3, mean_ms=t * 1e3 / n, share=t / total,
                            first_span=first))
    type_rows.sort(key=lambda row: -row["total_ms"])
    op_rows.sort(key=lambda row: -row["total_ms"])
    links = {}
    for row in sorted(op_rows, key=lambda row: row["first_span"]):
        if row["graph_op"] is not None:
            links.setdefault(str(row["graph_op"]), row["first_span"])
    return dict(total_ms=total * 1e3 if ops else 0.0, operations=len(ops), graph_links=links,
                types=type_rows, ops=op_rows, ops_listed=len(op_rows), ops_shown=TOP_OPERATIONS)


def device_latencies(spans, windows, process_of_lane, roles, cpu_operators=()) -> dict:
    """``{label: [ms per execution, ...]}``: end-to-end, then each device's share; in delegate
    mode, also the time of the operators left on LiteRT (spans named in ``cpu_operators``)."""
    out = {"execution (end to end)": [(end - start) * 1e3 for start, end in windows]}
    if not windows:
        return out
    starts = np.array([w[0] for w in windows])
    ends = np.array([w[1] for w in windows])
    per_device = {}
    drivers = {process_of_lane[lane] for lane, role in roles.items() if role == "driver"}
    litert = set(_litert_spans(spans, cpu_operators))
    for i in _device_spans(spans, process_of_lane, drivers) + sorted(litert):
        at = int(np.searchsorted(starts, spans.start[i], side="right")) - 1
        if at < 0 or spans.start[i] > ends[at]:
            continue
        label = process_of_lane[int(spans.lane[i])]
        if i in litert:
            label = f"LiteRT CPU operators ({label})"
        elif label not in drivers:
            label = f"CPU fallback ({label})"
        per_device.setdefault(label, {}).setdefault(at, 0.0)
        per_device[label][at] += (spans.end[i] - spans.start[i]) * 1e3
    for label in sorted(per_device):
        out[label] = [per_device[label][at] for at in sorted(per_device[label])]
    return out


def _litert_spans(spans, cpu_operators) -> list:
    """The spans of the operators a delegate-mode run left on LiteRT (named by their operator)."""
    wanted = [i for i, name in enumerate(spans.names) if name in cpu_operators]
    return np.flatnonzero(np.isin(spans.name, wanted)).tolist() if wanted else []


def _device_spans(spans, process_of_lane, driver_processes) -> list:
    has_executor = any(name.endswith("CpuExecutor::run") for name in spans.names)
    wanted = []
    for name_id, name in enumerate(spans.names):
        server = any(mark in name for mark in EXECUTION_SERVER_MARKS) and "::client" not in name \
            and not name.endswith(WAIT_MARK)  # a driver waiting for a fence does no work
        cpu_run = name.endswith("CpuExecutor::run") or (
            not has_executor and "startComputeOnCpu" in name)
        if server or cpu_run:
            wanted.append((name_id, server))
    chosen = []
    for name_id, server in wanted:
        for i in np.flatnonzero(spans.name == name_id).tolist():
            lane = int(spans.lane[i])
            in_driver = process_of_lane[lane] in driver_processes
            if (server and in_driver and spans.depth[i] == 0) or (not server and not in_driver):
                chosen.append(i)
    return chosen
