"""Latency distributions for the pages: summary figures, a CDF and a histogram.

Percentiles use numpy's default linear interpolation; the CDF is thinned to at most
:data:`CDF_POINTS` quantiles so that a page stays small whatever the sample count. The
distributions of one figure (:func:`distributions`) share their histogram bins, so that
their histograms can be compared side by side.

Example:
    >>> d = distribution([1.0, 2.0, 3.0, 4.0])
    >>> d["n"], d["median"], d["mean"], d["hist"]["counts"][:2]
    (4, 2.5, 2.5, [1, 1])
    >>> a, b = distributions({"a": [1.0, 2.0], "b": [3.0, 9.0]})
    >>> a["hist"]["edges"] == b["hist"]["edges"], a["hist"]["edges"][0], b["hist"]["edges"][-1]
    (True, 1.0, 9.0)
"""
from __future__ import annotations

import numpy as np

CDF_POINTS = 200
HIST_BINS = 40


def distribution(samples, edges=None) -> dict:
    """``n``, ``min``, ``median``, ``p90``, ``p99``, ``mean``, ``std``, ``max`` (ms), plus
    ``cdf`` ``[[ms, fraction], ...]`` and ``hist`` ``{"edges": [...], "counts": [...]}``,
    over the given bin ``edges`` (by default, its own: up to :data:`HIST_BINS` bins)."""
    values = np.sort(np.asarray([float(v) for v in samples], dtype=np.float64))
    if not len(values):
        return dict(n=0, cdf=[], hist=dict(edges=[], counts=[]))
    fractions = np.arange(1, len(values) + 1) / len(values)
    pick = np.unique(np.linspace(0, len(values) - 1, min(len(values), CDF_POINTS)).astype(int))
    counts, edges = np.histogram(values, bins=min(HIST_BINS, max(len(values), 1))
                                 if edges is None else np.asarray(edges, dtype=np.float64))
    return dict(n=int(len(values)), min=float(values[0]), max=float(values[-1]),
                median=float(np.percentile(values, 50)), p90=float(np.percentile(values, 90)),
                p99=float(np.percentile(values, 99)), mean=float(values.mean()),
                std=float(values.std()),
                cdf=[[float(values[i]), float(fractions[i])] for i in pick],
                hist=dict(edges=[float(e) for e in edges], counts=[int(c) for c in counts]))


def shared_edges(groups):
    """Bin edges for every sample list of ``groups``: up to :data:`HIST_BINS` equal bins
    from the smallest sample of all to the largest (None without samples)."""
    values = [float(v) for samples in groups for v in samples]
    if not values:
        return None
    low, high = min(values), max(values)
    if high <= low:
        high = low + max(abs(low) * 1e-3, 1e-6)
    bins = min(HIST_BINS, max(max(len(samples) for samples in groups), 1))
    return np.linspace(low, high, bins + 1)


def distributions(series: dict) -> list:
    """``[{"label": ..., **distribution(samples)}, ...]`` for ``{label: samples}``, all
    with the same histogram bins (:func:`shared_edges`)."""
    groups = [list(samples) for samples in series.values()]
    edges = shared_edges(groups)
    return [dict(label=label, **distribution(samples, edges))
            for label, samples in zip(series, groups)]
