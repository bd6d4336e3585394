"""The partition graph: a GraphDump ``.dot`` file, its plan steps, and its SVG from Graphviz.

``nnscope run --dot plan.dot`` writes the compiled plan as Graphviz text: one
``cluster_step<n>`` per plan step (``step n: device``) holding its operations ``o<i>``
labelled ``#i TYPE``. :func:`plan_steps` reads the steps back; :func:`link_operations`
matches the operations the trace shows (step, position under the executor run, kernel
name) to graph operations; :func:`render_svg` runs ``dot -Tsvg`` when it is on PATH.
Without a ``.dot`` file, :func:`trace_plan_steps` reads the same steps from the
``ExecutionPlan::step`` spans the runtime records at compilation.

Example:
    >>> from nnscope.runtime import Compilation
    >>> from nnscope.runtime.builtin_models import conv_pad_chain
    >>> from nnscope.runtime.drivers.cpu import CpuDevice
    >>> from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
    >>> from nnscope.runtime.graphdump import to_dot
    >>> compilation = Compilation.for_devices(conv_pad_chain(operations=3, size=4, channels=2),
    ...                                       [SampleDriver(SAMPLES["sample-minimal"]), CpuDevice()])
    >>> compilation.finish()
    >>> steps = plan_steps(to_dot(compilation))  # the text of ``nnscope run --dot plan.dot``
    >>> [(step["device"], step["ops"]) for step in steps]
    [('sample-minimal', [(0, 'CONV_2D')]), ('nnapi-reference', [(1, 'PAD')]), ('sample-minimal', [(2, 'CONV_2D')])]
    >>> compilation.free()
"""
from __future__ import annotations

import re
import shutil
import subprocess

#: Seconds ``dot`` may take before the graph is reported as not rendered.
DOT_TIMEOUT = 60
_CLUSTER = re.compile(r"subgraph\s+cluster_step(\d+)\s*\{")
_STEP_LABEL = re.compile(r"step\s+\d+:\s*([^<\"]+)")
_OP_NODE = re.compile(r"^\s*o(\d+)\s*\[label=<.*?#\d+\s+([A-Z0-9_]+)", re.M)


def plan_steps(dot_text: str) -> list:
    """``[{"step": n, "device": str, "ops": [(op index, TYPE), ...]}, ...]`` by step."""
    steps = []
    marks = list(_CLUSTER.finditer(dot_text))
    for at, match in enumerate(marks):
        end = marks[at + 1].start() if at + 1 < len(marks) else len(dot_text)
        body = dot_text[match.end():end]
        label = _STEP_LABEL.search(body)
        ops = sorted((int(index), kind) for index, kind in _OP_NODE.findall(body))
        steps.append(dict(step=int(match.group(1)),
                          device=label.group(1).strip() if label else "",
                          ops=ops))
    return sorted(steps, key=lambda step: step["step"])


_TRACE_STEP = re.compile(r"ExecutionPlan::step (\d+) on (\S+): ((?:#\d+ \S+ ?)*)$")
_TRACE_OP = re.compile(r"#(\d+) (\S+)")


def trace_plan_steps(details) -> list:
    """The plans a trace records (``runtime._plantrace``), each as :func:`plan_steps` gives
    them, from span details in time order; a step 0 starts the next plan."""
    plans = []
    for detail in details:
        match = _TRACE_STEP.search(detail)
        if match is None:
            continue
        step = dict(step=int(match.group(1)), device=match.group(2),
                    ops=[(int(i), kind) for i, kind in _TRACE_OP.findall(match.group(3))])
        if step["step"] == 0 or not plans:
            plans.append([])
        plans[-1].append(step)
    return plans


def agreed_link(plans, positions) -> dict:
    """:func:`link_operations` over several plans: an operation is linked only where every
    plan that places a matching kernel there names the same model operation."""
    links = [link_operations(steps, positions) for steps in plans]
    agreed = {}
    for key in {key for link in links for key in link}:
        found = {link[key] for link in links if key in link}
        if len(found) == 1:
            agreed[key] = found.pop()
    return agreed


def kernel_matches(kernel: str, op_type: str) -> bool:
    """Whether a CPU kernel name (``depthwiseConv2dFloat32``) implements ``op_type``."""
    wanted = op_type.replace("_", "").lower()
    have = kernel.lower()
    return have.startswith(wanted) or wanted.startswith(have.replace("float32", "")
                                                         .replace("quant8", "")
                                                         .replace("int32", ""))


def link_operations(steps, positions) -> dict:
    """``{(step, position, kernel): graph op index}`` where the kernel fits the op type."""
    link = {}
    by_step = {step["step"]: step["ops"] for step in steps}
    for step, position, kernel in positions:
        ops = by_step.get(step, [])
        if position < len(ops) and kernel_matches(kernel, ops[position][1]):
            link[(step, position, kernel)] = ops[position][0]
    return link


def dot_program():
    """Path of Graphviz's ``dot``, or None."""
    return shutil.which("dot")


def render_svg(dot_text: str) -> tuple:
    """``(svg text, None)``, or ``(None, note)`` saying why there is no picture."""
    program = dot_program()
    if program is None:
        return None, ("Graphviz is not installed (no `dot` on PATH): the partition graph "
                      "is not drawn. Install it (apt-get install graphviz) and rebuild.")
    try:
        done = subprocess.run([program, "-Tsvg"], input=dot_text, capture_output=True,
                              text=True, timeout=DOT_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, f"Graphviz took longer than {DOT_TIMEOUT} s: the graph is not drawn."
    if done.returncode != 0 or "<svg" not in done.stdout:
        first = (done.stderr.strip().splitlines() or ["no output"])[0]
        return None, f"Graphviz could not draw the graph: {first}"
    svg = done.stdout[done.stdout.index("<svg"):]
    return svg, None
