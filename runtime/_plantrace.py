"""Internal: the plan's steps written into the trace, so a trace alone maps kernels to operations.

A driver process runs a step's sub-model and knows only that sub-model's operation order;
the runtime knows which operations of the model each step holds. After
``Compilation.finish`` partitions the model, one zero-length span per step, inside
``[NN_LR_PC]ANeuralNetworksCompilation_finish``, names the step, its device and the model's
operations in the order the step runs them (index and type)::

    [NN_LR_PC]ExecutionPlan::step 0 on sample-minimal: #0 CONV_2D #1 DEPTHWISE_CONV_2D ...

Same layer and phase as the enclosing call, so parse_systrace counts it as added detail: no
bucket changes. The dashboards read it back (``dashboards._graph.trace_plan_steps``) to give
each kernel span of step ``s`` at position ``p`` its model operation index.

Example:
    >>> step_detail(1, "sample-float-fast", [(29, "FULLY_CONNECTED")])
    'ExecutionPlan::step 1 on sample-float-fast: #29 FULLY_CONNECTED'
"""
from __future__ import annotations

from nnscope import tracing
from nnscope.tracing import Phase


def step_detail(index: int, device: str, operations) -> str:
    """The span detail of step ``index`` on ``device`` running ``(op index, TYPE)`` in order."""
    ops = " ".join(f"#{op} {kind}" for op, kind in operations)
    return f"ExecutionPlan::step {index} on {device}: {ops}"


def record(plan) -> None:
    """One span per step of ``plan`` (call inside the compilation's finish span)."""
    if not tracing.enabled():
        return
    graph = plan.model.main
    for step in plan.steps:
        operations = [(op, _type_name(graph.operations[op].type)) for op in step.operations]
        with tracing.runtime(Phase.COMPILATION, step_detail(step.index, step.device.name, operations)):
            pass


def _type_name(kind) -> str:
    """``CONV_2D``; an extension operation type (a plain number) as ``EXTENSION_<n>``."""
    name = getattr(kind, "name", None)
    return name if name else f"EXTENSION_{int(kind)}"
