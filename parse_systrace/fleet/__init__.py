"""parse_systrace fleet: the NNAPI timing summary of many traces, as one dataset, on Dask.

``parse_systrace fleet`` (also ``python -m nnscope.parse_systrace.fleet``) turns a device
lab's traces into a Parquet dataset (:mod:`.dataset`: tables ``traces``, ``runs``,
``phases``, ``errors``), prints the summary per group (:mod:`.groups`: count, median, p90
and spread of every phase and layer), runs SQL on it with DuckDB, and compares two datasets,
two groups or two traces (:mod:`.compare`).

Why ``parse_systrace fleet`` and not ``nnscope fleet``: a fleet is parse_systrace's own
summary taken over many traces, and it must give the same figures, so each trace is parsed by
:func:`parse_systrace.iter_summaries` itself (:mod:`.task`). The package map lets
``parse_systrace`` import only ``tracing.naming`` of ours, and this package keeps that rule
(its other imports are Dask, pyarrow and DuckDB, the optional ``fleet`` extra, imported on
first use). ``nnscope`` is the runtime's command: the runtime does not import
``parse_systrace``, so ``nnscope fleet`` would have added an upward edge for a thin
dispatch. ``dashboards`` reads the results (the summary and comparison JSON), as it reads
``parse_systrace --json``.

Commands (see ``parse_systrace fleet --help``)::

    parse_systrace fleet build DATASET INPUT... [--pattern '{device}/{build}/{model}/*']
                                                [--manifest CSV] [--scheduler tcp://HOST:PORT]
    parse_systrace fleet summary DATASET [--by KEY,...] [--json | --csv]
    parse_systrace fleet query DATASET "SQL"
    parse_systrace fleet compare A B [--fail-on-regression PCT]

Example:
    >>> from nnscope.parse_systrace import fleet
    >>> fleet.TABLES
    ('traces', 'runs', 'phases', 'errors')
"""
from __future__ import annotations

from nnscope.parse_systrace.fleet.builder import BuildReport, build
from nnscope.parse_systrace.fleet.dataset import TABLES, query
from nnscope.parse_systrace.fleet.task import parse_trace

__all__ = ["TABLES", "BuildReport", "build", "query", "parse_trace"]
