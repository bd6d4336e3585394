"""One trace of a fleet: its content hash, its runs and phase times as rows, or one error.

:func:`parse_trace` is what every fleet worker runs, once per file (a task runs it for each
file of a small batch: :func:`parse_traces`). It summarises the file with :func:`parse_systrace.iter_summaries`, the engine of the ``parse_systrace``
command, so its figures are those of ``parse_systrace --json`` on the same file (the
``times`` and ``self_times`` of every complete run, NaN as None). It never raises: a file that
cannot be read, that is not a trace, or that holds no complete NNAPI run gives an
``error`` (one line) instead. The result is plain data (dicts, lists, str, float), cheap to
send from a worker.

Example:
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "empty.txt")
    ...     open(path, "wb").close()
    ...     result = parse_trace(path)
    >>> result["error"], result["trace_id"] == content_hash(b"")
    ('file: empty trace file', True)
"""
from __future__ import annotations

import hashlib
import math
import os
import time

from nnscope.parse_systrace import iter_summaries
from nnscope.parse_systrace.readers import open_rows
from nnscope.tracing.naming import parse_name

#: Phases and layers of the phase rows (the keys of a run's ``times``).
APP_PHASES = ("PWU", "PBM")
#: Bytes read at a time when hashing.
_CHUNK = 1 << 20


def content_hash(data: bytes) -> str:
    """The trace id of a file's bytes: BLAKE2b, 128 bits, hex.

    >>> content_hash(b"")
    'cae66941d9efbd404e4d88758ea67670'
    """
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def file_hash(path: str) -> str:
    """:func:`content_hash` of a file, read in chunks."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def parse_trace(path: str, *, tolerant: bool = False, driver_key: bool = False) -> dict:
    """Parse one trace file into fleet rows.

    Args:
        path: the trace file (any format ``parse_systrace`` reads, gzip included).
        tolerant: as ``parse_systrace --tolerant``.
        driver_key: also find the driver's name (see :func:`driver_name`).

    Returns:
        ``{"path", "size_bytes", "mtime_ns", "trace_id", "format", "driver", "parse_s",
        "runs": [run row dicts], "phases": {column: [values]}, "error": str | None}``;
        with an error, ``runs`` and ``phases`` are empty (``trace_id`` is None when the file
        could not be read at all).
    """
    start = time.perf_counter()
    result = dict(path=path, size_bytes=None, mtime_ns=None, trace_id=None, format=None,
                  driver=None, parse_s=None, runs=[], phases=_columns(), error=None)
    try:
        stat = os.stat(path)
        result.update(size_bytes=stat.st_size, mtime_ns=stat.st_mtime_ns)
        result["trace_id"] = file_hash(path)
        result["format"] = open_rows(path).format
        runs = [run for run in iter_summaries(path, tolerant=tolerant) if run.complete]
        if not runs:
            raise ValueError("no complete NNAPI run in the trace")
        if driver_key:
            result["driver"] = driver_name(path)
    except Exception as error:  # noqa: BLE001 - every failure is one errors row
        result["error"] = one_line(error)
        return result
    for index, run in enumerate(runs):
        result["runs"].append(run_row(result["trace_id"], index, run))
        add_phase_rows(result["phases"], result["trace_id"], index, run)
    result["parse_s"] = time.perf_counter() - start
    return result


def parse_traces(paths: list, *, tolerant: bool = False, driver_key: bool = False) -> list:
    """The fleet's task: :func:`parse_trace` of each of ``paths``, in order (never raises)."""
    return [parse_trace(path, tolerant=tolerant, driver_key=driver_key) for path in paths]


def one_line(error: BaseException) -> str:
    """The reason of an error on one line: the message of a ``TraceFormatError`` or a
    ``ValueError`` as is, else prefixed with the exception's type.

    >>> one_line(OSError("a\\nb"))
    'OSError: a b'
    """
    text = str(error) if type(error).__name__ in ("TraceFormatError", "ValueError") else (
        f"{type(error).__name__}: {error}")
    return " ".join(text.split()) or type(error).__name__


def run_row(trace_id: str, index: int, run) -> dict:
    """A row of the ``runs`` table."""
    counts = run.execution_counts
    mark = run.starting_mark
    name = parse_name(mark.split("|", 2)[2]) if mark.count("|") >= 2 else None
    return dict(trace_id=trace_id, run=index, starting_mark=mark,
                model=name.detail if name is not None else None,
                warmup_and_benchmark=run.has_warmup_and_benchmark,
                executions_po=counts.get("PO"), executions_pwu=counts.get("PWU"),
                executions_pbm=counts.get("PBM"))


def _columns() -> dict:
    return {name: [] for name in ("trace_id", "run", "app_phase", "phase", "layer",
                                  "time_ms", "self_ms")}


def add_phase_rows(columns: dict, trace_id: str, index: int, run) -> None:
    """Append the ``phases`` rows of one run: one per (application phase, phase, layer) of its
    ``times`` (``app_phase`` is ``""`` for the whole run, ``PWU``/``PBM`` for the sub-dicts)."""
    for app_phase, times, self_times in _phase_dicts(run):
        for phase, layers in times.items():
            if phase in APP_PHASES:
                continue
            for layer, value in layers.items():
                columns["trace_id"].append(trace_id)
                columns["run"].append(index)
                columns["app_phase"].append(app_phase)
                columns["phase"].append(phase)
                columns["layer"].append(layer)
                columns["time_ms"].append(_number(value))
                columns["self_ms"].append(_number(self_times[phase][layer]))


def _phase_dicts(run):
    yield "", run.times, run.self_times
    for app_phase in APP_PHASES:
        if app_phase in run.times:
            yield app_phase, run.times[app_phase], run.self_times[app_phase]


def _number(value):
    value = float(value)
    return None if math.isnan(value) else value


def driver_name(path: str):
    """The driver a trace shows: the name before ``::`` of its first ``[NN_LD_...]`` mark
    (``SampleDriver::execute`` -> ``SampleDriver``), or None."""
    for row in open_rows(path).tracking_rows():
        name = row[3]
        if name and "[NN_LD_" in name:
            parsed = parse_name(name)
            if parsed is not None and parsed.detail:
                return parsed.detail.split("::")[0]
    return None
