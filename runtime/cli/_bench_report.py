"""The ``nnscope bench`` document (docs/bench-schema.md, version 1): its checker and reader,
writing it as JSON and as the HTML report, and the terminal summary of it.

:func:`problems` lists every way a document breaks the schema (empty: valid); :func:`read_bench`
loads a file and raises ``ValueError`` naming the first problems; :func:`write_json` writes a
document and reads it back. :func:`render_html` makes the report page with
``python -m nnscope.dashboards``. :func:`summary` fits in 100 columns: a latency table and an
accuracy table, each model a heading over its devices, then the stress cases. "rel err" is the
largest output error relative to the reference output's range; "accurate" says whether it is
within the threshold of its output type (``_bench_run``).

Example:
    >>> problems({"schema": "nnscope-bench", "version": 1})[:1]
    ['missing created']
    >>> result = {"model": "tiny_add", "device": "nnapi-reference", "status": "ok", "error": None,
    ...           "compile_ms": 0.17, "latency_ms": {"median": 0.073, "p90": 0.095, "p99": 0.1, "mean": 0.08,
    ...                                              "std": 0.013, "samples": [0.07] * 5},
    ...           "accuracy": {"reference": "nnapi-reference", "max_abs_error": 0.0, "relative_error": 0.0,
    ...                        "threshold": 0.0001, "within_tolerance": True},
    ...           "operations": {"total": 1, "on_device": 1, "share": 1.0}}
    >>> print(summary({"results": [result], "stress": []}), end="")
    Latency (ms; n: benchmark executions, warm-up not counted; compile ms: one compilation)
      device           status  compile ms  median ms  p90 ms  p99 ms  mean ms  std ms  n
      ---------------  ------  ----------  ---------  ------  ------  -------  ------  -
    tiny_add (1 operation)
      nnapi-reference  ok            0.17      0.073   0.095     0.1     0.08   0.013  5
    <BLANKLINE>
    Accuracy against the reference outputs (rel err: of the output's range), operations on the device
      device           max abs err  rel err  accurate         ops on device
      ---------------  -----------  -------  ---------------  -------------
    tiny_add (1 operation; reference: nnapi-reference)
      nnapi-reference            0        0  yes (<= 0.0001)            1/1
    <BLANKLINE>
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
MODES = ("whole-model", "delegate")
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
    return found + _mode(where, result)


def _mode(where: str, result: dict) -> list[str]:
    """``mode`` and ``delegation``: optional (new in this version's writer)."""
    found = []
    if "mode" in result and result["mode"] not in MODES:
        found.append(f"{where}mode {result['mode']!r} is not one of {MODES}")
    delegation = result.get("delegation")
    if delegation is not None and (not isinstance(delegation, dict) or not all(
            isinstance(delegation.get(k), int) for k in ("feature_level", "max_partitions",
                                                         "delegated", "total"))):
        found.append(f"{where}delegation needs feature_level, max_partitions, delegated, total (ints)")
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
#: The summary fits in this many columns: two tables with the model as a heading line, long
#: error lines and stress details wrapped.
WIDTH = 100
_LATENCY_HEADERS = ("device", "status", "compile ms", "median ms", "p90 ms", "p99 ms", "mean ms",
                    "std ms", "n")
_ACCURACY_HEADERS = ("device", "max abs err", "rel err", "accurate", "ops on device")
_STRESS_HEADERS = ("case", "device", "outcome", "seconds", "detail")
_LATENCY_TITLE = "Latency (ms; n: benchmark executions, warm-up not counted; compile ms: one compilation)"
_ACCURACY_TITLE = "Accuracy against the reference outputs (rel err: of the output's range), operations on the device"
_STRESS_TITLE = "Stress cases"
_DELEGATE_NOTE = ("(delegate mode: N/M delegated = TFLite operators in NNAPI partitions; the rest "
                  "run on LiteRT's CPU)")
_INDENT = "  "
#: Stress details wrap at this width (the other stress columns take the rest of :data:`WIDTH`).
_DETAIL_WIDTH = 50


def _number(value, digits: int = 3) -> str:
    return "" if value == "" or value is None else f"{value:.{digits}g}"


def _latency_rows(result: dict) -> list[list]:
    latency = result["latency_ms"]
    row = [result["device"], result["status"], _number(result["compile_ms"])]
    if not latency:
        return [row + [""] * 6]
    return [row + [_number(latency[k]) for k in _LATENCY] + [str(len(latency["samples"]))]]


def _accuracy_rows(result: dict) -> list[list]:
    accuracy, operations = result["accuracy"], result["operations"]
    ops = f"{operations['on_device']}/{operations['total']}" if operations else ""
    if ops and _delegated(result):
        ops += " delegated"
    if not accuracy:
        return [[result["device"], "", "", result["status"], ops]]
    return [[result["device"], _number(accuracy["max_abs_error"]),
             _number(accuracy.get("relative_error", "")), _verdict(accuracy), ops]]


def _stress_rows(case: dict) -> list[list]:
    """The case's row, its detail wrapped onto rows of its own beneath."""
    import textwrap  # noqa: PLC0415
    first, *more = textwrap.wrap(case["detail"], _DETAIL_WIDTH) or [""]
    return [[case["case"], case["device"], case["outcome"], f"{case['seconds']:.2f}", first],
            *([""] * 4 + [line] for line in more)]


def _verdict(accuracy: dict) -> str:
    """``yes`` or ``NO``, with the threshold the relative error was held to."""
    word = "yes" if accuracy["within_tolerance"] else "NO"
    limit = accuracy.get("threshold")
    return word if limit is None else f"{word} ({'<=' if word == 'yes' else '>'} {limit:.2g})"


def _delegated(result: dict) -> bool:
    return result.get("mode") == "delegate"


def _nothing_delegated(result: dict) -> bool:
    return _delegated(result) and result["status"] == "ok" and result["operations"]["on_device"] == 0


def _heading(model: str, rows: list[dict], with_reference: bool) -> str:
    """``face_detection_short_range (90 operations; reference: litert)``; in delegate mode
    ``face_landmark (97 operators; delegate mode, feature level 30, at most 3 partitions)``
    over the latency table, ``face_landmark (97 operators; delegate mode; reference: litert)``."""
    totals = [r["operations"]["total"] for r in rows if r.get("operations")][:1]
    noun = "operator" if any(map(_delegated, rows)) else "operation"
    facts = [f"{n} {noun}{'' if n == 1 else 's'}" for n in totals]
    if any(map(_delegated, rows)):  # the options once, over the latency table (100 columns)
        facts.append("delegate mode" if with_reference else
                     _delegate_facts([r["delegation"] for r in rows if r.get("delegation")]))
    if with_reference:
        facts += [f"reference: {r['accuracy']['reference']}" for r in rows if r.get("accuracy")][:1]
    return model + (f" ({'; '.join(facts)})" if facts else "")


def _delegate_facts(delegations: list[dict]) -> str:
    """``delegate mode, feature level 30, at most 3 partitions`` (what the rows share)."""
    levels = sorted({d["feature_level"] for d in delegations})
    limits = sorted({d["max_partitions"] for d in delegations})
    facts = ["delegate mode"]
    if levels:
        facts.append(f"feature level {levels[0]}" if len(levels) == 1
                     else f"feature levels {', '.join(map(str, levels))}")
    if len(limits) == 1:
        facts.append(f"at most {limits[0]} partition{'' if limits[0] == 1 else 's'}"
                     if limits[0] > 0 else "any number of partitions")
    return ", ".join(facts)


def _table(headers, cells: list[list[str]]) -> list[str]:
    """Header, rule and rows, two spaces apart; a column of figures is right-aligned."""
    columns = list(zip(headers, *cells))
    widths = [max(map(len, column)) for column in columns]
    right = [all(not c or c[0].isdigit() for c in column[1:]) for column in columns]

    def line(row) -> str:
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right)).rstrip()
    return [line(headers), "  ".join("-" * w for w in widths), *map(line, cells)]


def _grouped(items: list[dict], make_rows, headers, with_reference: bool = False) -> str:
    """One table of ``items`` (model-major), indented under one heading line per model."""
    rows = [make_rows(item) for item in items]
    table = [_INDENT + line for line in _table(headers, [row for group in rows for row in group])]
    lines, body = table[:2], iter(table[2:])
    for model in dict.fromkeys(item["model"] for item in items):
        mine = [(item, group) for item, group in zip(items, rows) if item["model"] == model]
        lines.append(_heading(model, [item for item, _ in mine], with_reference))
        lines += [next(body) for _, group in mine for _ in group]
    return "\n".join(lines) + "\n"


def _wrapped(line: str) -> str:
    import textwrap  # noqa: PLC0415
    return textwrap.fill(line, WIDTH, subsequent_indent=" ") + "\n"


def _errors(results: list[dict]) -> str:
    """One line per failed or unsupported run, and per delegate-mode run with nothing delegated."""
    import textwrap  # noqa: PLC0415
    lines = [f"{r['model']} on {r['device']}: {r['status']}: {r['error']}" if r["error"] else
             f"{r['model']} on {r['device']}: ok: nothing delegated, every operator ran on LiteRT's CPU"
             for r in results if r["error"] or _nothing_delegated(r)]
    return "".join(textwrap.fill(line, WIDTH, subsequent_indent=_INDENT * 2) + "\n" for line in lines)


def _model_major(items: list[dict]) -> list[dict]:
    """``items`` with each model's together, models in order of first appearance."""
    models = dict.fromkeys(item["model"] for item in items)
    return [item for model in models for item in items if item["model"] == model]


def summary(document: dict) -> str:
    """The results in at most :data:`WIDTH` columns: two tables (latency; accuracy and operations)
    with each model a heading over its devices, one line per unsupported or failed run, and the
    stress cases."""
    results = _model_major(document["results"])
    text = _LATENCY_TITLE + "\n" + _grouped(results, _latency_rows, _LATENCY_HEADERS) + "\n"
    text += _ACCURACY_TITLE + "\n" + _grouped(results, _accuracy_rows, _ACCURACY_HEADERS, True)
    if any(map(_delegated, results)):
        text += _wrapped(_DELEGATE_NOTE)
    text += "\n" + _errors(results)
    if document["stress"]:
        stress = _model_major(document["stress"])
        text += "\n" + _STRESS_TITLE + "\n" + _grouped(stress, _stress_rows, _STRESS_HEADERS)
    return text
