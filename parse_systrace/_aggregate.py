"""Aggregation over threads: totals and self-times per layer and phase (section 6).

:func:`aggregate` takes the run's threads (objects with ``stat(layer, phase, app)``,
``execution_count(app)`` and ``begins(app, function)``) in tracking order and returns
``(times, self_times, has_warmup_and_benchmark, execution_counts)`` shaped like the
established tool's JSON: ``times[phase][layer]``, plus ``times["PWU"|"PBM"][phase][layer]``
for Execution and its subphases when both warmup and benchmark have executions. Missing
values are ``math.nan``.

Example:
    >>> class Idle:
    ...     def stat(self, layer, phase, app): return 2.0 if (layer, phase) == ("LR", "PC") else 0.0
    ...     def execution_count(self, app): return 0
    ...     def begins(self, app, function): return []
    >>> times, self_times, both, counts = aggregate([Idle()], driver_pairs=lambda app: [])
    >>> times["PC"]["LR"], times["PO"]["LR"], times["PC"]["LT"], both
    (2.0, 2.0, 2.0, False)
"""
from __future__ import annotations

import math

LAYERS = ("LA", "LR", "LI", "LD", "LC")
PHASES = ("PI", "PP", "PC", "PE", "PT")
PE_SUBPHASES = ("PIO", "PTR", "PCO", "PR")
APP_PHASES = ("PO", "PWU", "PBM")
LT = "LT"
NAN = math.nan


def phase_and_subphases(phase: str) -> tuple:
    """PO -> (PO,), PE -> (PE, PIO, PTR, PCO, PR), other main phases -> (phase,)."""
    return (phase,) + PE_SUBPHASES if phase == "PE" else (phase,)


ALL_PHASES = tuple(p for p0 in ("PO",) + PHASES for p in phase_and_subphases(p0))
EXEC_PHASES = phase_and_subphases("PE")


def zero_to_nan_if_missing(value: float, phase: str, layer: str) -> float:
    """Zero means "missing" for the Application layer and Driver's Execution subphases."""
    if value == 0.0 and (layer == "LA" or (layer == "LD" and phase in PE_SUBPHASES)):
        return NAN
    return value


def nan_to_zero(value: float) -> float:
    return 0.0 if math.isnan(value) else value


def execution_counts(threads) -> dict:
    """Executions per application phase: the maximum over threads."""
    return {app: max([0] + [t.execution_count(app) for t in threads]) for app in APP_PHASES}


def aggregate(threads, driver_pairs) -> tuple:
    """Return ``(times, self_times, both, counts)``; ``driver_pairs(app)`` -> [(begin, end)]."""
    counts = execution_counts(threads)
    has_warmup, has_benchmark = bool(counts["PWU"]), bool(counts["PBM"])
    both = has_warmup and has_benchmark
    apps = APP_PHASES if (has_warmup or has_benchmark) else ("PO",)
    times = {phase: {} for phase in ALL_PHASES}
    if both:
        for app in ("PWU", "PBM"):
            times[app] = {phase: {} for phase in EXEC_PHASES}
    for layer in LAYERS:
        for phase in ALL_PHASES:
            _gather(times, threads, driver_pairs, apps, layer, phase, both)
        if not times["PO"][layer]:
            times["PO"][layer] = sum(nan_to_zero(times[phase][layer]) for phase in PHASES)
    for phase in ALL_PHASES:
        times[phase][LT] = _max_ignoring_nans(times[phase].values())
    if both:
        for app in ("PWU", "PBM"):
            for phase in EXEC_PHASES:
                times[app][phase][LT] = _max_ignoring_nans(times[app][phase].values())
    return times, self_times_of(times, both), both, counts


def _gather(times, threads, driver_pairs, apps, layer, phase, both) -> None:
    total = 0.0
    for app in apps:
        part = 0.0
        if layer == "LD" and phase == "PE":
            for begin, end in driver_pairs(app):
                part += end - begin
        else:
            for thread in threads:
                part += thread.stat(layer, phase, app)
        if both and app != "PO" and phase in EXEC_PHASES:
            times[app][phase][layer] = zero_to_nan_if_missing(part, phase, layer)
        total += part
    times[phase][layer] = zero_to_nan_if_missing(total, phase, layer)


def _max_ignoring_nans(values) -> float:
    return max(map(nan_to_zero, values))


def self_times_of(times: dict, both: bool) -> dict:
    """Self-times: each layer's total less the total of the nearest layer below it."""
    self_times = {phase: {LT: times[phase][LT]} for phase in ALL_PHASES}
    no_driver_execution = times["PE"]["LD"] == 0.0
    for phase in ALL_PHASES:
        _self_column(times[phase], self_times[phase],
                     phase == "PO" and no_driver_execution)
    if both:
        for app in ("PWU", "PBM"):
            self_times[app] = {}
            for phase in EXEC_PHASES:
                self_times[app][phase] = {LT: times[app][phase][LT]}
                _self_column(times[app][phase], self_times[app][phase], False)
    return self_times


def _self_column(totals: dict, out: dict, driver_only_init: bool) -> None:
    below = 0.0
    for layer in reversed(LAYERS):
        value = totals[layer]
        if math.isnan(value):
            out[layer] = NAN
        elif value == 0.0:
            out[layer] = 0.0
        elif driver_only_init and layer in ("LD", "LI"):
            out[layer] = value if layer == "LD" else value - totals["LD"]
        else:
            out[layer] = value - below
            below = value
