"""Records (lists of dicts) as a text table, JSON or CSV: the fleet commands' three outputs.

Text rounds numbers to 3 decimals and shows None as ``n/a``; JSON keeps every digit
(``NaN`` as ``null``); CSV writes None as an empty cell.

Example:
    >>> print(render([{"device": "pixel6", "median": 1.23456, "p90": None}], "text"), end="")
    device      median  p90
    --------  --------  -----
    pixel6       1.235  n/a
    >>> render([{"a": 1}], "json")
    '[\\n {\\n  "a": 1\\n }\\n]\\n'
"""
from __future__ import annotations

import csv
import io
import json
import math

FORMATS = ("text", "json", "csv")


def _clean(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def render(records: list, fmt: str = "text", columns=None) -> str:
    """``records`` in format ``fmt`` (``text``, ``json`` or ``csv``); ``columns`` picks and
    orders the columns (default: the first record's keys)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; valid: {', '.join(FORMATS)}")
    columns = list(columns or (records[0].keys() if records else ()))
    rows = [[_clean(record.get(name)) for name in columns] for record in records]
    if fmt == "json":
        return json.dumps([dict(zip(columns, row)) for row in rows], indent=1) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(["" if value is None else value for value in row] for row in rows)
        return out.getvalue()
    from tabulate import tabulate

    if not rows:
        return "(no rows)\n"
    return tabulate(rows, headers=columns, floatfmt=".3f", missingval="n/a") + "\n"
