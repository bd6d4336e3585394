"""Latency distributions for the pages: summary figures, a CDF and a histogram.

Percentiles use numpy's default linear interpolation; the CDF is thinned to at most
:data:`CDF_POINTS` quantiles so that a page stays small whatever the sample count.

Example:
    >>> d = distribution([1.0, 2.0, 3.0, 4.0])
    >>> d["n"], d["median"], d["mean"], d["hist"]["counts"][:2]
    (4, 2.5, 2.5, [1, 1])
"""
from __future__ import annotations

import numpy as np

CDF_POINTS = 200
HIST_BINS = 30


def distribution(samples) -> dict:
    """``n``, ``min``, ``median``, ``p90``, ``p99``, ``mean``, ``std``, ``max`` (ms), plus
    ``cdf`` ``[[ms, fraction], ...]`` and ``hist`` ``{"edges": [...], "counts": [...]}``."""
    values = np.sort(np.asarray([float(v) for v in samples], dtype=np.float64))
    if not len(values):
        return dict(n=0, cdf=[], hist=dict(edges=[], counts=[]))
    fractions = np.arange(1, len(values) + 1) / len(values)
    pick = np.unique(np.linspace(0, len(values) - 1, min(len(values), CDF_POINTS)).astype(int))
    counts, edges = np.histogram(values, bins=min(HIST_BINS, max(len(values), 1)))
    return dict(n=int(len(values)), min=float(values[0]), max=float(values[-1]),
                median=float(np.percentile(values, 50)), p90=float(np.percentile(values, 90)),
                p99=float(np.percentile(values, 99)), mean=float(values.mean()),
                std=float(values.std()),
                cdf=[[float(values[i]), float(fractions[i])] for i in pick],
                hist=dict(edges=[float(e) for e in edges], counts=[int(c) for c in counts]))


def distributions(series: dict) -> list:
    """``[{"label": ..., **distribution(samples)}, ...]`` for ``{label: samples}``."""
    return [dict(label=label, **distribution(samples)) for label, samples in series.items()]
