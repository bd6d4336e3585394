"""Reader and checker of the ``nnscope bench --json`` file (docs/bench-schema.md, version 1).

:func:`problems` lists every way a document breaks the schema (empty: valid); :func:`read_bench`
loads a file and raises ``ValueError`` naming the first problems.

Example:
    >>> problems({"schema": "nnscope-bench", "version": 1})[:1]
    ['missing created']
"""
from __future__ import annotations

import json
import math

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
