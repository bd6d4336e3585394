"""The Graphviz dot text of a model or a partitioned plan (used by ``runtime.graphdump``).

Layout rules, chosen so a whole network reads top to bottom, a few hundred points wide:

* Data flows down (``rankdir=TB``). Operations are rounded boxes; model inputs, outputs and
  temporaries are tensor nodes between them.
* Scalar constants, small constant tensors (at most :data:`INLINE_ELEMENTS` elements) and
  omitted operands are printed inside the label of the operation that reads them, by the
  name NNAPI gives the input (``stride 2x2``, ``padding SAME``, ``fuse RELU6``, ``bias [0,0]``,
  else ``input<position> <value>``: see :mod:`runtime._opparams`); they are never nodes, so
  one shared ``INT32 = 1`` no longer ties the graph together.
* The larger constants an operation reads (weights, biases) are a grey band at the foot of
  its node, one row (a port ``w<operand>``) per tensor, named as NNAPI names the input
  (``filter #1 [24,5,5,3]``, ``bias #2 [24]``): a weight appears once, attached to that
  operation only. A constant read by several operations is listed by its first reader, with a
  dashed edge from that row to every other reader, whose label says ``input1 #<operand>``.
* For a plan, each step is a cluster (``step <n>: <device>``) holding its operations, their
  weights and the tensors internal to the step; operations take their device's colour, a
  tensor that crosses devices is drawn red, and the graph's title carries a legend.
"""
from __future__ import annotations

import html
import io
import math
from dataclasses import dataclass, field

import numpy as np

from nnscope.runtime import _opparams
from nnscope.runtime.hal.types import HalModel, Operand, OperandLifetime as L, is_scalar
from nnscope.runtime.ops.executor import read_constant

#: Constant tensors with at most this many elements are printed in the operation's label.
INLINE_ELEMENTS = 8
_VALUE_CHARS = 32
_PARAMS_PER_LINE = 3
#: Device colours: (operation fill, cluster background).
_PALETTE = (("#8ecae6", "#eef7fb"), ("#ffb703", "#fff6e0"), ("#90be6d", "#f0f7eb"),
            ("#c77dff", "#f7efff"), ("#f4a261", "#fdf1e7"), ("#64b5a6", "#eaf5f3"))
_NO_DEVICE = ("#ffd6a5", "")
_CROSSING = "#d00000"
_WEIGHT_FILL, _WEIGHT_LINE = "#e9ecef", "#868e96"
_CONSTANTS = (L.CONSTANT_COPY, L.CONSTANT_REFERENCE)
_TENSOR_STYLE = {
    L.SUBGRAPH_INPUT: 'shape=invhouse, style=filled, fillcolor="#bde0fe"',
    L.SUBGRAPH_OUTPUT: 'shape=house, style=filled, fillcolor="#b7e4c7"',
}
_GRAPH_HEAD = """  rankdir=TB; newrank=true; nodesep=0.25; ranksep=0.3;
  labelloc=t; labeljust=l; fontname="Helvetica";
  node [fontname="Helvetica", fontsize=10, margin="0.08,0.03", height=0.3];
  edge [arrowsize=0.6, color="#495057"];
"""


@dataclass
class _Facts:
    """What the writer needs to know about one graph (and its plan, if any)."""

    hal: HalModel
    steps: tuple = ()
    crossing: frozenset = frozenset()
    step_of_op: dict = field(default_factory=dict)
    producer: dict = field(default_factory=dict)
    readers: dict = field(default_factory=dict)
    weight_home: dict = field(default_factory=dict)  # constant operand -> op whose node shows it
    colours: dict = field(default_factory=dict)  # device name -> (fill, background)

    @property
    def graph(self):
        return self.hal.main


def model_dot(hal: HalModel, name: str, steps=(), crossing=frozenset()) -> str:
    """Dot text of ``hal``; with ``steps`` (plan steps) one cluster per step."""
    facts = _facts(hal, tuple(steps), frozenset(crossing))
    out = io.StringIO()
    out.write(f"digraph {_quote(name)} {{\n{_GRAPH_HEAD}")
    out.write(f"  label=<{_title(facts, name)}>;\n")
    for step in facts.steps:
        _write_step(out, facts, step)
    if not facts.steps:
        for index in range(len(facts.graph.operations)):
            _write_operation(out, facts, index, "  ")
    for index in _loose_tensors(facts):
        _write_tensor(out, facts, index, "  ")
    _write_edges(out, facts)
    out.write("}\n")
    return out.getvalue()


# ------------------------------------------------------------------ facts
def _facts(hal: HalModel, steps: tuple, crossing: frozenset) -> _Facts:
    facts = _Facts(hal, steps, crossing)
    for step in steps:
        facts.colours.setdefault(step.device.name, _PALETTE[len(facts.colours) % len(_PALETTE)])
        for op_index in step.operations:
            facts.step_of_op[op_index] = step
    for op_index, op in enumerate(hal.main.operations):
        for operand_index in op.outputs:
            facts.producer[operand_index] = op_index
        for operand_index in op.inputs:
            facts.readers.setdefault(operand_index, []).append(op_index)
            if _kind(hal, operand_index) == "weight":
                facts.weight_home.setdefault(operand_index, op_index)
    return facts


def _kind(hal: HalModel, index: int) -> str:
    """``inline`` (printed in the reader's label), ``weight`` or ``tensor``."""
    operand = hal.main.operands[index]
    if operand.lifetime in (L.NO_VALUE, L.SUBGRAPH):
        return "inline"
    if operand.lifetime not in _CONSTANTS:
        return "tensor"
    count = operand.element_count()
    small = is_scalar(operand.type) or (count is not None and count <= INLINE_ELEMENTS)
    return "inline" if small else "weight"


def _internal_step(facts: _Facts, index: int):
    """The step holding temporary ``index`` when it is made and read only there, else None."""
    operand = facts.graph.operands[index]
    if operand.lifetime != L.TEMPORARY_VARIABLE or index not in facts.producer:
        return None
    step = facts.step_of_op.get(facts.producer[index])
    readers = facts.readers.get(index, [])
    if step is None or any(facts.step_of_op.get(r) is not step for r in readers):
        return None
    return step


def _loose_tensors(facts: _Facts) -> list[int]:
    """Tensor nodes drawn outside every cluster: model inputs/outputs, cross-step tensors."""
    return [i for i in range(len(facts.graph.operands))
            if _kind(facts.hal, i) == "tensor" and _internal_step(facts, i) is None
            and (i in facts.producer or i in facts.readers)]


# ------------------------------------------------------------------ nodes
def _write_step(out: io.StringIO, facts: _Facts, step) -> None:
    fill, background = facts.colours[step.device.name]
    out.write(f"  subgraph cluster_step{step.index} {{\n")
    out.write(f"    label=<<b>{_esc(f'step {step.index}: {step.device.name}')}</b>>; "
              f"labeljust=l; fontsize=11;\n")
    out.write(f'    style="rounded"; color={_quote(fill)}; bgcolor={_quote(background)}; penwidth=2;\n')
    for op_index in step.operations:
        _write_operation(out, facts, op_index, "    ")
    for index in range(len(facts.graph.operands)):
        if _kind(facts.hal, index) == "tensor" and _internal_step(facts, index) is step:
            _write_tensor(out, facts, index, "    ")
    out.write("  }\n")


def _write_operation(out: io.StringIO, facts: _Facts, op_index: int, pad: str) -> None:
    op = facts.graph.operations[op_index]
    step = facts.step_of_op.get(op_index)
    fill = facts.colours[step.device.name][0] if step is not None else _NO_DEVICE[0]
    rows = [f"<td><b>{_esc(f'#{op_index} {op.type.name}')}</b></td>"]
    params = _params(facts, op_index)
    for start in range(0, len(params), _PARAMS_PER_LINE):
        line = "  ".join(params[start:start + _PARAMS_PER_LINE])
        rows.append(f'<td><font point-size="8">{_esc(line)}</font></td>')
    data_type = facts.graph.operands[op.inputs[0]].type if op.inputs else None
    types = [facts.graph.operands[i].type for i in op.inputs]
    for pos, index in enumerate(op.inputs):
        if facts.weight_home.get(index) == op_index:
            name = _opparams.input_name(op.type.name, types, pos)
            text = f"{name} {_operand_text(facts.graph.operands[index], index, data_type)}"
            rows.append(f'<td port="w{index}" bgcolor="{_WEIGHT_FILL}" align="left">'
                        f'<font point-size="8">{_esc(text)}</font></td>')
    cells = "".join(f"<tr>{row}</tr>" for row in rows)
    table = (f'<table border="1" style="rounded" cellborder="0" cellspacing="0" cellpadding="2" '
             f'bgcolor="{fill}">{cells}</table>')
    out.write(f"{pad}o{op_index} [label=<{table}>, shape=plain];\n")


def _write_tensor(out: io.StringIO, facts: _Facts, index: int, pad: str) -> None:
    operand = facts.graph.operands[index]
    style = _TENSOR_STYLE.get(operand.lifetime, "shape=ellipse")
    text = _operand_text(operand, index)
    if index in facts.crossing:
        text += "\ncrosses devices"
        style += f', color="{_CROSSING}", fontcolor="{_CROSSING}", penwidth=2.5'
    out.write(f'{pad}d{index} [label={_quote(text)}, {style}, fontsize=9, margin="0.02,0.01"];\n')


def _write_edges(out: io.StringIO, facts: _Facts) -> None:
    for op_index, op in enumerate(facts.graph.operations):
        for index in op.inputs:
            kind = _kind(facts.hal, index)
            if kind == "tensor":
                red = f' [color="{_CROSSING}", penwidth=2]' if index in facts.crossing else ""
                out.write(f"  d{index} -> o{op_index}{red};\n")
            elif kind == "weight" and facts.weight_home[index] != op_index:  # shared weights
                home = facts.weight_home[index]
                out.write(f'  o{home}:w{index} -> o{op_index} [color="{_WEIGHT_LINE}", style=dashed];\n')
        for index in op.outputs:
            red = f' [color="{_CROSSING}", penwidth=2]' if index in facts.crossing else ""
            out.write(f"  o{op_index} -> d{index}{red};\n")


# ------------------------------------------------------------------ text
def _title(facts: _Facts, name: str) -> str:
    rows = [f'<tr><td align="left" colspan="2"><b>{_esc(name)}</b></td></tr>']
    for device, (fill, _) in facts.colours.items():
        steps = sum(1 for s in facts.steps if s.device.name == device)
        text = f"{device} ({steps} step{'s' * (steps != 1)})"
        rows.append(f'<tr><td bgcolor="{fill}" width="24"></td><td align="left">{_esc(text)}</td></tr>')
    if facts.crossing:
        rows.append(f'<tr><td border="1" color="{_CROSSING}" width="24"></td>'
                    f'<td align="left"><font color="{_CROSSING}">tensor crossing devices</font></td></tr>')
    return f'<table border="0" cellspacing="2" cellpadding="2">{"".join(rows)}</table>'


def _operand_text(operand: Operand, index: int, implied_type=None) -> str:
    """``#index TYPE [dims]`` (TYPE left out when it is ``implied_type``) and quantization."""
    text = f"#{index}"
    if operand.type != implied_type:
        text += " " + operand.type.name.removeprefix("TENSOR_")
    if operand.dimensions:
        text += " [" + ",".join(str(d) if d else "?" for d in operand.dimensions) + "]"
    if operand.scale or operand.zero_point:
        text += f"\nscale={operand.scale:g} zp={operand.zero_point}"
    if operand.extension_data is not None:
        text += f"\nextension data {len(operand.extension_data)} B"
    return text


def _params(facts: _Facts, op_index: int) -> list[str]:
    """The operation's inline values and shared weights, named as NNAPI names them
    (``stride 2x2``, ``padding SAME``, ``fuse RELU6``, ``bias [0,0]``, ``input1 #5``)."""
    op = facts.graph.operations[op_index]
    shown = [(pos, i) for pos, i in enumerate(op.inputs)
             if _kind(facts.hal, i) == "inline" or facts.weight_home.get(i, op_index) != op_index]
    values = {pos: _inline_value(facts.hal, i) for pos, i in shown
              if _kind(facts.hal, i) == "inline" and facts.graph.operands[i].lifetime in _CONSTANTS}
    types = [facts.graph.operands[i].type for i in op.inputs]
    named, unnamed = _opparams.describe(op.type.name, types, values)
    rest = [(pos, f"{_opparams.input_name(op.type.name, types, pos)} {_param(facts, i)}")
            for pos, i in shown if pos in unnamed or pos not in values]
    return [text for _, text in sorted(named + rest)]


def _param(facts: _Facts, index: int) -> str:
    """The inline value; a weight listed by another operation shows as ``#<index>``."""
    if _kind(facts.hal, index) == "weight":
        return f"#{index}"
    return _inline_value(facts.hal, index)


def _inline_value(hal: HalModel, index: int) -> str:
    operand = hal.main.operands[index]
    if operand.lifetime == L.NO_VALUE:
        return "omitted"
    if operand.lifetime == L.SUBGRAPH:
        return f"subgraph {operand.location.offset if operand.location else '?'}"
    try:
        value = read_constant(hal, operand)
    except Exception:  # noqa: BLE001 - an unreadable pool still dumps, marked as such
        return f"#{index} (unreadable)"
    text = _format(value)
    return text if len(text) <= _VALUE_CHARS else text[:_VALUE_CHARS - 1] + "…"


def _format(value) -> str:
    if isinstance(value, np.ndarray):
        return str(np.vectorize(_format, otypes=[object])(value).tolist()).replace("'", "").replace(" ", "")
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}" if math.isfinite(value) else str(float(value))
    return str(value)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
