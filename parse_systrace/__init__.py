"""parse_systrace: the NNAPI timing summary of a systrace, compatible with the AOSP tool.

Reads a trace (systrace HTML, ftrace text; other formats through
:mod:`parse_systrace.readers`), builds each tracked thread's call tree per run
(``[NN_LA_PO]`` marks start runs) and reports the time per layer (Application, Runtime,
IPC, Driver, CPU) and phase (Initialization ... Termination) as the established tool does.

Example:
    >>> import json, os, tempfile
    >>> import numpy as np
    >>> from nnscope import parse_systrace, tracing
    >>> from nnscope.runtime import Compilation, Execution, get_device
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> x, y = np.ones((1, 4), np.float32), np.empty((1, 4), np.float32)
    >>> with tracing.TraceSession() as session:  # a traced run to parse
    ...     with tracing.application(tracing.Phase.OVERALL, "tiny_add"):
    ...         compilation = Compilation.for_devices(tiny_add(), [get_device("nnapi-reference")])
    ...         compilation.finish()
    ...         execution = Execution(compilation)
    ...         execution.set_input(0, x); execution.set_input(1, x); execution.set_output(0, y)
    ...         execution.compute(); execution.free(); compilation.free()
    >>> tmp = tempfile.TemporaryDirectory()  # not the current directory
    >>> trace = os.path.join(tmp.name, "trace.html"); session.export(trace)
    <ExportResult.SUCCESS: 0>
    >>> runs = parse_systrace.summarize(trace)
    >>> print(parse_systrace.render_text(runs[0]), end="")
    B|...|[NN_LA_PO]tiny_add
    ...NNAPI timing summary (self-times, ms wall-clock)...
    Runtime ...
    CPU ...
    Total ...
    >>> json.loads(parse_systrace.render_json(runs))[0]["execution_counts"]
    {'PBM': 0, 'PO': 1, 'PWU': 0}
    >>> tmp.cleanup()
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.render import render_json, render_text
from nnscope.parse_systrace.summary import RunSummary, ThreadDetail

__all__ = ["summarize", "iter_summaries", "render_text", "render_json", "RunSummary",
           "ThreadDetail", "TraceFormatError"]


def iter_summaries(path_or_fileobj, *, tolerant: bool = False, per_process: bool = False,
                   detail: bool = False, warn: Callable[[str], None] = lambda text: None,
                   format: str = None) -> Iterator[RunSummary]:
    """Yield each run's :class:`RunSummary` (as soon as the run ends with ``detail``;
    else, for systrace/ftrace input, once the whole trace has been read: see
    :func:`parse_systrace._engine.iter_runs`).

    Args:
        path_or_fileobj: a path or a seekable binary file object.
        tolerant: drop orphan rows (E without B, unmatched driver begins/ends) instead
            of raising :class:`TraceFormatError`.
        per_process: one summary per client process instead of one merged summary.
        detail: fill :attr:`RunSummary.details` (per-thread buckets and trees).
        warn: receives the established tool's stderr texts and our notes.
        format: a registered reader name; detected from the content when None.
    """
    from nnscope.parse_systrace import _parallel
    from nnscope.parse_systrace._engine import iter_runs
    from nnscope.parse_systrace.readers import open_rows

    source = open_rows(path_or_fileobj, format)
    unchecked = (partial(source.tracking_rows, checked=False),
                 partial(source.raw_batches, checked=False)) if source.unchecked else None
    split = _parallel.plan(source) if unchecked is not None and not detail else None
    return iter_runs(source.batches, tolerant=tolerant, per_process=per_process,
                     detail=detail, warn=warn, tracking=source.tracking_rows,
                     raw=source.raw_batches, unchecked=unchecked, split=split)


def summarize(path_or_fileobj, **options) -> list:
    """Every run's :class:`RunSummary` (see :func:`iter_summaries` for the options)."""
    return list(iter_summaries(path_or_fileobj, **options))
