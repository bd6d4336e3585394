"""The NNAPI timing summary per group: count, median, p90 and spread of every phase and layer.

A *group* is a value of the chosen keys (``--by``: any group key of the dataset, or
``model``, ``driver``, ``format``; default: the dataset's keys, or ``model`` when it has
none). For each group, phase and layer, the sample is one value per complete run: its
self-time (``parse_systrace``'s default table), or its total time with ``total_times``, taken
from the whole run (``app_phase = ''``), exactly as ``parse_systrace --json`` gives it in
``self_times`` / ``times`` (n/a values are left out of the sample). The figures:

- ``count``: runs with a value; ``median``, ``p90``: quantiles with linear interpolation
  (DuckDB's ``quantile_cont``, numpy's default method);
- ``spread``: the interquartile range, p75 - p25 (ms), with ``min``, ``p10``, ``p25``,
  ``p75`` and ``max`` for the distribution plots of the fleet page.

Example:
    >>> group_columns(["device", "build"], None)
    ['device', 'build']
    >>> group_columns([], None)
    ['model']
"""
from __future__ import annotations

from typing import Optional

from nnscope.parse_systrace.fleet.dataset import connect, read_meta

#: Phase and layer order of the tables (that of parse_systrace's JSON ``times``).
PHASE_ORDER = ("PI", "PP", "PC", "PE", "PIO", "PTR", "PCO", "PR", "PT", "PO")
LAYER_ORDER = ("LA", "LR", "LI", "LD", "LC", "LT")
#: Columns of a summary record after the group keys.
FIGURES = ("phase", "layer", "count", "median", "p90", "spread", "min", "p10", "p25", "p75", "max")
_RUN_COLUMNS = ("model",)
_TRACE_COLUMNS = ("driver", "format")


def group_columns(keys: list[str], by: Optional[list[str]]) -> list[str]:
    """The columns to group by: ``by``, else the dataset's ``keys``, else ``model``."""
    return list(by) if by else (list(keys) or ["model"])


def column_sql(name: str, keys: list[str]) -> str:
    """The SQL of a group column (``t`` = traces, ``r`` = runs); an unknown one raises
    ``ValueError`` listing the valid ones."""
    if name in keys or name in _TRACE_COLUMNS:
        return f't."{name}"'
    if name in _RUN_COLUMNS:
        return f'r."{name}"'
    valid = ", ".join([*keys, *_RUN_COLUMNS, *_TRACE_COLUMNS])
    raise ValueError(f"unknown group column {name!r}; valid: {valid}")


def where_sql(where: dict, keys: list[str]) -> tuple[str, list]:
    """(SQL condition, parameters) selecting runs whose columns have the given values."""
    parts, values = [], []
    for name, value in where.items():
        parts.append(f"{column_sql(name, keys)} = ?")
        values.append(value)
    return " AND ".join(parts) or "TRUE", values


def samples_sql(columns: list[str], keys: list[str], total_times: bool, condition: str) -> str:
    """SQL of the per-run values: group columns, ``phase``, ``layer``, ``v``."""
    value = "p.time_ms" if total_times else "p.self_ms"
    selected = ", ".join(f'{column_sql(name, keys)} AS "{name}"' for name in columns)
    return (f"SELECT {selected}{', ' if selected else ''}p.phase, p.layer, {value} AS v "
            "FROM phases p JOIN runs r ON p.trace_id = r.trace_id AND p.run = r.run "
            f"JOIN traces t ON t.trace_id = p.trace_id WHERE p.app_phase = '' AND {condition}")


def summarize_groups(dataset, by: Optional[list[str]] = None, *, total_times: bool = False,
                     where: Optional[dict] = None) -> list[dict]:
    """One record per group, phase and layer (group keys, then :data:`FIGURES`), for the cells
    where some run has a value; sorted by group, then phase and layer in report order."""
    keys = read_meta(dataset)["keys"]
    columns = group_columns(keys, by)
    condition, values = where_sql(where or {}, keys)
    quoted = ", ".join(f'"{name}"' for name in columns)
    sql = (f"WITH s AS ({samples_sql(columns, keys, total_times, condition)}) "
           f"SELECT {quoted}{', ' if quoted else ''}phase, layer, count(v), "
           "quantile_cont(v, 0.5), quantile_cont(v, 0.9), "
           "quantile_cont(v, 0.75) - quantile_cont(v, 0.25), min(v), quantile_cont(v, 0.1), "
           "quantile_cont(v, 0.25), quantile_cont(v, 0.75), max(v) "
           f"FROM s GROUP BY ALL HAVING count(v) > 0")
    con = connect(dataset)
    try:
        rows = con.execute(sql, values).fetchall()
    finally:
        con.close()
    records = [dict(zip([*columns, *FIGURES], row)) for row in rows]
    records.sort(key=lambda record: (tuple(str(record[name]) for name in columns),
                                     _order(PHASE_ORDER, record["phase"]),
                                     _order(LAYER_ORDER, record["layer"])))
    return records


def _order(order: tuple, value: str) -> int:
    return order.index(value) if value in order else len(order)


def shown(records: list[dict]) -> list[dict]:
    """The records worth a line of text: not those whose runs all have 0 there."""
    return [record for record in records if record["min"] != 0 or record["max"] != 0]
