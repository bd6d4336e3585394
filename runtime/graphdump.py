"""GraphDump: a model or a compiled plan as Graphviz dot (AOSP ``GraphDump.cpp``, as a picture).

Operands and operations are nodes. Model inputs (``invhouse``, blue), outputs (``house``,
green), constants (``note``, grey; ``folder`` for pool references), omitted operands
(dashed) and temporaries (ellipse) are told apart; labels carry index, type, dimensions and
quantization. For a compilation, operations are grouped in one cluster per plan step and
coloured by device, and tensors crossing between steps are drawn bold red.

``NN_GRAPHDUMP=DIR`` makes every finished compilation write its dot into ``DIR``.

Example:
    >>> text = graph_dump(model, "model.dot")      # doctest: +SKIP
    >>> subprocess.run(["dot", "-Tsvg", "model.dot", "-o", "model.svg"])  # doctest: +SKIP
"""
from __future__ import annotations

import io
import itertools
import logging
import os
import re
from pathlib import Path

import numpy as np

import vlog
from runtime.hal.types import HalModel, Operand, OperandLifetime as L, is_scalar, numpy_dtype

NN_GRAPHDUMP = "NN_GRAPHDUMP"
"""Environment variable: a directory where every finished compilation writes ``<model>-<n>.dot``.

Read once, at import (like ``debug.nn.graphdump`` style properties); unset means no dumps.
"""

_DUMP_DIR = os.environ.get(NN_GRAPHDUMP) or None
_counter = itertools.count()
_log = logging.getLogger("nn.GraphDump")
_PALETTE = ("#8ecae6", "#ffb703", "#90be6d", "#f28482", "#b39ddb", "#f6bd60")
_STYLE = {
    L.SUBGRAPH_INPUT: 'shape=invhouse, style=filled, fillcolor="#bde0fe"',
    L.SUBGRAPH_OUTPUT: 'shape=house, style=filled, fillcolor="#b7e4c7"',
    L.CONSTANT_COPY: 'shape=note, style=filled, fillcolor="#e9ecef"',
    L.CONSTANT_REFERENCE: 'shape=folder, style=filled, fillcolor="#dee2e6"',
    L.NO_VALUE: 'shape=box, style=dashed, fontcolor="#6c757d"',
    L.SUBGRAPH: 'shape=component, style=filled, fillcolor="#fff3bf"',
    L.TEMPORARY_VARIABLE: "shape=ellipse",
}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _scalar_value(model: HalModel, operand: Operand) -> str:
    loc = operand.location
    if operand.lifetime != L.CONSTANT_COPY or loc is None or not is_scalar(operand.type):
        return ""
    value = np.frombuffer(model.operand_values, numpy_dtype(operand.type), 1, loc.offset)[0]
    return f" = {value.item()}"


def _operand_label(model: HalModel, index: int, operand: Operand) -> str:
    label = f"#{index} {operand.type.name}"
    if operand.dimensions:
        label += "\n[" + ",".join(str(d) if d else "?" for d in operand.dimensions) + "]"
    label += _scalar_value(model, operand)
    if operand.scale or operand.zero_point:
        label += f"\nscale={operand.scale:g} zp={operand.zero_point}"
    if operand.lifetime == L.NO_VALUE:
        label += "\n(omitted)"
    return label


def _model_dot(hal: HalModel, name: str, steps=None, crossing=frozenset()) -> str:
    graph = hal.main
    out = io.StringIO()
    out.write(f"digraph {_quote(name)} {{\n  rankdir=TB;\n  label={_quote(name)};\n")
    out.write('  node [fontname="Helvetica", fontsize=10];\n  edge [fontsize=8];\n')
    for index, operand in enumerate(graph.operands):
        style = _STYLE.get(operand.lifetime, "shape=ellipse")
        extra = ', color="#d00000", penwidth=3, fontcolor="#d00000"' if index in crossing else ""
        label = _operand_label(hal, index, operand) + ("\n(crosses devices)" if index in crossing else "")
        out.write(f"  d{index} [label={_quote(label)}, {style}{extra}];\n")
    if steps is None:
        for index, op in enumerate(graph.operations):
            out.write(f"  o{index} [label={_quote(f'#{index} {op.type.name}')}, shape=box, "
                      f'style="rounded,filled", fillcolor="#ffd6a5"];\n')
    else:
        _write_clusters(out, graph, steps)
    for index, op in enumerate(graph.operations):
        for position, operand_index in enumerate(op.inputs):
            bold = ', color="#d00000", penwidth=2' if operand_index in crossing else ""
            out.write(f"  d{operand_index} -> o{index} [label={position}{bold}];\n")
        for operand_index in op.outputs:
            out.write(f"  o{index} -> d{operand_index};\n")
    out.write("}\n")
    return out.getvalue()


def _write_clusters(out: io.StringIO, graph, steps) -> None:
    colours: dict[str, str] = {}
    for step in steps:
        colour = colours.setdefault(step.device.name, _PALETTE[len(colours) % len(_PALETTE)])
        out.write(f"  subgraph cluster_step{step.index} {{\n")
        out.write(f"    label={_quote(f'step {step.index}: {step.device.name}')};\n")
        out.write(f'    style="rounded"; color={_quote(colour)}; penwidth=2;\n')
        for index in step.operations:
            op = graph.operations[index]
            label = f"#{index} {op.type.name}\n{step.device.name}"
            out.write(f"    o{index} [label={_quote(label)}, shape=box, style=\"rounded,filled\", "
                      f"fillcolor={_quote(colour)}];\n")
        out.write("  }\n")


def to_dot(model_or_compilation) -> str:
    """The dot text of a finished :class:`Model` or :class:`Compilation`."""
    from runtime.compilation import Compilation  # noqa: PLC0415 - compilation imports us lazily
    if isinstance(model_or_compilation, Compilation):
        compilation = model_or_compilation
        hal = compilation.model.to_hal()
        if compilation.plan is None:
            return _model_dot(hal, compilation.model.name)
        plan = compilation.plan
        return _model_dot(hal, compilation.model.name, plan.steps, plan.crossing)
    return _model_dot(model_or_compilation.to_hal(), model_or_compilation.name)


def graph_dump(model_or_compilation, file=None) -> str:
    """Write the Graphviz dot of a model or compilation and return it.

    Args:
        model_or_compilation: A finished Model, or a Compilation (clusters per plan step).
        file: A path or a text file object. None writes into the ``NN_GRAPHDUMP`` directory
            when it is set, else to VLOG (tags ``compilation``/``model``, log tag GraphDump).

    Raises:
        NnError: BAD_STATE for a model that is not finished.
    """
    text = to_dot(model_or_compilation)
    if file is not None:
        if hasattr(file, "write"):
            file.write(text)
        else:
            Path(file).write_text(text)
    elif _DUMP_DIR:
        _write_into(_DUMP_DIR, model_or_compilation, text)
    else:
        from runtime.compilation import Compilation  # noqa: PLC0415
        tag = "compilation" if isinstance(model_or_compilation, Compilation) else "model"
        vlog.log(tag, "GraphDump", "%s", text)
    return text


def _write_into(directory: str, subject, text: str) -> None:
    name = getattr(getattr(subject, "model", subject), "name", "model")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    path = Path(directory) / f"{safe}-{os.getpid()}-{next(_counter)}.dot"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as error:
        _log.warning("NN_GRAPHDUMP: cannot write %s: %s", path, error)


def dump_to_env_dir(compilation) -> None:
    """Called by ``Compilation.finish``: write the plan's dot into ``NN_GRAPHDUMP`` if set."""
    if _DUMP_DIR:
        _write_into(_DUMP_DIR, compilation, to_dot(compilation))


def forTest_set_dump_dir(directory: str | None) -> None:
    """Test hook: replace the ``NN_GRAPHDUMP`` directory read at import."""
    global _DUMP_DIR
    _DUMP_DIR = directory
