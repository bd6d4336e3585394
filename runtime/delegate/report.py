"""The delegation report: one row per operator, where it ran or why it stayed on the CPU.

:func:`report` turns a :class:`~runtime.delegate.delegation.Delegation`, the devices of each
step and (optionally) measured step times into plain data (JSON-ready); :func:`render` writes
it as a table ending in the summary line ``N of M operators delegated, in K partitions, X % of
the time in NNAPI``. A CPU operator's time is its own (its LiteRT invoke); a partition's time
is shown on the partition's line (NNAPI runs it as one model).

Example:
    >>> from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph
    >>> from nnscope.runtime.delegate.delegation import decide
    >>> g = FlatbufferGraph()
    >>> x, y, z = (g.tensor(n, (1, 4), "FLOAT32") for n in "xyz")
    >>> g.operator("RELU", [x], [y]); g.operator("GELU", [y], [z]); g.inputs, g.outputs = [x], [z]
    >>> data = report(decide(g.serialize()), [["sample-all"], []], [[3_000_000, 1_000_000]])
    >>> print(render(data))  # doctest: +NORMALIZE_WHITESPACE
    index  operator  where                            time ms
    0      RELU      partition 0 (sample-all)
    1      GELU      CPU: unsupported operator: GELU has no NNAPI form  1.000
    partition 0: 1 operators on sample-all, 3.000 ms
    1 of 2 operators delegated, in 1 partition, 75.0 % of the time in NNAPI
"""
from __future__ import annotations

import statistics
from typing import Sequence

from nnscope.runtime.delegate.delegation import Delegation, Partition


def report(delegation: Delegation, step_devices: Sequence[Sequence[str]],
           times: Sequence[Sequence[int]] = ()) -> dict:
    """The report as plain data. ``times``: per execution, each step's nanoseconds."""
    medians = [statistics.median(column) / 1e6 for column in zip(*times)] if times else []
    steps = list(delegation.steps)
    rows = [_row(delegation, steps, step_devices, medians, v) for v in delegation.verdicts]
    partitions = [{"partition": s.number, "operators": len(s.operators) + len(s.folded),
                   "devices": list(step_devices[i]), "median_ms": medians[i] if medians else None}
                  for i, s in enumerate(steps) if isinstance(s, Partition)]
    nnapi = sum(medians[i] for i, s in enumerate(steps) if isinstance(s, Partition)) if medians else None
    share = 100.0 * nnapi / sum(medians) if medians and sum(medians) else None
    return {"feature_level": delegation.feature_level, "max_partitions": delegation.max_partitions,
            "operators": rows, "partitions": partitions,
            "delegated": len(delegation.delegated()), "total": len(delegation.verdicts),
            "executions": len(times), "nnapi_share_percent": share,
            "summary": _summary(delegation, share)}


def _row(delegation: Delegation, steps, step_devices, medians, verdict) -> dict:
    step = delegation.step_of(verdict.index)
    position = steps.index(step) if step is not None else None
    row = {"index": verdict.index, "operator": verdict.operator, "note": verdict.note,
           "partition": None, "devices": [], "category": None, "reason": "", "time_ms": None}
    if isinstance(step, Partition):
        row.update(partition=step.number, devices=list(step_devices[position]))
    else:
        if verdict.failures:
            row.update(category=verdict.category.name, reason=verdict.reason)
        else:
            row.update(reason="constant-only: folded into the CPU operator it feeds")
        if medians and position is not None and verdict.index in step.operators:
            row["time_ms"] = medians[position]
    return row


def _summary(delegation: Delegation, share: float | None) -> str:
    text = delegation.summary()
    return text + (f", {share:.1f} % of the time in NNAPI" if share is not None else "")


def render(data: dict) -> str:
    """The report as a text table and the summary line."""
    lines = [("index", "operator", "where", "time ms")]
    for row in data["operators"]:
        if row["partition"] is not None:
            where = f"partition {row['partition']} ({', '.join(row['devices']) or 'NNAPI'})"
        else:
            where = f"CPU: {row['reason']}"
        if row["note"]:
            where += f" [{row['note']}]"
        time = "" if row["time_ms"] is None else f"{row['time_ms']:.3f}"
        lines.append((str(row["index"]), row["operator"], where, time))
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    out = [f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}".rstrip()
           for a, b, c, d in lines]
    for p in data["partitions"]:
        time = "" if p["median_ms"] is None else f", {p['median_ms']:.3f} ms"
        out.append(f"partition {p['partition']}: {p['operators']} operators on "
                   f"{', '.join(p['devices']) or 'NNAPI'}{time}")
    out.append(data["summary"])
    return "\n".join(out)
