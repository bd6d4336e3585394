"""The ``nnscope bench`` document (docs/bench-schema.md, version 1): its checker and reader,
writing it as JSON and as the HTML report, and the terminal summary of it.

:func:`problems` lists every way a document breaks the schema (empty: valid); :func:`read_bench`
loads a file and raises ``ValueError`` naming the first problems; :func:`write_json` writes a
document and reads it back. :func:`render_html` makes the report page with
``python -m nnscope.dashboards``. :func:`summary` is one table of results and one of stress
outcomes: "rel err" is the largest output error relative to the reference output's range;
"accurate" says whether it is within the threshold of its output type (``_bench_run``).

Example:
    >>> problems({"schema": "nnscope-bench", "version": 1})[:1]
    ['missing created']
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

import json
import math
import subprocess
import sys

# --------------------------------------------------------------------------- schema
SCHEMA, VERSION = "nnscope-bench", 1
STATUSES = ("ok", "unsupported", "error")
OUTCOMES = ("SUCCESS", "FAILURE", "HANG", "CRASH")
REFERENCES = ("nnapi-reference", "litert")
_NUMBER = (int, float)
_TOP = {"schema": str, "version": int, "created": str, "host": dict, "settings": dict,
        "results": list, "stress": list}
_RESULT = {"model": str, "device": str, "status": str}
_LATENCY = ("median", "p90", "p99", "mean", "std")
_STRESS = {"case": str, "model": str, "device": str, "outcome": str, "seconds": _NUMBER,
           "detail": str}


def _typed(where: str, document: dict, fields: dict) -> list[str]:
    found = []
    for name, kind in fields.items():
        if name not in document:
            found.append(f"missing {where}{name}")
        elif not isinstance(document[name], kind) or isinstance(document[name], bool):
            found.append(f"{where}{name} is {type(document[name]).__name__}")
    return found


def _number(value) -> bool:
    return isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value)


def _settings(settings: dict) -> list[str]:
    found = [f"settings.{k} is not a whole number" for k in ("executions", "warmup")
             if not isinstance(settings.get(k), int) or isinstance(settings.get(k), bool)]
    if "duration_s" not in settings or not (settings["duration_s"] is None
                                            or _number(settings["duration_s"])):
        found.append("settings.duration_s is not a number or null")
    if not isinstance(settings.get("burst"), bool):
        found.append("settings.burst is not a bool")
    return found


def _result(where: str, result: dict) -> list[str]:
    found = _typed(where, result, _RESULT)
    if result.get("status") not in STATUSES:
        found.append(f"{where}status {result.get('status')!r} is not one of {STATUSES}")
    ok = result.get("status") == "ok"
    if not (result.get("error") is None if ok else isinstance(result.get("error"), str)):
        found.append(f"{where}error must be null when ok, else a string")
    if not (_number(result.get("compile_ms")) or (not ok and result.get("compile_ms") is None)):
        found.append(f"{where}compile_ms is not a number")
    latency, accuracy = result.get("latency_ms"), result.get("accuracy")
    if ok or latency is not None:
        if not isinstance(latency, dict) or not all(_number(latency.get(k)) for k in _LATENCY) \
                or not isinstance(latency.get("samples"), list) \
                or not all(_number(v) for v in latency["samples"]):
            found.append(f"{where}latency_ms needs numbers {_LATENCY} and a samples list")
    if ok or accuracy is not None:
        if not isinstance(accuracy, dict) or accuracy.get("reference") not in REFERENCES \
                or not _number(accuracy.get("max_abs_error")) or not _number(accuracy.get("mse")) \
                or not isinstance(accuracy.get("within_tolerance"), bool):
            found.append(f"{where}accuracy needs reference, max_abs_error, mse, within_tolerance")
        elif any(key in accuracy and not _number(accuracy[key]) for key in ("relative_error", "threshold")):
            found.append(f"{where}accuracy's relative_error and threshold are numbers when given")
    operations = result.get("operations")
    if operations is not None or ok:
        if not isinstance(operations, dict) or not isinstance(operations.get("total"), int) \
                or not isinstance(operations.get("on_device"), int) \
                or not _number(operations.get("share")):
            found.append(f"{where}operations needs total, on_device (ints) and share")
    return found


def problems(document) -> list[str]:
    """Every way ``document`` breaks schema version 1 (empty when it is valid)."""
    if not isinstance(document, dict):
        return ["not a JSON object"]
    found = _typed("", document, _TOP)
    if document.get("schema") != SCHEMA or document.get("version") != VERSION:
        found.append(f"not {SCHEMA} version {VERSION}")
    if found:
        return found
    found += _settings(document["settings"])
    for index, result in enumerate(document["results"]):
        found += _result(f"results[{index}].", result) if isinstance(result, dict) \
            else [f"results[{index}] is not an object"]
    for index, case in enumerate(document["stress"]):
        where = f"stress[{index}]."
        found += _typed(where, case, _STRESS) if isinstance(case, dict) else [f"{where} bad"]
        if isinstance(case, dict) and case.get("outcome") not in OUTCOMES:
            found.append(f"{where}outcome {case.get('outcome')!r} is not one of {OUTCOMES}")
    return found


def read_bench(path: str) -> dict:
    """The bench document in ``path``.

    Raises:
        ValueError: not JSON, or not schema ``nnscope-bench`` version 1 (first problems named).
    """
    with open(path, encoding="utf-8") as handle:
        try:
            document = json.load(handle)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not JSON ({error})") from None
    found = problems(document)
    if found:
        raise ValueError(f"{path}: {'; '.join(found[:3])}")
    return document

# --------------------------------------------------------------------------- writing
def write_json(document: dict, path: str) -> None:
    """Write ``document`` to ``path`` and read it back (what we write must check out)."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1, allow_nan=False)
        handle.write("\n")
    read_bench(path)


def render_html(json_path: str, html_path: str) -> str | None:
    """Run ``python -m nnscope.dashboards JSON -o HTML``; the one-line error, or None on success."""
    done = subprocess.run([sys.executable, "-m", "nnscope.dashboards", json_path, "-o", html_path],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    reason = lines[-1].strip() if lines else f"exit status {done.returncode}"
    return f"cannot write {html_path}: python -m nnscope.dashboards failed: {reason}"


# --------------------------------------------------------------------------- summary
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
    from tabulate import tabulate  # noqa: PLC0415 - only when there is a summary to print
    results = document["results"]
    text = tabulate([_result_row(r) for r in results], headers=_RESULT_HEADERS, floatfmt=".4g")
    text += "\n" + _errors(results)
    if document["stress"]:
        rows = [[s[k] for k in ("case", "model", "device", "outcome", "seconds", "detail")]
                for s in document["stress"]]
        text += "\n" + tabulate(rows, headers=_STRESS_HEADERS, floatfmt=".2f") + "\n"
    return text
