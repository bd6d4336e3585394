"""The delegation report on a delegate-mode run's page: where each .tflite operator ran.

``nnscope run model.tflite --html FILE`` runs the model as the TFLite NNAPI delegate does and
hands its delegation report to the page as plain data: the dict of
``runtime.delegate.report.report`` (also the ``"delegation"`` key of ``nnscope run --json``),
written as a JSON file beside the trace and given as ``nnscope-dashboard TRACE --delegation
FILE.json`` (or ``delegation=`` of :func:`dashboards.write_report`). The dashboards read it as
data and never import the runtime. Keys read: ``summary``, ``operators`` (``index``,
``operator``, ``note``, ``partition``, ``devices``, ``category``, ``reason``, ``time_ms``),
``partitions`` (``partition``, ``operators``, ``devices``, ``median_ms``), ``executions``,
``feature_level`` and ``max_partitions``.

The page then opens with a **Delegation** section (:func:`delegation_section`): the summary
line, one row per partition (and the CPU's), the CPU operators counted by the category of why
they stayed there, and one row per operator (where it ran: its partition and devices, or ``CPU:
reason`` with the reason's category; a CPU operator's median time), folded when long.

Example:
    >>> data = {"summary": "1 of 2 operators delegated, in 1 partition", "executions": 3,
    ...         "feature_level": 30, "max_partitions": 3,
    ...         "operators": [{"index": 0, "operator": "RELU", "partition": 0,
    ...                        "devices": ["sample-all"], "time_ms": None},
    ...                       {"index": 1, "operator": "GELU", "partition": None,
    ...                        "category": "UNSUPPORTED_OPERATOR", "time_ms": 1.0,
    ...                        "reason": "unsupported operator: GELU has no NNAPI form"}],
    ...         "partitions": [{"partition": 0, "operators": 1, "devices": ["sample-all"],
    ...                         "median_ms": 3.0}]}
    >>> [operator_cells(row) for row in check_delegation(data)["operators"]]
    ... # doctest: +NORMALIZE_WHITESPACE
    [['0', 'RELU', 'partition 0 on sample-all', '', ''],
     ['1', 'GELU', 'CPU: unsupported operator: GELU has no NNAPI form', 'UNSUPPORTED_OPERATOR',
      '1.000']]
    >>> 'id="delegation-section"' in delegation_section(data)
    True
"""
from __future__ import annotations

import html
import json

#: Keys a delegation report must have, with their JSON types.
REQUIRED = {"summary": str, "operators": list, "partitions": list}
#: The profile's note on a delegate-mode page without per-operation kernel spans.
PROFILE_NOTE = ("Delegate mode: the per-operator times are in the Delegation section above. The "
                "CPU operators ran on LiteRT's kernels in the app process (timeline spans named by "
                "their operator, e.g. CONV_2D); each partition ran as one NNAPI model "
                "(TfLiteNnapiDelegate spans) on drivers that record no per-operation spans.")
#: The same note when the partitions' drivers recorded kernel spans (CPU-kernel devices).
KERNELS_NOTE = ("Delegate mode: these are the NNAPI kernels inside the partitions (step: the "
                "rank of the kernel's executor run in an execution, over the NNAPI steps of every "
                "partition; no graph operation, as each partition is its own NNAPI model). The CPU "
                "operators' times are in the Delegation section above.")
#: The graph section's note on a delegate-mode page.
GRAPH_NOTE = ("Delegate mode: each partition is compiled as its own NNAPI model, so there is no "
              "single partition graph; the Delegation section lists the operators of each "
              "partition and the CPU operators.")


class DelegationFormatError(ValueError):
    """A delegation report that is not the data ``nnscope run`` writes; names the problem."""


def check_delegation(data) -> dict:
    """``data`` when it has the keys the page reads; raises :class:`DelegationFormatError`."""
    if not isinstance(data, dict):
        raise DelegationFormatError("not a delegation report (a JSON object)")
    for key, kind in REQUIRED.items():
        if not isinstance(data.get(key), kind):
            raise DelegationFormatError(f"not a delegation report: no {kind.__name__} {key!r}")
    for row in data["operators"]:
        if not isinstance(row, dict) or "index" not in row or "operator" not in row:
            raise DelegationFormatError("not a delegation report: an operator without index")
    return data


def load_delegation(path) -> dict:
    """The checked delegation report in the JSON file at ``path``."""
    try:
        with open(path, encoding="utf-8") as handle:
            return check_delegation(json.load(handle))
    except OSError as error:
        raise DelegationFormatError(f"cannot read: {error.strerror or error}") from None
    except ValueError as error:
        if isinstance(error, DelegationFormatError):
            raise
        raise DelegationFormatError(f"not JSON: {error}") from None


def where(row: dict) -> str:
    """``partition 0 on sample-all`` or ``CPU: <reason>`` (as ``nnscope delegation`` says it)."""
    if row.get("partition") is not None:
        return f"partition {row['partition']} on {', '.join(row.get('devices') or []) or 'NNAPI'}"
    return f"CPU: {row.get('reason') or 'not delegated'}"


def _ms(value) -> str:
    return "" if value is None else f"{value:.3f}"


def operator_cells(row: dict) -> list:
    """The texts of an operator's row: index, operator (and note), where, category, time ms."""
    name = row["operator"] + (f" [{row['note']}]" if row.get("note") else "")
    return [str(row["index"]), name, where(row), row.get("category") or "", _ms(row.get("time_ms"))]


def partition_cells(partition: dict) -> list:
    """The texts of a partition's row: partition, operators, devices, median time ms."""
    return [f"partition {partition['partition']}", str(partition["operators"]),
            ", ".join(partition.get("devices") or []) or "NNAPI", _ms(partition.get("median_ms"))]


def cpu_cells(data: dict) -> list | None:
    """The CPU row of the partition table: operators left to LiteRT and their summed medians."""
    rows = [row for row in data["operators"] if row.get("partition") is None]
    if not rows:
        return None
    times = [row["time_ms"] for row in rows if row.get("time_ms") is not None]
    return ["CPU (LiteRT, in the app)", str(len(rows)), "the app process",
            _ms(sum(times)) if times else ""]


#: An operator table longer than this starts folded (the partition and reason tables stay open).
FOLD_OVER_ROWS = 30


def reason_rows(data: dict) -> list:
    """Why operators stayed on the CPU: per category, its operators and their summed medians
    (constant-only operators, which carry no category, count under ``CONSTANT_ONLY``)."""
    groups: dict = {}
    for row in data["operators"]:
        if row.get("partition") is None:
            group = groups.setdefault(row.get("category") or "CONSTANT_ONLY", [0, []])
            group[0] += 1
            group[1] += [row["time_ms"]] if row.get("time_ms") is not None else []
    return [[category, str(count), _ms(sum(times)) if times else ""]
            for category, (count, times) in sorted(groups.items(), key=lambda g: -g[1][0])]


def _folded_table(data: dict, rows: list) -> str:
    """The operator table in a ``<details>``, open when short."""
    total = len(data["operators"])
    on_cpu = sum(1 for row in data["operators"] if row.get("partition") is None)
    opened = " open" if total <= FOLD_OVER_ROWS else ""
    return (f'<details class="delegation-operators"{opened}><summary>Per operator: {total} '
            f'rows ({total - on_cpu} delegated, {on_cpu} on the CPU)</summary>'
            + _table("operators", ["index", "operator", "where", "category", "time ms"], rows)
            + "</details>")


def _table(kind: str, columns: list, rows: list) -> str:
    head = "".join(f'<th scope="col">{html.escape(c)}</th>' for c in columns)
    return (f'<div class="table-wrap"><table class="summary delegation {kind}"><thead><tr>{head}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _row(cells: list, attributes: str) -> str:
    return f"<tr {attributes}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def _context(data: dict) -> str:
    limit = data.get("max_partitions")
    facts = [f"feature level {data['feature_level']}" if data.get("feature_level") else "",
             (f"at most {limit} partitions" if limit and limit > 0 else "any number of partitions")
             if limit is not None else ""]
    count = data.get("executions") or 0
    facts.append(f"times: medians over {count} benchmark execution{'s' if count != 1 else ''}"
                 if count else "no benchmark executions, so no times")
    return " · ".join(fact for fact in facts if fact)


def delegation_section(data: dict) -> str:
    """The Delegation section: summary line, operator table, partition table."""
    operators = [_row(operator_cells(row), f'data-operator="{int(row["index"])}" data-where='
                                           f'"{"cpu" if row.get("partition") is None else "nnapi"}"')
                 for row in data["operators"]]
    partitions = [_row(partition_cells(p), f'data-partition="{int(p["partition"])}"')
                  for p in data["partitions"]]
    cpu = cpu_cells(data)
    partitions += [_row(cpu, 'data-partition="cpu" class="total"')] if cpu else []
    reasons = [_row(cells, f'data-category="{html.escape(cells[0])}"') for cells in reason_rows(data)]
    return ('<section class="view" id="delegation-section">\n<h2 class="view-title">Delegation</h2>\n'
            f'<p class="delegation-summary" id="delegation-summary"><b>{html.escape(data["summary"])}'
            f'</b></p>\n<p class="sub">{html.escape(_context(data))}. A CPU operator\'s time is its '
            f'LiteRT invoke; a delegated operator\'s is in its partition\'s (NNAPI runs the '
            f'partition as one model).</p>\n'
            + _table("partitions", ["partition", "operators", "devices", "median ms"], partitions)
            + (_table("reasons", ["why on the CPU", "operators", "time ms"], reasons)
               if reasons else "")
            + _folded_table(data, operators)
            + "\n</section>\n")
