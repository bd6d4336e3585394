"""The timeline, operation profile, latency and graph data of a trace page.

:func:`trace_views` turns paired :class:`~dashboards._spans.Spans` into the JSON the
page's script draws: named lanes (one per process and thread, application first, then
runtime, drivers and the rest), the span columns as base64 typed arrays (start and
duration in microseconds from the first span, lane, depth, name id), each name's layer
and phase, the execution boundaries, the per-operation profile, the latency
distributions and the partition graph (SVG, or a note saying why there is none).

Example:
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> from nnscope.dashboards._spans import collect_spans
    >>> from nnscope.parse_systrace.readers import open_rows
    >>> with tracing.TraceSession() as session:  # a small trace to look at
    ...     with tracing.application(tracing.Phase.OVERALL, "mobilenet"):
    ...         with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...             pass
    >>> tmp = tempfile.TemporaryDirectory()  # not the current directory
    >>> trace = os.path.join(tmp.name, "trace.json"); _ = session.export(trace)
    >>> spans = collect_spans(open_rows(trace))
    >>> views = trace_views(trace, "chrome_json", spans)
    >>> sorted(views)
    ['graph', 'latency', 'latency_counts', 'profile', 'profile_note', 'timeline']
    >>> [lane["label"] for lane in views["timeline"]["lanes"]][:1]  # process name (pid) · thread name (tid)
    ['... (...) · MainThread (...)']
    >>> tmp.cleanup()
"""
from __future__ import annotations

import base64
import os

import numpy as np

from nnscope.dashboards import _graph, _profile
from nnscope.dashboards._stats import distributions
from nnscope.dashboards._names import lane_names, role_of
from nnscope.dashboards._spans import LAYER_CODES, Spans, layer_of, phase_of
from nnscope.dashboards.delegation import GRAPH_NOTE, KERNELS_NOTE, PROFILE_NOTE

LAYER_LABELS = dict(LA="Application", LR="Runtime", LI="IPC", LD="Driver", LC="CPU",
                    LO="Other")
ROLE_ORDER = ("application", "runtime", "driver", "CPU executor", "IPC", "other")
#: Depth drawn per lane at most (deeper spans are drawn on the last row).
MAX_DEPTH = 255
#: The timeline opens on the executions when what comes before the first one (driver
#: start-up, model building, compilation) takes more than this share of the trace; that
#: start-up is then folded (the page's "show start-up" button unfolds it).
FOLD_SHARE = 0.2
#: Margin each side of the executions in the opening view, as a share of their span.
FOLD_MARGIN = 0.02


def b64(array: np.ndarray) -> str:
    """Little-endian bytes of ``array`` as base64 text (for a JS typed array)."""
    return base64.b64encode(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"),
                                                               copy=False).tobytes()).decode()


def lane_table(spans: Spans, path, format_name: str, process_names=None) -> tuple:
    """``(lanes, order)``: lane dicts in display order; ``order[old lane] = new lane``.
    ``process_names`` (pid -> name) overrides the names the trace gives."""
    processes, threads = lane_names(path, format_name, spans.lane_keys)
    processes = {**processes, **(process_names or {})}
    layer_ids = np.array([LAYER_CODES.index(layer_of(n)) for n in spans.names] or [0])
    lanes = []
    used = np.unique(spans.lane) if len(spans) else np.zeros(0, int)
    for old in used.tolist():
        tgid, tid = spans.lane_keys[old]
        mine = spans.lane == old
        used_names = np.unique(spans.name[mine]).tolist()
        layers = {LAYER_CODES[i] for i in np.unique(layer_ids[used_names]).tolist()}
        if any(_serves_nnapi(spans.names[i]) for i in used_names):
            layers.add("LD")
        lanes.append(dict(old=old, pid=tgid, tid=tid, role=role_of(layers),
                          process=processes.get(tgid) or f"pid {tgid}",
                          thread=threads.get(tid) or f"tid {tid}",
                          depth=int(min(spans.depth[mine].max() + 1, MAX_DEPTH)),
                          first=float(spans.start[mine].min())))
    process_role = {}
    for lane in lanes:
        best = process_role.get(lane["pid"], "other")
        if ROLE_ORDER.index(lane["role"]) < ROLE_ORDER.index(best):
            process_role[lane["pid"]] = lane["role"]
    for lane in lanes:
        lane["process_role"] = process_role[lane["pid"]]
        lane["label"] = f"{lane['process']} ({lane['pid']}) · {lane['thread']} ({lane['tid']})"
    lanes.sort(key=lambda lane: (ROLE_ORDER.index(lane["process_role"]), lane["pid"],
                                 lane["tid"] != lane["pid"], lane["first"]))
    order = np.zeros(max(len(spans.lane_keys), 1), dtype=np.int32)
    for new, lane in enumerate(lanes):
        order[lane.pop("old")] = new
        lane.pop("first")
    return lanes, order


def _serves_nnapi(name: str) -> bool:
    return name.endswith("::server") and any(
        f"HIDL::{face}::" in name for face in ("IDevice", "IPreparedModel", "IBurstContext"))


def relaned(spans: Spans, order: np.ndarray) -> Spans:
    """The same spans with lanes renumbered by ``order`` and sorted again."""
    lane = order[spans.lane] if len(spans) else spans.lane
    index = np.lexsort((spans.start, spans.depth, lane))
    out = Spans(spans.start[index], spans.end[index], lane[index], spans.depth[index],
                spans.name[index], spans.names, spans.lane_keys, spans.marks,
                spans.open_at_end, spans.counts)
    return out


def timeline_data(spans: Spans, lanes, windows) -> dict:
    """The canvas timeline's data (times in microseconds from the first span)."""
    t0 = float(spans.start.min()) if len(spans) else 0.0
    t1 = float(spans.end.max()) if len(spans) else 0.0
    micro = lambda values: (values - t0) * 1e6  # noqa: E731
    columns = dict(start=b64(micro(spans.start)),
                   dur=b64(np.maximum((spans.end - spans.start) * 1e6, 0.0)),
                   lane=b64(spans.lane.astype(np.uint16)),
                   depth=b64(np.minimum(spans.depth, MAX_DEPTH - 1).astype(np.uint8)),
                   name=b64(spans.name.astype(np.int32)))
    return dict(count=len(spans), t1=(t1 - t0) * 1e6, lanes=lanes, names=spans.names,
                name_layer=[LAYER_CODES.index(layer_of(name)) for name in spans.names],
                name_phase=[phase_of(name) for name in spans.names],
                layers=[[code, LAYER_LABELS[code]] for code in LAYER_CODES],
                executions=[[(s - t0) * 1e6, (e - t0) * 1e6] for s, e in windows],
                fold=fold_view((t1 - t0) * 1e6, [((s - t0) * 1e6, (e - t0) * 1e6)
                                                  for s, e in windows]),
                columns=columns)


def fold_view(t1: float, executions) -> dict | None:
    """The opening view of a timeline whose start-up dwarfs its executions:
    ``{"start", "end"}`` around the executions (``executions``: ``(start, end)`` in
    microseconds from the first span, which ends at ``t1``) and ``"startup"``, the time
    before the first one, which is folded; None when the whole trace is shown.

    >>> fold_view(3_000_000.0, [(2_900_000.0, 2_902_000.0), (2_990_000.0, 2_992_000.0)])
    {'start': 2898160.0, 'end': 2993840.0, 'startup': 2900000.0, 'executions': 2}
    >>> fold_view(3_000_000.0, [(100_000.0, 2_900_000.0)]) is None  # nothing worth folding
    True
    """
    if not executions:
        return None
    first = min(start for start, _ in executions)
    last = max(end for _, end in executions)
    if first <= FOLD_SHARE * t1:
        return None
    margin = max((last - first) * FOLD_MARGIN, 1.0)
    return dict(start=first - margin, end=min(last + margin, t1 * 1.01), startup=first,
                executions=len(executions))


def device_labels(lanes) -> list:
    """Each lane's process name, with its pid when several processes share that name."""
    pids = {}
    for lane in lanes:
        pids.setdefault(lane["process"], set()).add(lane["pid"])
    return [lane["process"] if len(pids[lane["process"]]) == 1
            else f"{lane['process']} ({lane['pid']})" for lane in lanes]


def graph_data(graph_path, positions, spans=None) -> tuple:
    """``(graph view, link)`` for the ``.dot`` file at ``graph_path``; without one, the link
    comes from the plan steps recorded in the trace (``spans``)."""
    if not graph_path:
        plans = _graph.trace_plan_steps(_plan_details(spans)) if spans is not None else []
        return dict(svg=None, note="No partition graph given: write one with "
                                   "`nnscope run --dot plan.dot` and pass it to "
                                   "`nnscope-dashboard TRACE --graph plan.dot`.",
                    steps=_step_facts(plans[-1] if plans else [])), _graph.agreed_link(plans, positions)
    with open(graph_path, encoding="utf-8") as handle:
        text = handle.read()
    steps = _graph.plan_steps(text)
    svg, note = _graph.render_svg(text)
    return dict(svg=svg, note=note, file=os.path.basename(os.fspath(graph_path)),
                steps=_step_facts(steps)), _graph.link_operations(steps, positions)


def _step_facts(steps) -> list:
    return [dict(step=s["step"], device=s["device"], ops=len(s["ops"])) for s in steps]


def _plan_details(spans) -> list:
    """Details of the ``ExecutionPlan::step`` spans, in time order."""
    wanted = [i for i, name in enumerate(spans.names) if "]ExecutionPlan::step " in name]
    if not wanted:
        return []
    index = np.flatnonzero(np.isin(spans.name, wanted))
    index = index[np.argsort(spans.start[index], kind="stable")]
    return [spans.names[spans.name[i]].partition("]")[2] for i in index.tolist()]


def profile_note(steps) -> str:
    """Why the trace has no per-operation spans and how to get them, from the plan's
    ``steps`` (as :func:`_step_facts` gives them; empty when the trace records none)."""
    note = ("No per-operation spans in this trace. Only CPU-kernel devices (nnapi-reference "
            "and the CPU sample drivers) record one span per operation, such as "
            "[NN_LC_PTR]conv2dFloat32 #12 (the kernel of the model's operation 12)")
    if not steps:
        return note + "."
    devices = list(dict.fromkeys(step["device"] for step in steps))
    ops = sum(step["ops"] for step in steps)
    where = (f"one step on {devices[0]}" if len(steps) == 1
             else f"{len(steps)} steps on {', '.join(devices)}")
    return (f"No per-operation spans in this trace: its plan ran the model's {ops} operations "
            f"as {where}, which recorded no kernel spans (a driver that hands its step to an "
            f"accelerator runtime, as sample-litert does with one LiteRT invoke per execution, "
            f"has no per-operation view). For a per-operation profile, run on a CPU-kernel "
            f"device: nnscope run [MODEL] --device sample-all (or --device nnapi-reference).")


def trace_views(path, format_name: str, spans: Spans, graph_path=None, process_names=None,
                delegation=None) -> dict:
    """Timeline, operation profile, latency distributions and graph of one trace;
    ``delegation`` (the delegation report of a delegate-mode run, see :mod:`dashboards.delegation`)
    adapts the profile, latency and graph to a model split between NNAPI and LiteRT."""
    lanes, order = lane_table(spans, path, format_name, process_names)
    spans = relaned(spans, order)
    windows = _profile.executions(spans)
    ops = _profile.operation_spans(spans)
    positions = _profile.step_positions(spans, ops, windows)
    keyed = [(s, k, op[2]) for op, (s, k) in zip(ops, positions)]
    graph, link = graph_data(graph_path, keyed, None if delegation else spans)
    process_of_lane = device_labels(lanes)
    roles = {index: lane["role"] for index, lane in enumerate(lanes)}
    ranked = _profile.profile(ops, positions, link,
                              {step["step"]: step["device"] for step in graph["steps"]})
    for row in ranked["ops"]:  # no plan: the process that ran the kernel
        if row["device"] is None:
            row["device"] = process_of_lane[int(spans.lane[row["first_span"]])]
    note = profile_note(graph["steps"]) if not ops else ""
    if delegation is not None:
        note = _delegate_mode(graph, ranked, graph_path)
    measured, warmup = _profile.benchmark_executions(spans, windows)
    return dict(timeline=timeline_data(spans, lanes, windows),
                profile=ranked,
                profile_note=note,
                latency=distributions(_profile.device_latencies(
                    spans, measured, process_of_lane, roles, cpu_operators(delegation))),
                latency_counts=dict(executions=len(measured), warmup=warmup),
                graph=graph)


def cpu_operators(delegation) -> set:
    """The names of the operators a delegate-mode run left on LiteRT (their spans' names)."""
    return {row["operator"] for row in (delegation or {}).get("operators", [])
            if row.get("partition") is None}


def _delegate_mode(graph: dict, ranked: dict, graph_path) -> str:
    """Unlink the kernels (their ``#index`` is the partition model's, not the .tflite's), note
    why there is no single plan, and return the profile's note."""
    for row in ranked["ops"]:
        row["graph_op"] = None
    ranked["graph_links"] = {}
    if not graph_path:
        graph["note"] = GRAPH_NOTE
    return KERNELS_NOTE if ranked["operations"] else PROFILE_NOTE
