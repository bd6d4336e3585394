"""The plan's steps in the trace (runtime._plantrace): one zero-length span per step inside the
compilation's finish call, naming the model operations the step runs; parse_systrace's
summaries are the same with and without those spans."""
from __future__ import annotations

import json

from nnscope import parse_systrace
from nnscope import tracing
from nnscope.runtime import builtin_models
from nnscope.runtime.cli._backend import compute_arrays
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.manager import get_device
from nnscope.tracing import Phase
from nnscope.tracing.exporters import get_exporter

FINISH = "[NN_LR_PC]ANeuralNetworksCompilation_finish"


def traced_run(tmp_path):
    """A traced mobilenet run split over two drivers; its Chrome JSON file and its plan."""
    model = builtin_models.mobilenet()
    with tracing.TraceSession() as session:
        with tracing.application(Phase.OVERALL, "plantrace"):
            compilation = Compilation(model, [get_device("sample-minimal"), get_device("sample-float-fast")])
            compilation.finish()
            with tracing.application(Phase.EXECUTION, "run"):
                compute_arrays(compilation, builtin_models.sample_input(model))
    path = tmp_path / "trace.json"
    get_exporter("chrome-json")(path).export(session.collect())
    return path, compilation.plan


def paired(events) -> list:
    """``(begin event, end event)`` of every span (Chrome JSON ends carry no name)."""
    stacks, pairs = {}, []
    for event in events:
        stack = stacks.setdefault((event.get("pid"), event.get("tid")), [])
        if event.get("ph") == "B":
            stack.append(event)
        elif event.get("ph") == "E":
            pairs.append((stack.pop(), event))
    return pairs


def summaries(path) -> list:
    runs = parse_systrace.summarize(str(path))
    return [parse_systrace.render_json(runs, total, per_execution)
            for total in (False, True) for per_execution in (False, True)] + \
        ["".join(parse_systrace.render_text(run) for run in runs if run.complete)]


def test_each_step_is_named_inside_finish_and_the_summary_ignores_it(tmp_path):
    path, plan = traced_run(tmp_path)
    events = json.loads(path.read_text())["traceEvents"]
    steps = [e for e in events if e.get("ph") == "B" and "ExecutionPlan::step" in e["name"]]
    assert len(plan.steps) >= 2 and len(steps) == len(plan.steps)
    graph = plan.model.main
    for record, step in zip(steps, plan.steps):
        ops = " ".join(f"#{op} {graph.operations[op].type.name}" for op in step.operations)
        assert record["name"] == f"[NN_LR_PC]ExecutionPlan::step {step.index} on {step.device.name}: {ops}"
    spans = paired(events)
    (begin, end), = [(b, e) for b, e in spans if b["name"] == FINISH]
    assert all(begin["ts"] <= s["ts"] <= end["ts"] and s["tid"] == begin["tid"] for s in steps)
    dropped = {id(event) for b, e in spans if "ExecutionPlan::step" in b["name"] for event in (b, e)}
    stripped = tmp_path / "stripped.json"
    kept = [e for e in events if id(e) not in dropped]
    assert len(kept) == len(events) - 2 * len(steps)
    stripped.write_text(json.dumps({"traceEvents": kept}))
    assert summaries(path) == summaries(stripped)


def test_nothing_is_recorded_without_tracing():
    model = builtin_models.tiny_add()
    with tracing.TraceSession() as session:
        pass
    Compilation(model, [get_device("nnapi-reference")]).finish()
    assert session.collect().span_count() == 0
