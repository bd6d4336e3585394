"""Bench reports: the JSON ``nnscope bench --json`` writes, checked and laid out for a page.

The schema (``"schema": "nnscope-bench"``, ``"version": 1``) holds ``created``, ``host``,
``settings`` (executions, warmup, duration_s, burst), ``results`` (one per model x
device: status, error, compile_ms, latency_ms with the raw ``samples``, accuracy against
the reference, the device's share of the operations) and ``stress`` (case, model,
device, outcome SUCCESS/FAILURE/HANG/CRASH, seconds, detail). :func:`is_bench_file`
detects such a file by content, :func:`load_bench` reads and checks it (a
:class:`BenchFormatError` names the first problem), :func:`bench_view` gives the page
data: the result rows, one latency distribution set per model, stress rows and counts.

Example:
    >>> import json, os, tempfile
    >>> report = {"schema": "nnscope-bench", "version": 1, "settings": {}, "host": {}, "stress": [],
    ...           "results": [{"model": "tiny_add", "device": "nnapi-reference", "status": "ok",
    ...                        "latency_ms": {"samples": [0.07, 0.08, 0.07, 0.09, 0.07]}}]}
    >>> tmp = tempfile.TemporaryDirectory()  # a small report, as nnscope bench --json writes it
    >>> path = os.path.join(tmp.name, "bench.json")
    >>> with open(path, "w") as file:
    ...     json.dump(report, file)
    >>> is_bench_file(path)
    True
    >>> view = bench_view(load_bench(path))
    >>> view["models"][0]["distributions"][0]["label"]
    'nnapi-reference'
    >>> tmp.cleanup()
"""
from __future__ import annotations

import json
import math
import os

from nnscope.dashboards._stats import distributions

SCHEMA = "nnscope-bench"
VERSIONS = (1,)
STATUSES = ("ok", "unsupported", "error")
OUTCOMES = ("SUCCESS", "FAILURE", "HANG", "CRASH")
_SNIFF = 4096


class BenchFormatError(ValueError):
    """The file is not a bench report this version of the dashboard reads."""


def is_bench_file(path) -> bool:
    """Whether ``path`` starts like a bench report (a JSON object naming the schema)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and SCHEMA.encode() in head and b'"schema"' in head


def load_bench(path) -> dict:
    """The checked bench report at ``path``.

    Raises:
        BenchFormatError: unreadable JSON, another schema or version, or a malformed entry.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        raise BenchFormatError(f"cannot open: {error.strerror or error}") from None
    except ValueError as error:
        raise BenchFormatError(f"not valid JSON: {error}") from None
    check_bench(data)
    return data


def check_bench(data) -> None:
    """Raise :class:`BenchFormatError` on the first problem in a bench report."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise BenchFormatError(f'not a bench report ("schema" is not "{SCHEMA}")')
    if data.get("version") not in VERSIONS:
        raise BenchFormatError(f"unsupported bench report version {data.get('version')!r} "
                               f"(this dashboard reads {', '.join(map(str, VERSIONS))})")
    for key, kind in (("results", list), ("stress", list), ("settings", dict), ("host", dict)):
        if not isinstance(data.get(key, [] if kind is list else {}), kind):
            raise BenchFormatError(f'"{key}" must be a {kind.__name__}')
    for index, result in enumerate(data.get("results", [])):
        where = f"results[{index}]"
        if not isinstance(result, dict):
            raise BenchFormatError(f"{where} is not an object")
        for key in ("model", "device"):
            if not isinstance(result.get(key), str):
                raise BenchFormatError(f'{where}: "{key}" must be a string')
        if result.get("status") not in STATUSES:
            raise BenchFormatError(f'{where}: "status" must be one of {", ".join(STATUSES)}')
        samples = (result.get("latency_ms") or {}).get("samples", [])
        if not isinstance(samples, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                for v in samples):
            raise BenchFormatError(f'{where}: "latency_ms.samples" must be a list of finite '
                                   "numbers")
    for index, case in enumerate(data.get("stress", [])):
        if not isinstance(case, dict) or case.get("outcome") not in OUTCOMES:
            raise BenchFormatError(f'stress[{index}]: "outcome" must be one of '
                                   f'{", ".join(OUTCOMES)}')


def _figure(value):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def result_row(result: dict) -> dict:
    """One table row: latency figures, accuracy and the device's operation share."""
    latency = result.get("latency_ms") or {}
    accuracy = result.get("accuracy") or {}
    operations = result.get("operations") or {}
    return dict(model=result["model"], device=result["device"], status=result["status"],
                error=result.get("error"), compile_ms=_figure(result.get("compile_ms")),
                latency={key: _figure(latency.get(key))
                         for key in ("median", "p90", "p99", "mean", "std")},
                samples=len(latency.get("samples") or []),
                reference=accuracy.get("reference"),
                max_abs_error=_figure(accuracy.get("max_abs_error")),
                mse=_figure(accuracy.get("mse")),
                relative_error=_figure(accuracy.get("relative_error")),
                threshold=_figure(accuracy.get("threshold")),
                within_tolerance=accuracy.get("within_tolerance"),
                ops_total=operations.get("total"), ops_on_device=operations.get("on_device"),
                ops_share=_figure(operations.get("share")),
                mode="delegate" if result.get("mode") == "delegate" else "whole-model")


def bench_view(data: dict, file_name: str = "") -> dict:
    """The bench page's data."""
    models = {}
    for result in data.get("results", []):
        samples = (result.get("latency_ms") or {}).get("samples") or []
        entry = models.setdefault(result["model"], {})
        if samples:
            entry[result["device"]] = samples
    stress = [dict(case=str(c.get("case", "")), model=str(c.get("model", "")),
                   device=str(c.get("device", "")), outcome=c["outcome"],
                   seconds=_figure(c.get("seconds")), detail=str(c.get("detail") or ""))
              for c in data.get("stress", [])]
    counts = {outcome: sum(c["outcome"] == outcome for c in stress) for outcome in OUTCOMES}
    return dict(file=os.path.basename(os.fspath(file_name)) if file_name else "",
                created=data.get("created"), host=data.get("host", {}),
                settings=data.get("settings", {}),
                results=[result_row(r) for r in data.get("results", [])],
                models=[dict(model=name, distributions=distributions(series))
                        for name, series in models.items()],
                stress=stress, stress_counts=counts)
