"""The fleet dataset: a folder of Parquet files (pyarrow), four tables, queried with DuckDB.

Layout: ``DATASET/fleet.json`` (``{"version": 1, "keys": [...]}``) and one folder per table,
each holding ``part-*.parquet`` files (a build adds parts; a part is written to a hidden
temporary name and renamed, so a reader never sees half of one). The tables:

``traces``  one row per trace (its content hash is its id): ``trace_id``, ``path``,
            ``size_bytes``, ``mtime_ns``, ``format`` (the reader that read it), ``driver``
            (with ``--trace-keys``), ``runs`` (complete runs), ``parse_s`` (the task's
            seconds) and one column per group key.
``runs``    one row per complete run, as in ``parse_systrace --json``: ``trace_id``, ``run``
            (0, 1, ... in file order), ``starting_mark``, ``model`` (the ``[NN_LA_PO]``
            detail), ``warmup_and_benchmark``, ``executions_po/_pwu/_pbm``.
``phases``  one row per run, application phase, phase and layer: ``trace_id``, ``run``,
            ``app_phase`` (``""``: the whole run; ``PWU``/``PBM``: warmup/benchmark when both
            ran), ``phase`` (PI ... PO), ``layer`` (LA, LR, LI, LD, LC, LT), ``time_ms`` and
            ``self_ms`` (the run's ``times`` and ``self_times``; NULL where the tool says n/a).
``errors``  one row per file that gave no trace: ``path``, ``trace_id`` (None if unread),
            ``size_bytes``, ``mtime_ns``, ``reason`` (one line) and the group keys.

A trace is counted once: rows whose ``trace_id`` the dataset already holds are dropped when
written (a retried task, the same file under two names); a file whose path, size and
modification time are already in ``traces`` or ``errors`` is not read again.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     writer = Writer(tmp, ["device"])
    ...     writer.add({"path": "/x.txt", "size_bytes": 0, "mtime_ns": 1, "trace_id": "00",
    ...                 "error": "file: empty trace file", "runs": [], "phases": {}},
    ...                {"device": "pixel6"})
    ...     writer.close()
    ...     query(tmp, "SELECT path, reason, device FROM errors")
    True
    (['path', 'reason', 'device'], [('/x.txt', 'file: empty trace file', 'pixel6')])
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional

TABLES = ("traces", "runs", "phases", "errors")
VERSION = 1
#: Traces buffered before the writer writes a part (bounds the client's memory).
FLUSH_TRACES = 500


def _schemas(keys: list[str]) -> dict:
    import pyarrow as pa

    text, whole, real = pa.string(), pa.int64(), pa.float64()
    key_fields = [(name, text) for name in keys]
    return {
        "traces": pa.schema([("trace_id", text), ("path", text), ("size_bytes", whole),
                             ("mtime_ns", whole), ("format", text), ("driver", text),
                             ("runs", pa.int32()), ("parse_s", real), *key_fields]),
        "runs": pa.schema([("trace_id", text), ("run", pa.int32()), ("starting_mark", text),
                           ("model", text), ("warmup_and_benchmark", pa.bool_()),
                           ("executions_po", whole), ("executions_pwu", whole),
                           ("executions_pbm", whole)]),
        "phases": pa.schema([("trace_id", text), ("run", pa.int32()), ("app_phase", text),
                             ("phase", text), ("layer", text), ("time_ms", real),
                             ("self_ms", real)]),
        "errors": pa.schema([("path", text), ("trace_id", text), ("size_bytes", whole),
                             ("mtime_ns", whole), ("reason", text), *key_fields]),
    }


def read_meta(dataset) -> dict:
    """``fleet.json`` of a dataset (``{"version": 1, "keys": []}`` when there is none yet)."""
    path = Path(dataset) / "fleet.json"
    if not path.exists():
        return {"version": VERSION, "keys": []}
    return json.loads(path.read_text(encoding="utf-8"))


def is_dataset(path) -> bool:
    """Whether ``path`` is a fleet dataset folder."""
    return (Path(path) / "fleet.json").is_file()


def parts(dataset, table: str) -> list[str]:
    """The Parquet files of ``table``."""
    folder = Path(dataset) / table
    return sorted(str(path) for path in folder.glob("part-*.parquet")) if folder.is_dir() else []


def connect(dataset):
    """A DuckDB connection with the dataset's tables as views (an empty table has its schema)."""
    import duckdb
    import pyarrow as pa

    con = duckdb.connect()
    schemas = _schemas(read_meta(dataset)["keys"])
    for table in TABLES:
        files = parts(dataset, table)
        if files:
            listed = ", ".join("'" + name.replace("'", "''") + "'" for name in files)
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM "
                        f"read_parquet([{listed}], union_by_name = true)")
        else:
            empty = pa.Table.from_pylist([], schema=schemas[table])  # noqa: F841 - read by DuckDB
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM empty")
    return con


def query(dataset, sql: str) -> tuple[list[str], list[tuple]]:
    """(column names, rows) of a SQL query on the dataset's tables."""
    con = connect(dataset)
    try:
        cursor = con.execute(sql)
        columns = [column[0] for column in cursor.description or ()]
        return columns, cursor.fetchall()
    finally:
        con.close()


def known_files(dataset) -> tuple[set, set]:
    """(``(path, size, mtime)`` of every file already summarised or failed for good, trace
    ids already held)."""
    if not is_dataset(dataset):
        return set(), set()
    con = connect(dataset)
    try:
        files = set(con.execute(
            "SELECT path, size_bytes, mtime_ns FROM traces UNION "
            "SELECT path, size_bytes, mtime_ns FROM errors WHERE mtime_ns IS NOT NULL").fetchall())
        ids = {row[0] for row in con.execute("SELECT trace_id FROM traces").fetchall()}
        return files, ids
    finally:
        con.close()


class Writer:
    """Adds task results to a dataset, each trace once, in parts of :data:`FLUSH_TRACES`."""

    def __init__(self, dataset, keys: list[str], known_ids: Optional[set] = None) -> None:
        self.dataset = Path(dataset)
        meta = read_meta(dataset)
        self.keys = meta["keys"] + [name for name in keys if name not in meta["keys"]]
        self.seen = set(known_ids or ())
        self.seen_errors: set = set()
        self.written = {table: 0 for table in TABLES}
        self.duplicates = 0
        self._schemas = _schemas(self.keys)
        self._buffer = {table: [] for table in TABLES}
        self._phases: list[dict] = []
        self._pending = 0
        self.dataset.mkdir(parents=True, exist_ok=True)
        self._write_meta()

    def add(self, result: dict, keys: dict) -> bool:
        """Buffer one :func:`.task.parse_trace` result with its group keys; False when the
        trace (or this error of this file) is already in the dataset."""
        keys = {name: keys.get(name) for name in self.keys}
        if result.get("error"):
            mark = (result["path"], result.get("trace_id"))
            if mark in self.seen_errors:
                return False
            self.seen_errors.add(mark)
            self._buffer["errors"].append(dict(
                path=result["path"], trace_id=result.get("trace_id"), size_bytes=result.get("size_bytes"),
                mtime_ns=result.get("mtime_ns"), reason=result["error"], **keys))
        else:
            if result["trace_id"] in self.seen:
                self.duplicates += 1
                return False
            self.seen.add(result["trace_id"])
            self._buffer["traces"].append(dict(
                trace_id=result["trace_id"], path=result["path"], size_bytes=result["size_bytes"],
                mtime_ns=result["mtime_ns"], format=result["format"], driver=result.get("driver"),
                runs=len(result["runs"]), parse_s=result["parse_s"], **keys))
            self._buffer["runs"].extend(result["runs"])
            self._phases.append(result["phases"])
        self._pending += 1
        if self._pending >= FLUSH_TRACES:
            self.flush()
        return True

    def flush(self) -> None:
        """Write the buffered rows as one new part per table."""
        import pyarrow as pa

        tables = {name: pa.Table.from_pylist(rows, schema=self._schemas[name])
                  for name, rows in self._buffer.items() if name != "phases" and rows}
        if self._phases:
            columns = {name: [value for chunk in self._phases for value in chunk[name]]
                       for name in self._schemas["phases"].names}
            tables["phases"] = pa.Table.from_pydict(columns, schema=self._schemas["phases"])
        for name, table in tables.items():
            self._write_part(name, table)
            self.written[name] += table.num_rows
        self._buffer = {table: [] for table in TABLES}
        self._phases, self._pending = [], 0

    def close(self) -> None:
        """Flush what is left and record the key names."""
        self.flush()
        self._write_meta()

    def _write_part(self, table: str, data) -> None:
        import pyarrow.parquet as pq

        folder = self.dataset / table
        folder.mkdir(exist_ok=True)
        name = f"part-{time.time_ns():x}-{os.getpid()}-{self.written[table]}.parquet"
        temporary = folder / f".{name}.tmp"
        pq.write_table(data, temporary, compression="zstd")
        os.replace(temporary, folder / name)

    def _write_meta(self) -> None:
        path = self.dataset / "fleet.json"
        temporary = self.dataset / ".fleet.json.tmp"
        temporary.write_text(json.dumps({"version": VERSION, "keys": self.keys}, indent=1) + "\n")
        os.replace(temporary, path)
