"""``nnscope bench``'s terminal summary: one table of results, one of stress outcomes.

"rel err" is the largest output error relative to the reference output's range; "accurate"
says whether it is within the threshold of its output type (``_bench_models``).

Example:
    >>> result = {"model": "tiny_add", "device": "nnapi-reference", "status": "ok", "error": None,
    ...           "compile_ms": 0.17, "latency_ms": {"median": 0.073, "p90": 0.095, "p99": 0.1, "mean": 0.08,
    ...                                              "std": 0.013, "samples": [0.07] * 5},
    ...           "accuracy": {"max_abs_error": 0.0, "relative_error": 0.0, "threshold": 0.0001,
    ...                        "within_tolerance": True},
    ...           "operations": {"total": 1, "on_device": 1, "share": 1.0}}
    >>> header, rule, row = summary({"results": [result], "stress": []}).splitlines()
    >>> def cells(line):  # columns are at least two spaces apart
    ...     return [cell.strip() for cell in line.split("  ") if cell.strip()]
    >>> cells(header)[:5], cells(row)[:5], cells(row)[-2:]
    (['model', 'device', 'status', 'compile ms', 'median ms'], ['tiny_add', 'nnapi-reference', 'ok', '0.17', '0.073'],
     ['yes (<= 0.0001)', '1/1'])
"""
from __future__ import annotations

from tabulate import tabulate

_RESULT_HEADERS = ("model", "device", "status", "compile ms", "median ms", "p90 ms", "p99 ms",
                   "mean ms", "std ms", "n", "max abs err", "rel err", "accurate", "ops on device")
_STRESS_HEADERS = ("case", "model", "device", "outcome", "seconds", "detail")


def _result_row(result: dict) -> list:
    latency, accuracy, operations = result["latency_ms"], result["accuracy"], result["operations"]
    ops = f"{operations['on_device']}/{operations['total']}" if operations else ""
    row = [result["model"], result["device"], result["status"], result["compile_ms"]]
    if latency:
        row += [latency[k] for k in ("median", "p90", "p99", "mean", "std")]
        row += [len(latency["samples"])]
    else:
        row += [""] * 6
    if accuracy:
        row += [accuracy["max_abs_error"], accuracy.get("relative_error", ""), _verdict(accuracy)]
    else:
        row += [""] * 3
    return row + [ops]


def _verdict(accuracy: dict) -> str:
    """``yes`` or ``NO``, with the threshold the relative error was held to."""
    word = "yes" if accuracy["within_tolerance"] else "NO"
    limit = accuracy.get("threshold")
    return word if limit is None else f"{word} ({'<=' if word == 'yes' else '>'} {limit:.2g})"


def _errors(results: list[dict]) -> str:
    lines = [f"{r['model']} on {r['device']}: {r['status']}: {r['error']}"
             for r in results if r["error"]]
    return "".join(line + "\n" for line in lines)


def summary(document: dict) -> str:
    """The tables (and one line per unsupported or failed run)."""
    results = document["results"]
    text = tabulate([_result_row(r) for r in results], headers=_RESULT_HEADERS, floatfmt=".4g")
    text += "\n" + _errors(results)
    if document["stress"]:
        rows = [[s[k] for k in ("case", "model", "device", "outcome", "seconds", "detail")]
                for s in document["stress"]]
        text += "\n" + tabulate(rows, headers=_STRESS_HEADERS, floatfmt=".2f") + "\n"
    return text
