"""GraphDump: a model or a compiled plan as Graphviz dot (AOSP ``GraphDump.cpp``, as a picture).

The graph reads top to bottom. Operations are rounded boxes whose labels carry their scalar
and small constant inputs, named as NNAPI names them (``stride 2x2``, ``bias [0,0]``, else
``input1 [..]``); each operation's weights are rows at its foot (``filter #1 [24,5,5,3]``);
model inputs (``invhouse``, blue), outputs (``house``, green) and temporaries (ellipses) are
tensor nodes labelled with index, type, dimensions and quantization. For a compilation, each
plan step is a cluster ``step <n>: <device>`` holding its operations and internal tensors,
coloured by device, with a legend in the title; tensors crossing devices are drawn red.
Tensors named by the model's file (``input_names``/``output_names``, as
``runtime.tflite.load_tflite`` returns them) carry their names: ``input #0 FLOAT32
[1,128,128,3]``. A long network wraps into columns. The layout rules live in
``runtime._graphdot``.

``NN_GRAPHDUMP=DIR`` makes every finished compilation write its dot into ``DIR``.

Example:
    >>> import io
    >>> from nnscope.runtime import Compilation, get_device
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> model = tiny_add()
    >>> text = graph_dump(model, io.StringIO())  # or a path: graph_dump(model, "model.dot")
    >>> print(text)
    digraph "tiny_add" {
    ...
      d0 [label="#0 FLOAT32 [1,4]", shape=invhouse, ...];
    ...
      d3 [label="#3 FLOAT32 [1,4]", shape=house, ...];
      d0 -> o0;
      d1 -> o0;
      o0 -> d3;
    }
    >>> compilation = Compilation.for_devices(model, [get_device("nnapi-reference")]); compilation.finish()
    >>> print(to_dot(compilation))
    digraph "tiny_add" {
    ...
      subgraph cluster_step0 {
        label=<<b>step 0: nnapi-reference</b>>; ...
    ...
    >>> render_svg(compilation, "plan.svg")  # runs Graphviz, writes into cwd  # doctest: +SKIP
    >>> compilation.free()
"""
from __future__ import annotations

import itertools
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

from nnscope import vlog
from nnscope.runtime._graphdot import model_dot

NN_GRAPHDUMP = "NN_GRAPHDUMP"
"""Environment variable: a directory where every finished compilation writes ``<model>-<n>.dot``.

Read once, at import (like ``debug.nn.graphdump`` style properties); unset means no dumps.
"""

#: The one-line error when SVG output is asked for and Graphviz is missing.
MISSING_DOT = ("Graphviz's `dot` is not on PATH, needed to render SVG; install Graphviz "
               "(Debian: apt-get install graphviz) or write --dot FILE.dot instead")

_DUMP_DIR = os.environ.get(NN_GRAPHDUMP) or None
_counter = itertools.count()
_log = logging.getLogger("nn.GraphDump")


def to_dot(model_or_compilation, input_names=(), output_names=()) -> str:
    """The dot text of a finished :class:`Model` or :class:`Compilation`.

    A compilation (anything with ``model`` and ``plan``) is drawn with one cluster per plan
    step once finished, and as its model before. ``input_names`` and ``output_names`` name
    the model's inputs and outputs in order (an empty or missing name leaves it unnamed).
    """
    plan = getattr(model_or_compilation, "plan", None)
    model = getattr(model_or_compilation, "model", model_or_compilation)
    hal = model.to_hal()
    names = tensor_names(hal, input_names, output_names)
    if plan is None:
        return model_dot(hal, model.name, names=names)
    return model_dot(hal, model.name, plan.steps, plan.crossing, names=names)


def tensor_names(hal, input_names=(), output_names=()) -> dict:
    """``{operand index: name}`` of the model's inputs and outputs, named in order.

    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> tensor_names(tiny_add().to_hal(), ["a", "b"], ["sum"])
    {0: 'a', 1: 'b', 3: 'sum'}
    """
    pairs = list(zip(hal.main.input_indexes, input_names or ())) + \
        list(zip(hal.main.output_indexes, output_names or ()))
    return {int(index): str(name) for index, name in pairs if name}


def graph_dump(model_or_compilation, file=None, input_names=(), output_names=()) -> str:
    """Write the Graphviz dot of a model or compilation and return it.

    Args:
        model_or_compilation: A finished Model, or a Compilation (clusters per plan step).
        file: A path or a text file object. None writes into the ``NN_GRAPHDUMP`` directory
            when it is set, else to VLOG (tags ``compilation``/``model``, log tag GraphDump).
        input_names: The model's input tensor names, in input order (a .tflite's, as
            ``load_tflite`` returns them); shown in the tensors' labels.
        output_names: The same for the outputs.

    Raises:
        NnError: BAD_STATE for a model that is not finished.
    """
    text = to_dot(model_or_compilation, input_names, output_names)
    if file is not None:
        if hasattr(file, "write"):
            file.write(text)
        else:
            Path(file).write_text(text)
    elif _DUMP_DIR:
        _write_into(_DUMP_DIR, model_or_compilation, text)
    else:
        tag = "compilation" if hasattr(model_or_compilation, "plan") else "model"
        vlog.log(tag, "GraphDump", "%s", text)
    return text


def dot_program() -> str | None:
    """The path of Graphviz's ``dot`` on PATH, or None."""
    return shutil.which("dot")


def render_svg(model_or_compilation, path, input_names=(), output_names=()) -> None:
    """Render the graph of a model or compilation to an SVG file with Graphviz's ``dot``
    (tensor names as :func:`to_dot` takes them).

    Raises:
        FileNotFoundError: ``dot`` is not on PATH (the message says to install Graphviz).
        OSError: ``dot`` failed (its first error line) or ``path`` cannot be written.
    """
    write_svg(to_dot(model_or_compilation, input_names, output_names), path)


def write_svg(dot_text: str, path) -> None:
    """Render dot text to an SVG file with Graphviz's ``dot`` (errors as :func:`render_svg`;
    ``runtime.delegate.graph`` renders the delegated TFLite graph with it)."""
    program = dot_program()
    if program is None:
        raise FileNotFoundError(MISSING_DOT)
    done = subprocess.run([program, "-Tsvg", "-o", str(path)], input=dot_text,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise OSError(f"dot -Tsvg {path}: {first}")


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
