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
* Tensors the model names (a .tflite's ``input``, ``regressors``...: ``names`` maps operand
  index to name) carry the name first in their label: ``input #0 FLOAT32 [1,128,128,3]``.
* A long network wraps into side-by-side columns (borderless clusters labelled ``column
  k of n``) of about :data:`OPS_PER_COLUMN` operations in run order, each cut where the
  fewest tensors cross it (with several plan steps, only between steps). The first
  operations of the columns share a rank, so every column starts at the top. A tensor read
  in a later column is drawn there again as a dashed connector (``#36 FLOAT32 [..] (from
  column 1)``) instead of an edge across the picture, so no edge joins two columns and they
  stand left to right in order (see :func:`_declaration_order`); with one plan step the
  model's inputs top the first column and its outputs end the last. A 90-operation model is
  six columns about 2,800 pixels tall instead of one column 10,000 pixels tall.
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
#: Operations per column before a long network wraps into the next column.
OPS_PER_COLUMN = 15
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
    names: dict = field(default_factory=dict)  # operand index -> the model's tensor name
    column: dict = field(default_factory=dict)  # op index -> column of the layout
    connectors: dict = field(default_factory=dict)  # (tensor, column) -> its first reader there

    @property
    def graph(self):
        return self.hal.main


def model_dot(hal: HalModel, name: str, steps=(), crossing=frozenset(), names=None) -> str:
    """Dot text of ``hal``; with ``steps`` (plan steps) one cluster per step; ``names``
    (``{operand index: tensor name}``) labels the tensors the model names."""
    facts = _facts(hal, tuple(steps), frozenset(crossing))
    facts.names = {int(index): str(text) for index, text in (names or {}).items() if text}
    facts.column = _columns(facts)
    facts.connectors = _connectors(facts)
    out = io.StringIO()
    out.write(f"digraph {_quote(name)} {{\n{_GRAPH_HEAD}")
    out.write(f"  label=<{_title(facts, name)}>;\n")
    loose = _loose_tensors(facts)
    _write_column_heads(out, facts)
    if len(facts.steps) == 1:  # its columns are inside its cluster, with the loose tensors
        _write_step(out, facts, facts.steps[0], loose=loose)
        for index in loose if _column_count(facts) < 2 else ():
            _write_tensor(out, facts, index, "  ")
    else:  # a column holds whole steps, or the operations of a model without a plan
        for column in _declaration_order(set(facts.column.values()) or {0}):
            pad = _open_column(out, facts, column, "  ")
            for step in facts.steps:
                if facts.column.get(step.operations[0], 0) == column:
                    _write_step(out, facts, step, pad)
            if not facts.steps:
                _write_nodes(out, facts, column, pad)
            for index in loose:
                if _tensor_column(facts, index) == column:
                    _write_tensor(out, facts, index, pad)
            _close_column(out, facts, pad)
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


def run_order(facts: _Facts) -> list[int]:
    """The operations in run order: a plan's steps in turn, else a topological order of the
    graph (the lowest index first among the ready ones)."""
    if facts.steps:
        return [op for step in facts.steps for op in step.operations]
    operations = facts.graph.operations
    waiting = [sum(1 for i in set(op.inputs) if i in facts.producer) for op in operations]
    ready, order = [i for i, count in enumerate(waiting) if not count], []
    while ready:
        ready.sort()
        op_index = ready.pop(0)
        order.append(op_index)
        for index in set(operations[op_index].outputs):
            for reader in set(facts.readers.get(index, [])):
                waiting[reader] -= 1
                if not waiting[reader]:
                    ready.append(reader)
    return order + [i for i in range(len(operations)) if i not in set(order)]


def _columns(facts: _Facts) -> dict[int, int]:
    """The layout column of each operation: run order cut into columns of about
    :data:`OPS_PER_COLUMN` operations, each cut where the fewest tensors cross it (within a
    third of a column of the even cut); with several plan steps, only between steps."""
    order = run_order(facts)
    if len(order) <= OPS_PER_COLUMN:
        return {op: 0 for op in order}
    if len(facts.steps) > 1:
        allowed, at = set(), 0
        for step in facts.steps:
            at += len(step.operations)
            allowed.add(at)
    else:
        allowed = set(range(1, len(order)))
    cuts = column_cuts(_live_counts(facts, order), allowed)
    return {op: sum(position >= cut for cut in cuts) for position, op in enumerate(order)}


def column_cuts(live, allowed, per_column: float = OPS_PER_COLUMN) -> list[int]:
    """Where to cut ``len(live) - 1`` operations in run order into columns of about
    ``per_column``: positions from ``allowed``, each where the fewest tensors cross
    (``live[c]``: tensors made before position ``c`` and read from it on) within a third of a
    column of the even cut. Also used by ``runtime.delegate.graph``.

    >>> column_cuts([0] + [1] * 29 + [0], set(range(1, 30)))
    [15]
    """
    total = len(live) - 1
    count = max(1, math.ceil(total / per_column))
    per = total / count
    cuts, last = [], 0
    for k in range(1, count):
        window = [c for c in allowed if last < c < total and abs(c - k * per) <= per / 3]
        if not window:
            continue
        cut = min(window, key=lambda c: (live[c], abs(c - k * per)))
        cuts.append(cut)
        last = cut
    return cuts


def _live_counts(facts: _Facts, order: list) -> list:
    """``live[c]``: how many tensors made by the first ``c`` operations of ``order`` are
    read by the rest (the edges a column cut before position ``c`` crosses)."""
    position = {op: at for at, op in enumerate(order)}
    live = [0] * (len(order) + 1)
    for index, producer in facts.producer.items():
        if _kind(facts.hal, index) != "tensor" or producer not in position:
            continue
        last = max((position.get(r, -1) for r in facts.readers.get(index, [])), default=-1)
        for cut in range(position[producer] + 1, last + 1):
            live[cut] += 1
    return live


def _connectors(facts: _Facts) -> dict:
    """``{(tensor, column): first reader}`` for each tensor read in a later column than its
    own: there it is drawn again, as a connector at its first reader, instead of an edge
    across the picture."""
    found = {}
    for op in run_order(facts):
        column = facts.column.get(op, 0)
        for index in facts.graph.operations[op].inputs:
            if _kind(facts.hal, index) == "tensor" and _tensor_column(facts, index) != column:
                found.setdefault((index, column), op)
    return found


def _tensor_column(facts: _Facts, index: int) -> int:
    """A tensor's column: its producer's, else (a model input) its first reader's."""
    if index in facts.producer:
        return facts.column.get(facts.producer[index], 0)
    return min((facts.column.get(r, 0) for r in facts.readers.get(index, [])), default=0)


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
def _column_count(facts: _Facts) -> int:
    return len(set(facts.column.values()))


def _declaration_order(columns) -> list[int]:
    """The columns in the order their clusters are written: the last first. Graphviz's dot
    prepends each node to its node list and places sibling clusters that no edge joins in that
    list's order, so the cluster written last is laid out leftmost (graphviz 2.43: flat edges,
    ``ordering=out`` and anchor nodes did not hold the order). No edge joins two columns: a
    tensor read in a later column is a connector there, and with one plan step the model's
    inputs and outputs are drawn in their columns (a node outside would pull its column
    beside it); tests/runtime/test_graphdump.py checks the order of the drawn columns."""
    return sorted(columns, reverse=True)


def _open_column(out: io.StringIO, facts: _Facts, column: int, pad: str) -> str:
    """Open the borderless cluster of ``column`` when the layout has several; the padding
    inside it."""
    count = len(set(facts.column.values()))
    if count < 2:
        return pad
    out.write(f'{pad}subgraph cluster_column{column} {{\n{pad}  label=<<i>column {column + 1} of {count}</i>>; '
              f'labeljust=l; fontsize=10; fontcolor="#495057"; peripheries=0; margin=4;\n')
    return pad + "  "


def _close_column(out: io.StringIO, facts: _Facts, pad: str) -> None:
    if len(set(facts.column.values())) >= 2:
        out.write(f"{pad[:-2]}}}\n")


def _write_nodes(out: io.StringIO, facts: _Facts, column: int, pad: str, step=None) -> None:
    """The operations of ``column`` (of ``step``, if given), their connectors and (in a step)
    the tensors internal to the step."""
    ops = [op for op in (step.operations if step is not None else range(len(facts.graph.operations)))
           if facts.column.get(op, 0) == column]
    for op_index in ops:
        _write_operation(out, facts, op_index, pad)
    _write_connectors(out, facts, set(ops), pad)
    if step is None:
        return
    for index in range(len(facts.graph.operands)):
        if _kind(facts.hal, index) == "tensor" and _internal_step(facts, index) is step \
                and _tensor_column(facts, index) == column:
            _write_tensor(out, facts, index, pad)


def _write_step(out: io.StringIO, facts: _Facts, step, pad: str = "  ", loose=()) -> None:
    """The cluster of one plan step; a step alone in its plan holds the layout's columns and,
    when there are several, the ``loose`` tensors (model inputs and outputs) of each."""
    fill, background = facts.colours[step.device.name]
    out.write(f"{pad}subgraph cluster_step{step.index} {{\n")
    out.write(f"{pad}  label=<<b>{_esc(f'step {step.index}: {step.device.name}')}</b>>; "
              f"labeljust=l; fontsize=11;\n")
    out.write(f'{pad}  style="rounded"; color={_quote(fill)}; bgcolor={_quote(background)}; penwidth=2;\n')
    alone = len(facts.steps) == 1
    for column in _declaration_order({facts.column.get(op, 0) for op in step.operations}):
        inner = _open_column(out, facts, column, pad + "  ") if alone else pad + "  "
        _write_nodes(out, facts, column, inner, step)
        if alone and _column_count(facts) >= 2:
            for index in loose:
                if _tensor_column(facts, index) == column:
                    _write_tensor(out, facts, index, inner)
        if alone:
            _close_column(out, facts, inner)
    out.write(f"{pad}}}\n")


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
    if index in facts.names:
        text = f"{facts.names[index]} {text}"
    if index in facts.crossing:
        text += "\ncrosses devices"
        style += f', color="{_CROSSING}", fontcolor="{_CROSSING}", penwidth=2.5'
    out.write(f'{pad}d{index} [label={_quote(text)}, {style}, fontsize=9, margin="0.02,0.01"];\n')


def _write_connectors(out: io.StringIO, facts: _Facts, ops: set, pad: str) -> None:
    """The connectors whose first reader is one of ``ops``: ``#36 FLOAT32 [..] (column 1)``."""
    for (index, column), reader in facts.connectors.items():
        if reader not in ops:
            continue
        text = _operand_text(facts.graph.operands[index], index).split("\n")[0]
        if index in facts.names:
            text = f"{facts.names[index]} {text}"
        text += f"\n(from column {_tensor_column(facts, index) + 1})"
        colour = _CROSSING if index in facts.crossing else "#495057"
        out.write(f"{pad}c{index}_{column} [label={_quote(text)}, shape=cds, style=dashed, "
                  f'color="{colour}", fontcolor="{colour}", fontsize=8, margin="0.04,0.01"];\n')


def _write_edges(out: io.StringIO, facts: _Facts) -> None:
    for op_index, op in enumerate(facts.graph.operations):
        column = facts.column.get(op_index, 0)
        for index in op.inputs:
            kind = _kind(facts.hal, index)
            if kind == "tensor":
                red = f' [color="{_CROSSING}", penwidth=2]' if index in facts.crossing else ""
                source = f"c{index}_{column}" if (index, column) in facts.connectors else f"d{index}"
                out.write(f"  {source} -> o{op_index}{red};\n")
            elif kind == "weight" and facts.weight_home[index] != op_index:  # shared weights
                home = facts.weight_home[index]
                loose = ", constraint=false" if facts.column.get(home, 0) != column else ""
                out.write(f'  o{home}:w{index} -> o{op_index} [color="{_WEIGHT_LINE}", '
                          f'style=dashed{loose}];\n')
        for index in op.outputs:
            red = f' [color="{_CROSSING}", penwidth=2]' if index in facts.crossing else ""
            out.write(f"  o{op_index} -> d{index}{red};\n")


def _write_column_heads(out: io.StringIO, facts: _Facts) -> None:
    """The first operation of every column on one rank, left to right in column order; an
    operation whose tensor inputs all come from earlier columns stays below the operation
    before it in its column (an invisible edge), instead of rising to the column's top. The
    columns' left-to-right order comes from the order they are written in
    (:func:`_declaration_order`); each column also says which it is, and each connector which
    column its tensor comes from."""
    heads, previous = {}, {}
    for op in run_order(facts):
        column = facts.column.get(op, 0)
        heads.setdefault(column, op)
        inputs = [i for i in facts.graph.operations[op].inputs
                  if _kind(facts.hal, i) == "tensor" and i in facts.producer]
        if column in previous and not any(_tensor_column(facts, i) == column for i in inputs):
            out.write(f"  o{previous[column]} -> o{op} [style=invis];\n")
        previous[column] = op
    if len(heads) < 2:
        return
    out.write(f"  {{ rank=same; {'; '.join(f'o{heads[column]}' for column in sorted(heads))}; }}\n")


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
