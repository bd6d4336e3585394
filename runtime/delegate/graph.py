"""GraphDump of a delegated .tflite: the TFLite graph, each operator coloured by where it ran.

This is its own module, not part of ``runtime.graphdump``: GraphDump draws NNAPI models and
plans (HAL operands and operations), while this draws the TFLite graph itself (TFLite
operators such as GELU or a custom operator, which have no NNAPI form) as the delegate split
it, from the ``Delegation`` and its report (``runtime.delegate.report``); it shares
GraphDump's layout rules (:func:`runtime._graphdot.column_cuts`) and its SVG renderer.

One node per TFLite operator, labelled ``#<index> <operator>`` as GraphDump labels operations.
Each delegated partition is a cluster ``partition <n> (<devices>)`` whose operators share its
colour; an operator left on LiteRT's CPU is grey, its label saying why (``CPU: unsupported
operator``; the whole reason is its tooltip). A constant-only operator has a dashed border
and says what the report says of it (``[folded into a constant at load time]``, ``CPU:
constant-only``). Edges are tensors, labelled by the model's tensor names; an edge between a
partition and the CPU (or another partition) is red: the tensor is copied there. Model
inputs (``invhouse``, blue) and outputs (``house``, green) are tensor nodes; constants are
not drawn. The title holds the legend and the delegation's summary line.

As GraphDump, the graph reads top to bottom, and a long model wraps into side-by-side
columns of about ``OPS_PER_COLUMN`` operators in run order, each cut where the fewest tensors
cross; a partition cut by a column goes on as ``partition <n> (continued)``, and a tensor
read in a later column is drawn there again as a dashed connector (``(from column 1)``).

Example:
    >>> from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph
    >>> from nnscope.runtime.tflite._reader import read_graph
    >>> from nnscope.runtime.delegate.delegation import decide
    >>> from nnscope.runtime.delegate.report import report
    >>> g = FlatbufferGraph()
    >>> x, y, z, w = (g.tensor(n, (1, 4), "FLOAT32") for n in "xyzw")
    >>> g.operator("RELU", [x], [y]); g.operator("GELU", [y], [z]); g.operator("RELU", [z], [w])
    >>> g.inputs, g.outputs = [x], [w]
    >>> data = g.serialize()
    >>> delegation = decide(data)
    >>> text = to_dot(read_graph(data), delegation, report(delegation, [["sample-all"], [], ["sample-all"]]))
    >>> print(text)  # doctest: +ELLIPSIS
    digraph "model" {
    ...
      subgraph cluster_partition0 {
        label="partition 0 (sample-all)"; ...
        o0 [label="#0 RELU", ..., fillcolor="#8ecae6", ...];
      }
      o1 [label="#1 GELU\\nCPU: unsupported operator", ..., fillcolor="#ced4da", tooltip="CPU: unsupported operator: GELU has no NNAPI form"];
    ...
      o0 -> o1 [label="y", ..., color="#d00000", ...];
    ...
    >>> write_svg(read_graph(data), delegation, report(delegation, [[], [], []]), "m.svg")  # doctest: +SKIP
"""
from __future__ import annotations

import html
import io
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from nnscope.runtime import graphdump
from nnscope.runtime._graphdot import OPS_PER_COLUMN, column_cuts
from nnscope.runtime.delegate.delegation import Delegation
from nnscope.runtime.delegate.validate import Category
from nnscope.runtime.tflite._reader import TfliteGraph

#: Partition colours: (operator fill, cluster background), in partition order, then again.
PALETTE = (("#8ecae6", "#eef7fb"), ("#ffb703", "#fff6e0"), ("#90be6d", "#f0f7eb"),
           ("#c77dff", "#f7efff"), ("#f4a261", "#fdf1e7"), ("#64b5a6", "#eaf5f3"))
#: The fill of an operator left on LiteRT's CPU kernels.
CPU_FILL = "#ced4da"
#: The colour of a tensor copied between a partition and the CPU (or another partition).
CROSSING = "#d00000"
_NAME_CHARS = 20
_NOTE_CHARS = 24
_SMALL = 8
_HEAD = """  rankdir=TB; newrank=true; nodesep=0.25; ranksep=0.3;
  labelloc=t; labeljust=l; fontname="Helvetica";
  node [fontname="Helvetica", fontsize=10, margin="0.08,0.03", height=0.3];
  edge [arrowsize=0.6, color="#495057", fontname="Helvetica", fontsize=7];
"""


@dataclass
class _Drawing:
    """What the writer knows: the graph, each operator's report row and place (its
    partition number, None for the CPU), run order, columns and tensor connections."""

    graph: TfliteGraph
    rows: dict
    data: dict
    folded: frozenset
    order: list = field(default_factory=list)
    producer: dict = field(default_factory=dict)
    readers: dict = field(default_factory=dict)
    column: dict = field(default_factory=dict)
    connectors: dict = field(default_factory=dict)  # (tensor, column) -> first reader there

    def place(self, op: int) -> int | None:
        return self.rows[op]["partition"]

    def crossing(self, producer: int, reader: int) -> bool:
        return self.place(producer) != self.place(reader)


def to_dot(graph: TfliteGraph, delegation: Delegation, data: dict, name: str = "model") -> str:
    """The dot text of ``graph`` coloured by ``delegation`` and its report ``data``
    (:func:`runtime.delegate.report.report`: partitions' devices, CPU reasons)."""
    drawing = _drawing(graph, delegation, data)
    out = io.StringIO()
    out.write(f"digraph {_quote(name)} {{\n{_HEAD}  label=<{_legend(drawing, name)}>;\n")
    _write_column_heads(out, drawing)
    columns = sorted(set(drawing.column.values()) or {0})
    for column in reversed(columns):  # the last written is laid out leftmost (see _graphdot)
        _write_column(out, drawing, column, len(columns))
    _write_column_order(out, drawing)
    _write_edges(out, drawing)
    out.write("}\n")
    return out.getvalue()


def write_dot(graph: TfliteGraph, delegation: Delegation, data: dict, path, name: str = "model") -> str:
    """Write :func:`to_dot` to ``path`` and return the text."""
    text = to_dot(graph, delegation, data, name)
    Path(path).write_text(text)
    return text


def write_svg(graph: TfliteGraph, delegation: Delegation, data: dict, path, name: str = "model") -> None:
    """Render :func:`to_dot` to an SVG file with Graphviz's ``dot``.

    Raises:
        FileNotFoundError: ``dot`` is not on PATH (the message says to install Graphviz).
        OSError: ``dot`` failed (its first error line) or ``path`` cannot be written.
    """
    graphdump.write_svg(to_dot(graph, delegation, data, name), path)


# ------------------------------------------------------------------ facts
def _drawing(graph: TfliteGraph, delegation: Delegation, data: dict) -> _Drawing:
    rows = {row["index"]: row for row in data["operators"]}
    drawing = _Drawing(graph, rows, data, frozenset(delegation.folded))
    for op_index, op in enumerate(graph.operators):
        for tensor in op.outputs:
            drawing.producer[tensor] = op_index
        for tensor in _drawn_inputs(graph, op):
            drawing.readers.setdefault(tensor, []).append(op_index)
    drawing.order = _run_order(drawing, delegation)
    steps = len(drawing.order) - len(drawing.folded) or 1  # a folded one sits beside its reader
    per_column = OPS_PER_COLUMN * len(drawing.order) / steps
    cuts = column_cuts(_live_counts(drawing), set(range(1, len(drawing.order))), per_column)
    drawing.column = {op: sum(at >= cut for cut in cuts) for at, op in enumerate(drawing.order)}
    drawing.connectors = _connectors(drawing)
    return drawing


def _drawn_inputs(graph: TfliteGraph, op) -> list[int]:
    """The operator's inputs drawn as edges: not omitted, not constants, each once."""
    return list(dict.fromkeys(t for t in op.inputs if t >= 0 and graph.tensors[t].data is None))


def _run_order(drawing: _Drawing, delegation: Delegation) -> list[int]:
    """The operators in run order, step by step, each folded (constant-only) operator just
    before the first operator that reads it."""
    order: dict[int, None] = {}
    for step in delegation.steps:
        for op in step.operators:
            order.update(dict.fromkeys(_feeders(drawing, op)))
            order[op] = None
    order.update(dict.fromkeys(range(len(drawing.graph.operators))))
    return list(order)


def _feeders(drawing: _Drawing, op: int) -> list[int]:
    """The folded operators whose results ``op`` reads, directly or through others, in
    index order (an order they can run in)."""
    found, pending = set(), list(drawing.graph.operators[op].inputs)
    while pending:
        source = drawing.producer.get(pending.pop())
        if source in drawing.folded and source not in found:
            found.add(source)
            pending.extend(drawing.graph.operators[source].inputs)
    return sorted(found)


def _live_counts(drawing: _Drawing) -> list[int]:
    """``live[c]``: the tensors made by the first ``c`` operators of the run order and read
    by the rest (the edges a column cut at ``c`` would cross)."""
    position = {op: at for at, op in enumerate(drawing.order)}
    live = [0] * (len(drawing.order) + 1)
    for tensor, producer in drawing.producer.items():
        last = max((position[r] for r in drawing.readers.get(tensor, [])), default=-1)
        for cut in range(position[producer] + 1, last + 1):
            live[cut] += 1
    return live


def _tensor_column(drawing: _Drawing, tensor: int) -> int:
    """A tensor's column: its producer's, else (a model input) its first reader's."""
    if tensor in drawing.producer:
        return drawing.column[drawing.producer[tensor]]
    return min((drawing.column[r] for r in drawing.readers.get(tensor, [])), default=0)


def _connectors(drawing: _Drawing) -> dict:
    found = {}
    for op in drawing.order:
        for tensor in _drawn_inputs(drawing.graph, drawing.graph.operators[op]):
            if _tensor_column(drawing, tensor) != drawing.column[op]:
                found.setdefault((tensor, drawing.column[op]), op)
    return found


def _loose_tensors(drawing: _Drawing) -> list[int]:
    """The tensors drawn as nodes: model inputs and outputs, and other non-constant
    tensors no operator makes (a variable)."""
    graph = drawing.graph
    free = [t for t in drawing.readers if t not in drawing.producer]
    return list(dict.fromkeys(t for t in (*graph.inputs, *free, *graph.outputs)
                              if graph.tensors[t].data is None))


# ------------------------------------------------------------------ nodes
def _write_column(out: io.StringIO, drawing: _Drawing, column: int, count: int) -> None:
    pad = "  "
    if count > 1:
        out.write(f'{pad}subgraph cluster_column{column} {{\n{pad}  label=<<i>column {column + 1} '
                  f'of {count}</i>>; labeljust=l; fontsize=10; fontcolor="#495057"; peripheries=0; margin=4;\n')
        pad += "  "
    for place, ops in _segments(drawing, column):
        if place is None:
            for op in ops:
                _write_operator(out, drawing, op, pad)
        else:
            _write_partition(out, drawing, place, ops, pad)
    for tensor in _loose_tensors(drawing):
        if _tensor_column(drawing, tensor) == column:
            _write_tensor(out, drawing, tensor, pad)
    _write_connectors(out, drawing, column, pad)
    if count > 1:
        out.write("  }\n")


def _segments(drawing: _Drawing, column: int) -> list[tuple[int | None, list[int]]]:
    """The column's operators in run order, grouped into runs of one place."""
    segments: list[tuple[int | None, list[int]]] = []
    for op in drawing.order:
        if drawing.column[op] != column:
            continue
        if segments and segments[-1][0] == drawing.place(op):
            segments[-1][1].append(op)
        else:
            segments.append((drawing.place(op), [op]))
    return segments


def _write_partition(out: io.StringIO, drawing: _Drawing, number: int, ops: list[int], pad: str) -> None:
    """The cluster of a partition's operators (or of the part of it in one column)."""
    fill, background = _colours(number)
    first = min(drawing.order.index(op) for op in ops) == _first_position(drawing, number)
    name = f"cluster_partition{number}" + ("" if first else f"_{drawing.column[ops[0]]}")
    text = _partition_text(drawing, number) + ("" if first else " (continued)")
    out.write(f"{pad}subgraph {name} {{\n{pad}  label={_quote(text)}; labeljust=l; fontsize=11; "
              f'style="rounded,filled"; color={_quote(fill)}; fillcolor={_quote(background)}; penwidth=2;\n')
    for op in ops:
        _write_operator(out, drawing, op, pad + "  ")
    out.write(f"{pad}}}\n")


def _first_position(drawing: _Drawing, number: int) -> int:
    return min(at for at, op in enumerate(drawing.order) if drawing.place(op) == number)


def _partition_text(drawing: _Drawing, number: int) -> str:
    """``partition 0 (sample-all, nnapi-reference)``, as the report names it."""
    devices = next((p["devices"] for p in drawing.data["partitions"] if p["partition"] == number), [])
    return f"partition {number} ({', '.join(devices) or 'NNAPI'})"


def _colours(number: int | None) -> tuple[str, str]:
    return (CPU_FILL, "") if number is None else PALETTE[number % len(PALETTE)]


def _write_operator(out: io.StringIO, drawing: _Drawing, op: int, pad: str) -> None:
    row = drawing.rows[op]
    label, tooltip = f"#{op} {drawing.graph.operators[op].label}", _where(row)
    if row["partition"] is None:
        label += "\nCPU: " + _category_words(row)
    if row["note"]:
        label += "\n" + textwrap.fill(f"[{row['note'].split(' (')[0]}]", _NOTE_CHARS)
        tooltip += f" [{row['note']}]"
    small = op in drawing.folded  # constant-only: dashed and small, beside the data flow
    style = f'style="rounded,filled,dashed", fontsize={_SMALL}' if small else 'style="rounded,filled"'
    out.write(f"{pad}o{op} [label={_quote(label)}, shape=box, {style}, "
              f"fillcolor={_quote(_colours(row['partition'])[0])}, tooltip={_quote(tooltip)}];\n")


def _where(row: dict) -> str:
    """Where the report says the operator ran: ``partition 0 (devices)`` or ``CPU: reason``."""
    if row["partition"] is not None:
        return f"partition {row['partition']} ({', '.join(row['devices']) or 'NNAPI'})"
    return f"CPU: {row['reason']}"


def _category_words(row: dict) -> str:
    """The reason's category in words (``unsupported operator``), ``constant-only`` for a
    folded operator."""
    if row["category"] is None:
        return row["reason"].split(":")[0]
    return Category[row["category"]].words


def _write_tensor(out: io.StringIO, drawing: _Drawing, tensor: int, pad: str) -> None:
    graph = drawing.graph
    shape = "invhouse" if tensor in graph.inputs else "house" if tensor in graph.outputs else "ellipse"
    fill = {"invhouse": "#bde0fe", "house": "#b7e4c7"}.get(shape, "white")
    out.write(f"{pad}d{tensor} [label={_quote(_tensor_text(graph, tensor))}, shape={shape}, "
              f'style=filled, fillcolor="{fill}", fontsize=9, margin="0.02,0.01"];\n')


def _tensor_text(graph: TfliteGraph, tensor: int) -> str:
    """``name #index TYPE [dims]``, as GraphDump labels a named tensor."""
    t = graph.tensors[tensor]
    text = f"#{tensor} {t.type_name} [{','.join(map(str, t.shape))}]"
    return f"{t.name} {text}" if t.name else text


def _write_connectors(out: io.StringIO, drawing: _Drawing, column: int, pad: str) -> None:
    """A tensor read in this column but made in an earlier one, drawn again here."""
    for (tensor, at), reader in drawing.connectors.items():
        if at != column:
            continue
        producer = drawing.producer.get(tensor)
        red = producer is not None and drawing.crossing(producer, reader)
        colour = CROSSING if red else "#495057"
        text = f"{_short(drawing.graph.tensors[tensor].name) or f'#{tensor}'}\n(from column " \
               f"{_tensor_column(drawing, tensor) + 1})"
        out.write(f"{pad}c{tensor}_{column} [label={_quote(text)}, shape=cds, style=dashed, "
                  f'color="{colour}", fontcolor="{colour}", fontsize=8, margin="0.04,0.01", '
                  f"tooltip={_quote(_tensor_text(drawing.graph, tensor))}];\n")


# ------------------------------------------------------------------ edges
def _write_edges(out: io.StringIO, drawing: _Drawing) -> None:
    graph = drawing.graph
    loose = set(_loose_tensors(drawing))
    for op in drawing.order:
        column = drawing.column[op]
        for tensor in _drawn_inputs(graph, graph.operators[op]):
            producer = drawing.producer.get(tensor)
            if (tensor, column) in drawing.connectors:
                source = f"c{tensor}_{column}"
            else:
                source = f"o{producer}" if producer is not None else f"d{tensor}"
            red = producer is not None and drawing.crossing(producer, op)
            out.write(f"  {source} -> o{op}{_edge_style(graph, tensor, red)};\n")
        for tensor in graph.operators[op].outputs:
            if tensor in graph.outputs and tensor in loose:
                out.write(f"  o{op} -> d{tensor}{_edge_style(graph, tensor, False)};\n")


def _edge_style(graph: TfliteGraph, tensor: int, red: bool) -> str:
    colour = f', color="{CROSSING}", fontcolor="{CROSSING}", penwidth=2' if red else ""
    return (f" [label={_quote(_short(graph.tensors[tensor].name))}, "
            f"tooltip={_quote(_tensor_text(graph, tensor))}{colour}]")


def _write_column_heads(out: io.StringIO, drawing: _Drawing) -> None:
    """As GraphDump: the first operator of every column on one rank, written before the
    columns (their order on the page comes from the order nodes are first named)."""
    heads: dict[int, int] = {}
    for op in drawing.order:
        heads.setdefault(drawing.column[op], op)
    if len(heads) > 1:
        out.write(f"  {{ rank=same; {'; '.join(f'o{heads[c]}' for c in sorted(heads))}; }}\n")


def _write_column_order(out: io.StringIO, drawing: _Drawing) -> None:
    """An operator with no input from its own column stays below the one before it (an
    invisible edge). Written after the columns: naming these nodes earlier put the columns
    out of order (face_landmark at feature level 28, tests/runtime/delegate/test_graph.py)."""
    previous: dict[int, int] = {}
    for op in drawing.order:
        column = drawing.column[op]
        inputs = [t for t in _drawn_inputs(drawing.graph, drawing.graph.operators[op])
                  if t in drawing.producer]
        if column in previous and not any(_tensor_column(drawing, t) == column for t in inputs):
            out.write(f"  o{previous[column]} -> o{op} [style=invis];\n")
        previous[column] = op


# ------------------------------------------------------------------ text
def _legend(drawing: _Drawing, name: str) -> str:
    """The title: the model's name, the summary, one row per partition, the CPU, crossings."""
    rows = [f"<b>{_esc(name)}</b>", _esc(drawing.data["summary"])]
    rows = [f'<tr><td align="left" colspan="2">{text}</td></tr>' for text in rows]
    for p in drawing.data["partitions"]:
        text = f"{_partition_text(drawing, p['partition'])}: {_count(p['operators'])}"
        rows.append(_swatch(_colours(p["partition"])[0], text))
    cpu = sum(1 for row in drawing.rows.values() if row["partition"] is None)
    if cpu:
        rows.append(_swatch(CPU_FILL, f"LiteRT's CPU kernels: {_count(cpu)}"))
    if any(drawing.crossing(p, r) for t, p in drawing.producer.items() for r in drawing.readers.get(t, [])):
        rows.append(f'<tr><td border="1" color="{CROSSING}" width="24"></td><td align="left">'
                    f'<font color="{CROSSING}">tensor crossing a partition boundary (copied)</font></td></tr>')
    return f'<table border="0" cellspacing="2" cellpadding="2">{"".join(rows)}</table>'


def _swatch(fill: str, text: str) -> str:
    return f'<tr><td bgcolor="{fill}" width="24"></td><td align="left">{_esc(text)}</td></tr>'


def _short(text: str) -> str:
    return text if len(text) <= _NAME_CHARS else text[:_NAME_CHARS - 1] + "…"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _count(operators: int) -> str:
    return f"{operators} operator{'s' * (operators != 1)}"
