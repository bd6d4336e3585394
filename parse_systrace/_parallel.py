"""Both passes on two cores: a forked child reads the second half of a large trace.

Runs are independent once pass 1 is done (each ``[NN_LA_PO]`` begin on a tracked thread
resets all per-thread state and the application-phase stack), so for a large plain
systrace/ftrace file the parent forks (``os.fork``: nothing re-imported) a child for the
second half. The *split row* is the second run-starting row from the reader's block
``skip`` on (about half of the file; the first may be the file's first, which does not
end a run). The parent feeds the rows before it, the child the rows from it on (reading
the blocks before ``skip`` only for the reader state they leave); the child sends its
runs, orphan and dropped counts back as JSON through a pipe (no pickle) and the parent
emits them after its own, in file order.

Pass 2 depends on pass 1 only through its result (tracked threads in order, their
processes, driver processes), which the first block nearly always shows already. So
:func:`runs` guesses it from the first block and runs both passes at once, each process
reading pass 1's rows of its own blocks (split at block ``skip``; the child's rows come
after the parent's, see :func:`tracking`); the parent then checks the guess against the
real result and drops all the work when they differ (the engine goes on from the real
result: pass 2 split as above, :func:`split_runs`).

Used only for the engine's unchecked attempt: any error in either process (or a child
result that is not plain JSON data) makes that attempt fail, and the engine then redoes
everything serially and checked, so the output is exactly that of the serial passes.

Example:
    >>> plan(io.BytesIO(b"")) is None      # not a path: serial
    True
"""
from __future__ import annotations

import io  # noqa: F401  (doctest)
import itertools
import json
import os
import signal
import threading
from typing import Iterator, Optional

from parse_systrace import _engine
from parse_systrace.summary import RunSummary

#: Smaller files stay serial (the fork and the child's reading cost more than they gain).
MIN_BYTES = 8 << 20
#: Share of the file's blocks read by the parent (it also renders every run).
PARENT_SHARE = 0.5
_FORMATS = ("systrace", "ftrace")
_GZIP_MAGIC = b"\x1f\x8b"


class ChildFailed(Exception):
    """The child did not deliver a result: the engine redoes the passes serially."""


def plan(source) -> Optional[tuple]:
    """``(skip, raw_from)`` for a source worth splitting, else None.

    ``raw_from(n)`` reads the unchecked raw blocks leaving out the first ``n``.
    """
    target = getattr(source, "_target", None)
    if (getattr(source, "format", None) not in _FORMATS or not hasattr(os, "fork")
            or threading.active_count() != 1
            or not isinstance(target, (str, bytes, os.PathLike))):
        return None
    from parse_systrace.readers.systrace import CHUNK
    try:
        size = os.stat(target).st_size
        with open(target, "rb") as handle:
            if handle.read(2) == _GZIP_MAGIC:
                return None
    except OSError:
        return None
    if size < MIN_BYTES:
        return None
    return (max(1, round(size * PARENT_SHARE / CHUNK)),
            lambda skip: source.raw_batches(checked=False, skip=skip),
            lambda start, stop: source.tracking_rows(checked=False, blocks=(start, stop)))


def tracking(split: tuple) -> Iterator[tuple]:
    """Pass 1's unchecked rows: from block ``skip`` on read by a child (the result of
    :func:`parse_systrace._engine.scan` is the same: see :func:`.systrace._tracking`)."""
    skip, _, tracking_in = split
    pid, read = _fork(lambda: [list(row) for row in tracking_in(skip, None)])
    try:
        yield from tracking_in(0, skip)
        rows = _receive(pid, read)
        pid = 0
        yield from map(tuple, rows)
    finally:
        _reap(pid)


def _fork(work) -> tuple:
    """``(pid, read end)`` of a child that sends ``work()`` as JSON and exits."""
    if threading.active_count() != 1:
        raise ChildFailed("threads running: no fork")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        status = 1
        try:
            os.close(read)
            payload = json.dumps(work(), allow_nan=True).encode()
            with os.fdopen(write, "wb") as pipe:
                pipe.write(payload)
            status = 0
        except BaseException:  # noqa: BLE001 - reported as a failed child
            pass
        finally:
            os._exit(status)
    os.close(write)
    return pid, read


def _receive(pid: int, read: int):
    """The child's JSON result (the child is reaped; ChildFailed if it failed)."""
    try:
        with os.fdopen(read, "rb") as pipe:
            payload = pipe.read()
    except BaseException:
        _reap(pid)
        raise
    _, status = os.waitpid(pid, 0)
    if status != 0 or not payload:
        raise ChildFailed(f"child status {status}")
    return json.loads(payload)


def _reap(pid: int) -> None:
    if pid:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def runs(split: tuple, make_sessions, warn):
    """Pass 2 at once, with pass 1's result guessed from the first block and checked
    row by row (generator; returns None).

    When the guess is wrong (the work is dropped) or gives several sessions, nothing is
    yielded and pass 1's real result is returned: the caller goes on from it.
    ``make_sessions(found, warn)`` -> the sessions (see :func:`._engine.sessions_of`).
    """
    parent_raw = split[1](0)
    try:
        first = list(itertools.islice(parent_raw, 1))
        guess = _scan_block(first[0]) if first else _engine.Scan()
        sessions = make_sessions(guess, _ignore)
        if len(sessions) == 1 and guess.tracked:
            session = sessions[0]
            session.guessed = True
            try:
                done, result = _halves(split, session, itertools.chain(first, parent_raw))
            except _engine.GuessWrong:
                pass
            else:
                guess.seen_runtime = result["runtime"] or session.seen_runtime()
                make_sessions(guess, warn)  # only for its warnings
                yield from _emit(done, result, session, warn)
                return None
    finally:
        parent_raw.close()
    return _engine.scan(tracking(split))


def _scan_block(block: tuple) -> _engine.Scan:
    """Pass 1's result over the rows of one raw block ``(first_line, rows)``."""
    first, rows = block
    if first is None:  # parsed line by line: (where, row) pairs
        rows = [row for _, row in rows]
    return _engine.scan((None, int(tid), int(tgid), _text(name), None)
                        for tid, tgid, _, kind, name in rows if kind)


def _text(name) -> str:
    return name.decode("utf-8", "replace") if type(name) is bytes else name


def split_runs(split: tuple, sessions: list, warn) -> Iterator[RunSummary]:
    """Feed and finish the one session, the rows after the split row in a child."""
    parent_raw = split[1](0)
    try:
        done, result = _halves(split, sessions[0], parent_raw)
    finally:
        parent_raw.close()
    yield from _emit(done, result, sessions[0], warn)


def _halves(split: tuple, session, parent_raw) -> tuple:
    """``(parent runs, child result)``: the parent feeds ``session`` the rows of
    ``parent_raw`` (all raw blocks) up to the split row, a child from it on; raises
    :class:`._engine.GuessWrong` when either does."""
    skip, raw_from, _ = split
    pid, read = _fork(lambda: _child(raw_from(skip), session))
    try:
        found: list = []
        blocks = _parent_blocks(parent_raw, skip, session, found)
        done = list(_engine._feed_one(blocks, [session], _ignore))
        done.append(session.finish())
        result = _receive(pid, read)
        pid = 0
    finally:
        _reap(pid)
    if result["wrong"]:
        raise _engine.GuessWrong("in the child")
    if result["started"] != bool(found):
        raise ChildFailed("the processes disagree on the split row")
    return done, result


def _emit(done: list, result: dict, session, warn) -> Iterator[RunSummary]:
    """The parent's runs, then the child's, then the orphan warning."""
    for run in done:
        yield from _engine._emit(run, warn)
    for fields in result["runs"]:
        yield from _engine._emit(RunSummary(**fields), warn)
    orphans = sum(t.orphans for t in session.threads.values()) + result["orphans"]
    dropped = orphans + session.dropped + result["dropped"]
    if dropped:
        warn(f"parse_systrace: warning: --tolerant dropped {dropped} orphan rows "
             f"({orphans} E marks without a B)\n")


def _ignore(text: str) -> None:
    """Warnings of work whose result may be dropped (given again when it is used)."""


def _child(raw, session) -> dict:
    """The child's result: the runs from the split row on, orphan and dropped counts,
    whether a mark shows the runtime, or only ``wrong`` (a guessed session's guess)."""
    started: list = []
    blocks = _child_blocks(raw, session, started)
    try:
        found = list(_engine._feed_one(blocks, [session], _ignore))
    except _engine.GuessWrong:
        return {"wrong": True}
    if started:
        found.append(session.finish())
    return {"started": bool(started), "runs": [_plain(vars(run)) for run in found],
            "orphans": sum(t.orphans for t in session.threads.values()),
            "dropped": session.dropped, "runtime": session.seen_runtime(), "wrong": False}


def _plain(value):
    """``value`` unchanged if JSON gives it back equal (str keys, no tuples), else raise."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"key {key!r}")
            _plain(item)
    elif kind is list:
        for item in value:
            _plain(item)
    elif kind not in (str, int, float, bool, type(None)):
        raise TypeError(f"value {value!r}")
    return value


def _split_index(first, rows) -> tuple:
    """Candidates for the split row in a raw block: ``[(index, tid), ...]``."""
    found = []
    for index, row in enumerate(rows):
        if first is None:
            row = row[1]
        name = row[4]
        if row[3] and ((b"[NN_LA_PO]" in name) if type(name) is bytes
                       else "[NN_LA_PO]" in name):
            found.append((index, row[0]))
    return found


def _split(first, rows, session, seen: list) -> Optional[int]:
    """Index of the split row in a raw block, or None: the second run-starting row (on a
    tracked thread) from block ``skip`` on (``seen`` counts them), so that it is never
    the first of the file (whose earlier rows belong to its run)."""
    for index, tid in _split_index(first, rows):
        if session.resolve(tid) is not None:
            seen.append(index)
            if len(seen) == 2:
                return index
    return None


def _parent_blocks(raw, skip: int, session, found: list):
    """The raw blocks up to the split row (``found`` gets its index), as ``_raw_rows``."""
    seen: list = []
    for number, (first, rows) in enumerate(raw):
        index = _split(first, rows, session, seen) if number >= skip else None
        if index is None:
            yield from _engine._raw_rows([(first, rows)])
            continue
        found.append(index)
        yield from _engine._raw_rows([(first, rows[:index])])
        return


def _child_blocks(raw, session, started: list):
    """The raw blocks from the split row on (``started`` is set when it is found)."""
    seen: list = []
    for first, rows in raw:
        if not started:
            index = _split(first, rows, session, seen)
            if index is None:
                continue
            started.append(index)
            rows = rows[index:]
            if first is not None:
                first += index
        yield from _engine._raw_rows([(first, rows)])

