"""Renderers: the established tool's text tables and versioned JSON summary.

:func:`template_inputs` computes the table cells from a :class:`RunSummary` (section 7);
:func:`render_text` formats one run as text (starting mark line plus table) and
:func:`render_json` a list of runs as the JSON list the established tool prints.
Incomplete runs render as nothing.

Example:
    >>> from nnscope.parse_systrace.summary import RunSummary
    >>> render_text(RunSummary(complete=False))
    ''
    >>> render_json([])
    '[\\n]\\n'
"""
from __future__ import annotations

import json
import math

from nnscope.parse_systrace._aggregate import LAYERS, LT, PHASES
from nnscope.parse_systrace._templates import TEMPLATE_ALL_PHASES, TEMPLATE_EXECUTION_ONLY

PICKED = PHASES + ("PIO", "PR")
PER_EXECUTION_CELLS = ("PIO", "PEO", "PR", "PE")
NAN = math.nan


def chosen_times(run, total_times: bool, per_execution: bool) -> tuple:
    """``(times, self_times, the chosen one)``: the run's own dicts (read only), or deep
    copies when the chosen one is PBM-replaced (per execution of a warmup+benchmark run)."""
    times, self_times = run.times, run.self_times
    if not (run.has_warmup_and_benchmark and per_execution):
        return times, self_times, times if total_times else self_times
    import copy  # here, not at start-up: only this case copies

    times, self_times = copy.deepcopy(times), copy.deepcopy(self_times)
    use = times if total_times else self_times
    for phase in ("PE", "PIO", "PTR", "PCO", "PR"):
        for layer in LAYERS + (LT,):
            use[phase][layer] = use["PBM"][phase][layer]
    return times, self_times, use


def template_inputs(run, use: dict, per_execution: bool) -> dict:
    """The ``<layer>_<phase>`` cells of the tables (and JSON ``template_inputs``)."""
    values = {}
    for layer in LAYERS:
        for phase in PICKED:
            values[f"{layer}_{phase}"] = use[phase][layer]
    for phase in PICKED:
        values[f"LT_{phase}"] = use[phase][LT]
    for layer in LAYERS + (LT,):
        values[f"{layer}_PEO"] = (values[f"{layer}_PE"] - values[f"{layer}_PIO"]
                                  - values[f"{layer}_PR"])
        values[f"{layer}_PO"] = use["PO"][layer]
    total_pe = values["LT_PE"]
    for layer in LAYERS:
        values[f"{layer}_PEp"] = (values[f"{layer}_PE"] * 100.0 / total_pe
                                  if total_pe else NAN)
    if per_execution:
        counts = run.execution_counts
        divide_by = counts["PBM"] if run.has_warmup_and_benchmark else counts["PO"]
        for layer in LAYERS + (LT,):
            for phase in PER_EXECUTION_CELLS:
                key = f"{layer}_{phase}"
                values[key] = values[key] / divide_by if divide_by else NAN
    return values


def has_cpu(use: dict) -> bool:
    """Whether the CPU row is shown: some CPU cell is positive."""
    return any(use[phase]["LC"] > 0.0 for phase in PICKED)


def render_text(run, total_times: bool = False, per_execution: bool = False) -> str:
    """The starting-mark line and the table of one run ('' for an incomplete run)."""
    if not run.complete:
        return ""
    _, _, use = chosen_times(run, total_times, per_execution)
    template = TEMPLATE_EXECUTION_ONLY if per_execution else TEMPLATE_ALL_PHASES
    if total_times:
        template = template.replace("self-times", "total time")
    if run.has_warmup_and_benchmark and per_execution:
        template = template.replace("Execution", "Benchmark")
    template = template.replace(":fl", ":>11.2f").replace(":f", ":>9.2f")
    output = template.format(**template_inputs(run, use, per_execution))
    output = output.replace(" 0.00%", "     -").replace(" 0.00", "    -")
    output = output.replace(" nan", " n/a")
    cpu = has_cpu(use)
    lines = [run.starting_mark]
    lines += [line for line in output.splitlines() if cpu or line[0:3] != "CPU"]
    return "\n".join(lines) + "\n"


def json_object(run, total_times: bool = False, per_execution: bool = False) -> str:
    """One run as the established tool's JSON object text (NaN written as null)."""
    times, self_times, use = chosen_times(run, total_times, per_execution)
    output = dict(times=times, self_times=self_times, execution_counts=run.execution_counts,
                  template_inputs=template_inputs(run, use, per_execution), version=1,
                  starting_mark=run.starting_mark)
    return json.dumps(output, indent=2, sort_keys=True).replace("NaN", "null")


def render_json(runs, total_times: bool = False, per_execution: bool = False) -> str:
    """The complete runs as a JSON list: ``[``, objects separated by ``,`` lines, ``]``."""
    parts = ["["]
    for run in runs:
        if run.complete:
            if len(parts) > 1:
                parts.append(",")
            parts.append(json_object(run, total_times, per_execution))
    parts.append("]")
    return "\n".join(parts) + "\n"
