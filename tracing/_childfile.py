"""Per-process event files of a trace session directory (JSON lines, no pickle).

A process that joins a session from outside (a driver process started with
``tracing.session_env()``) appends one JSON line per thread and flush to
``<session dir>/trace-<pid>.jsonl``::

    {"v":1,"pid":812,"tid":815,"thread":"MainThread","process":"driver",
     "events":[[1034718303435000,"[NN_LD_PE]execute"],[1034718303999000,null]],
     "notes":[["adopt",1034718303434000,"00-<trace id>-<span id>-01"]]}

``notes`` (optional) are the thread's adopted contexts and failed spans (``tracing.span``).

Only whole lines are read back, so a reader never sees half a write.

Example:
    >>> import tempfile
    >>> track = ThreadTrack(pid=42, tid=43, name="serve", events=[(10, "[NN_LD_PE]execute"), (30, None)])
    >>> with tempfile.TemporaryDirectory() as session_dir:
    ...     append_tracks(session_dir, [track], "driver")
    ...     tracks, names = read_tracks(session_dir)
    2
    >>> names, [(t.pid, t.tid, t.name, t.events) for t in tracks]
    ({42: 'driver'}, [(42, 43, 'serve', [(10, '[NN_LD_PE]execute'), (30, None)])])
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from nnscope.tracing.span import ThreadTrack

_log = logging.getLogger(__name__)
VERSION = 1
_PATTERN = "trace-*.jsonl"


def file_for(directory: str | os.PathLike, pid: int) -> Path:
    """The events file of process ``pid`` in a session directory."""
    return Path(directory) / f"trace-{pid}.jsonl"


def append_tracks(directory: str | os.PathLike, tracks: list[ThreadTrack],
                  process_name: str) -> int:
    """Append ``tracks`` to their process's file; return the number of events written.

    Raises:
        OSError: when the file cannot be written.
    """
    if not tracks:
        return 0
    lines = [json.dumps({"v": VERSION, "pid": t.pid, "tid": t.tid, "thread": t.name,
                         "process": process_name, "events": t.events,
                         **({"notes": t.notes} if t.notes else {})},
                        separators=(",", ":")) + "\n" for t in tracks]
    with open(file_for(directory, tracks[0].pid), "a", encoding="utf-8") as out:
        out.write("".join(lines))
    return sum(len(t.events) for t in tracks)


def read_tracks(directory: str | os.PathLike) -> tuple[list[ThreadTrack], dict[int, str]]:
    """Read all process files of a session directory.

    Chunks of one thread are joined in file order. Unreadable files and lines
    are logged and skipped.

    Returns:
        The thread tracks and the process names by pid.
    """
    tracks: dict[tuple[int, int], ThreadTrack] = {}
    processes: dict[int, str] = {}
    for path in sorted(Path(directory).glob(_PATTERN)):
        for record in _records(path):
            key = (record["pid"], record["tid"])
            track = tracks.setdefault(key, ThreadTrack(key[0], key[1], record["thread"]))
            track.name = record["thread"]
            track.events.extend((ts, name) for ts, name in record["events"])
            track.notes.extend(_notes(record.get("notes", ())))
            processes[key[0]] = record["process"]
    return list(tracks.values()), processes


def _notes(notes) -> list:
    """The well-formed notes of a record (``[kind, ts, value]``); others are skipped."""
    kept = []
    for note in notes if isinstance(notes, list) else ():
        if not isinstance(note, list) or len(note) != 3 or type(note[1]) is not int:
            continue
        kind, _, value = note
        if (kind == "adopt" and (value is None or isinstance(value, str))) or (
                kind == "error" and isinstance(value, list) and len(value) == 2
                and type(value[0]) is int and isinstance(value[1], str)):
            kept.append(note)
    return kept


def _records(path: Path):
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        _log.warning("cannot read trace file %s: %s", path, error)
        return
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            break  # a write in progress
        try:
            record = json.loads(line)
            if record.get("v") == VERSION:
                yield record
        except (ValueError, AttributeError) as error:
            _log.warning("skipping a bad line in %s: %s", path, error)
