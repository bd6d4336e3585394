"""Per-run results as plain data.

:class:`RunSummary` is what :func:`parse_systrace.summarize` returns for each run (each
``[NN_LA_PO]`` mark starts one): the aggregated ``times`` and ``self_times``
(``phase -> layer -> ms``, NaN for missing), ``execution_counts`` and the starting mark.
An incomplete run (a thread still inside a scope when the run ended) has
``complete=False`` and no figures; renderers print nothing for it.

Example:
    >>> run = RunSummary(starting_mark="B|1|[NN_LA_PO]m", complete=False)
    >>> run.complete, run.times
    (False, {})
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ThreadDetail:
    """One thread's buckets and transformed call tree, for ``--print-detail``."""

    tid: int
    tgid: int
    is_driver: bool
    stats: dict
    tree: list


@dataclass
class RunSummary:
    """The NNAPI timing summary of one run.

    Attributes:
        starting_mark: the full ``B|<tgid>|[NN_LA_PO]...`` mark, or ``""`` before any.
        complete: False when a thread had unfinished scopes; then no figures are given.
        times / self_times: ``phase -> layer -> ms`` (plus ``PWU``/``PBM`` sub-dicts when
            both warmup and benchmark ran), as in the established tool's JSON.
        execution_counts: executions per application phase (``PO``, ``PWU``, ``PBM``).
        has_warmup_and_benchmark: whether warmup and benchmark are reported apart.
        process: the client process id with ``per_process``, else None.
        details: per-thread detail, filled when requested.
    """

    starting_mark: str = ""
    complete: bool = True
    times: dict = field(default_factory=dict)
    self_times: dict = field(default_factory=dict)
    execution_counts: dict = field(default_factory=dict)
    has_warmup_and_benchmark: bool = False
    process: Optional[int] = None
    details: list = field(default_factory=list)
