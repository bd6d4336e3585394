"""Compare two fleets: per group, phase and layer, the medians, the relative change with a
confidence interval, and a verdict (faster, slower or within noise).

A *side* is a dataset folder, a dataset folder with a selection (``lab.fleet:build=b100``:
its runs whose columns have those values) or one trace file (parsed here, in this process,
by :func:`.task.parse_trace`). Two selections of one dataset compare two groups (build
against build); two datasets compare like groups; two traces compare their runs. The groups
are the values of ``by`` (default: the keys both datasets have, less those a selection fixes;
none when a side is a trace file). The sample of a cell is one value per run, as in
:mod:`.groups` (self-times, or total times).

The statistics, seeded so a comparison is repeatable:

- change = median(B) / median(A) - 1 (positive: B takes longer);
- interval: a bootstrap (``resamples`` resamples of the runs of each side with replacement,
  numpy's ``default_rng(seed)``, cells in sorted order) gives the standard error of
  log(median B / median A); the interval is that log ratio +- z times it, z for a
  two-sided level of ``1 - alpha / m`` where ``m`` is the number of cells tested
  (Bonferroni: with ``alpha`` 0.05, all intervals hold together with 95 % confidence, so the
  hundreds of cells of a fleet do not yield chance findings);
- p_value: a Mann-Whitney rank test of the two samples (two-sided, normal approximation with
  the tie and continuity corrections), which does not lean on the bootstrap's standard error
  (rough for a median of a dozen runs);
- verdict: ``slower`` when the interval is above 0 and the rank test agrees at the same level
  (``p < alpha / m``), ``faster`` when below and it agrees, ``within noise`` otherwise;
  ``n/a`` when a side has fewer than 2 runs there or a median is not positive.

Example:
    >>> parse_side("lab.fleet:build=b101,device=pixel6")
    ('lab.fleet', {'build': 'b101', 'device': 'pixel6'})
    >>> parse_side("traces/a.html")
    ('traces/a.html', {})
    >>> import numpy as np
    >>> cells = {(("pixel6",), "PE", "LD"): (np.array([10.0, 10.2, 9.9, 10.1] * 5),
    ...                                      np.array([12.0, 12.3, 11.9, 12.2] * 5))}
    >>> record = compare_samples(cells, ["device"])[0][0]
    >>> record["verdict"], round(record["change_pct"], 1)
    ('slower', 20.4)
"""
from __future__ import annotations

import math
import os
from statistics import NormalDist
from typing import Optional

import numpy as np

from nnscope.parse_systrace.fleet.dataset import connect, is_dataset, read_meta
from nnscope.parse_systrace.fleet.groups import (LAYER_ORDER, PHASE_ORDER, samples_sql,
                                                 where_sql)

RESAMPLES = 2000
ALPHA = 0.05
SLOWER, FASTER, NOISE, NOT_TESTED = "slower", "faster", "within noise", "n/a"


def parse_side(spec: str) -> tuple[str, dict]:
    """``PATH`` or ``PATH:KEY=VALUE,...`` -> (path, selection)."""
    path, colon, selection = spec.rpartition(":")
    if not colon or "=" not in selection or not path:
        return spec, {}
    pairs = [item.partition("=") for item in selection.split(",")]
    if any(not name or not sep for name, sep, _ in pairs):
        raise ValueError(f"bad selection {selection!r}: expected KEY=VALUE,...")
    return path, {name: value for name, _, value in pairs}


def side_samples(spec: str, by: list[str], total_times: bool) -> dict:
    """(group values, phase, layer) -> numpy array of the side's run values."""
    path, selection = parse_side(spec)
    if not is_dataset(path):
        if selection or not os.path.isfile(path):
            raise ValueError(f"{path}: not a fleet dataset (no fleet.json) nor a trace file")
        return _trace_samples(path, total_times)
    keys = read_meta(path)["keys"]
    condition, values = where_sql(selection, keys)
    quoted = ", ".join(f'"{name}"' for name in by)
    sql = (f"WITH s AS ({samples_sql(by, keys, total_times, condition)}) "
           f"SELECT {quoted}{', ' if quoted else ''}phase, layer, list(v) FROM s "
           "WHERE v IS NOT NULL GROUP BY ALL")
    con = connect(path)
    try:
        rows = con.execute(sql, values).fetchall()
    finally:
        con.close()
    return {(tuple(row[:len(by)]), row[-3], row[-2]): np.asarray(row[-1], dtype=float)
            for row in rows}


def _trace_samples(path: str, total_times: bool) -> dict:
    from nnscope.parse_systrace.fleet.task import parse_trace

    result = parse_trace(path)
    if result["error"]:
        raise ValueError(f"{path}: {result['error']}")
    phases, cells = result["phases"], {}
    value = phases["time_ms" if total_times else "self_ms"]
    for i, app_phase in enumerate(phases["app_phase"]):
        if app_phase == "" and value[i] is not None:
            cells.setdefault(((), phases["phase"][i], phases["layer"][i]), []).append(value[i])
    return {cell: np.asarray(values) for cell, values in cells.items()}


def default_by(a: str, b: str) -> list[str]:
    """The keys both sides' datasets have, less those a selection fixes (none for a trace)."""
    (path_a, sel_a), (path_b, sel_b) = parse_side(a), parse_side(b)
    if not (is_dataset(path_a) and is_dataset(path_b)):
        return []
    keys_b = read_meta(path_b)["keys"]
    return [key for key in read_meta(path_a)["keys"]
            if key in keys_b and key not in sel_a and key not in sel_b]


def compare(a: str, b: str, by: Optional[list[str]] = None, *, total_times: bool = False,
            seed: int = 0, resamples: int = RESAMPLES, alpha: float = ALPHA) -> tuple[list, str]:
    """(records, method line): one record per group, phase and layer both sides have."""
    by = default_by(a, b) if by is None else list(by)
    if not (is_dataset(parse_side(a)[0]) and is_dataset(parse_side(b)[0])):
        by = []
    samples_a = side_samples(a, by, total_times)
    samples_b = side_samples(b, by, total_times)
    cells = {cell: (samples_a[cell], samples_b[cell]) for cell in samples_a if cell in samples_b}
    return compare_samples(cells, by, seed=seed, resamples=resamples, alpha=alpha)


def compare_samples(cells: dict, by: list[str], *, seed: int = 0, resamples: int = RESAMPLES,
                    alpha: float = ALPHA) -> tuple[list, str]:
    """(records, method line) of ``(group, phase, layer) -> (values A, values B)``."""
    order = sorted(cells, key=lambda cell: (tuple(map(str, cell[0])), _rank(PHASE_ORDER, cell[1]),
                                            _rank(LAYER_ORDER, cell[2])))
    order = [cell for cell in order if np.any(cells[cell][0]) or np.any(cells[cell][1])]
    tested = [cell for cell in order if _testable(*cells[cell])]
    z = NormalDist().inv_cdf(1 - alpha / (2 * max(1, len(tested))))
    rng = np.random.default_rng(seed)
    records = []
    for cell in order:
        a, b = cells[cell]
        median_a, median_b = float(np.median(a)), float(np.median(b))
        record = dict(zip(by, cell[0]), phase=cell[1], layer=cell[2], n_a=len(a), n_b=len(b),
                      median_a=median_a, median_b=median_b,
                      change_pct=(median_b / median_a - 1) * 100 if median_a > 0 else None,
                      ci_low_pct=None, ci_high_pct=None, p_value=None, verdict=NOT_TESTED)
        if cell in tested:
            low, high = _interval(rng, a, b, z, resamples)
            p_value = rank_test(a, b)
            agreed = p_value < alpha / len(tested)
            record.update(ci_low_pct=low * 100, ci_high_pct=high * 100, p_value=p_value,
                          verdict=SLOWER if low > 0 and agreed else
                          FASTER if high < 0 and agreed else NOISE)
        records.append(record)
    method = (f"bootstrap, {resamples} resamples per side, seed {seed}: normal interval on the "
              f"log ratio of medians, Bonferroni over {len(tested)} cells "
              f"(family-wise {1 - alpha:.0%}, z = {z:.2f}); verdicts also need a Mann-Whitney "
              f"p < {alpha / max(1, len(tested)):.2g}")
    return records, method


def _testable(a: np.ndarray, b: np.ndarray) -> bool:
    return len(a) >= 2 and len(b) >= 2 and np.median(a) > 0 and np.median(b) > 0


def _interval(rng, a: np.ndarray, b: np.ndarray, z: float, resamples: int) -> tuple[float, float]:
    boot_a = np.median(a[rng.integers(0, len(a), (resamples, len(a)))], axis=1)
    boot_b = np.median(b[rng.integers(0, len(b), (resamples, len(b)))], axis=1)
    keep = (boot_a > 0) & (boot_b > 0)
    ratios = np.log(boot_b[keep]) - np.log(boot_a[keep])
    error = float(ratios.std(ddof=1)) if len(ratios) > 1 else math.inf
    estimate = math.log(np.median(b) / np.median(a))
    return math.expm1(estimate - z * error), math.expm1(estimate + z * error)


def rank_test(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation, tie and continuity
    corrections); 1.0 when every value ties.

    >>> round(rank_test(np.arange(10.0), np.arange(10.0) + 20), 6)
    0.000183
    """
    values = np.concatenate([a, b])
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]
    n_a, n_b, n = len(a), len(b), len(values)
    u = ranks[n_a:].sum() - n_b * (n_b + 1) / 2.0
    variance = n_a * n_b / 12.0 * ((n + 1) - float((counts ** 3 - counts).sum()) / (n * (n - 1)))
    if variance <= 0:
        return 1.0
    shift = abs(u - n_a * n_b / 2.0) - 0.5
    return min(1.0, 2.0 * (1.0 - NormalDist().cdf(max(0.0, shift) / math.sqrt(variance))))


def _rank(order: tuple, value: str) -> int:
    return order.index(value) if value in order else len(order)


def regressions(records: list, percent: float) -> list:
    """The records that are ``slower`` by more than ``percent``."""
    return [r for r in records if r["verdict"] == SLOWER and r["change_pct"] > percent]


def notable(records: list) -> list:
    """The records whose verdict is not ``within noise`` nor ``n/a``."""
    return [r for r in records if r["verdict"] in (SLOWER, FASTER)]
