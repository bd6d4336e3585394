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

from collections import namedtuple

TYPE_CHECKING = False  # typing is not imported at run time (start-up)
if TYPE_CHECKING:
    from typing import Optional


class ThreadDetail(namedtuple("ThreadDetail", "tid tgid is_driver stats tree")):
    """One thread's buckets and transformed call tree, for ``--print-detail``: ``tid``,
    ``tgid`` (int), ``is_driver`` (bool), ``stats`` (dict), ``tree`` (list)."""

    __slots__ = ()


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

    A plain class, not a dataclass: importing ``dataclasses`` (and with it ``inspect``) took
    8 ms of every ``parse_systrace`` start.
    """

    def __init__(self, starting_mark: str = "", complete: bool = True,
                 times: Optional[dict] = None, self_times: Optional[dict] = None,
                 execution_counts: Optional[dict] = None, has_warmup_and_benchmark: bool = False,
                 process: Optional[int] = None, details: Optional[list] = None) -> None:
        self.starting_mark, self.complete = starting_mark, complete
        self.times = {} if times is None else times
        self.self_times = {} if self_times is None else self_times
        self.execution_counts = {} if execution_counts is None else execution_counts
        self.has_warmup_and_benchmark, self.process = has_warmup_and_benchmark, process
        self.details = [] if details is None else details

    def __eq__(self, other) -> bool:
        return type(other) is RunSummary and vars(self) == vars(other)

    def __repr__(self) -> str:
        return "RunSummary(%s)" % ", ".join(f"{name}={value!r}" for name, value in vars(self).items())
