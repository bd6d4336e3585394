"""Both passes on two cores: a forked child reads the second half of a large trace.

Runs are independent once pass 1 is done (each ``[NN_LA_PO]`` begin on a tracked thread
resets all per-thread state and the application-phase stack), so for a large plain
systrace/ftrace file the parent forks (``os.fork``: nothing re-imported) a child for the
second half. The *split row* is the first ``[NN_LA_PO]`` begin row from
:data:`PARENT_SHARE` of the file's bytes on, found by a byte search before the fork (its
line starts at ``at``; its thread is tracked, as any thread with an ``[NN`` mark: with a
guessed pass 1 result that does not track it, the child's check of that row finds the guess
wrong; when it is the file's first run start, which does not end a run, the split is
dropped). The parent feeds the rows before
``at``, the child the rows from ``at`` on: no row is read twice. The child sends its
runs, orphan and dropped counts back as JSON through a pipe (no pickle) and the parent
emits them after its own, in file order. A process allowed one CPU (a fleet
worker pinned to its core, ``taskset -c 0``) stays serial: the child would only add its reading.

Pass 2 depends on pass 1 only through its result (tracked threads in order, their
processes, driver processes), which the first block nearly always shows already. So
:func:`runs` forks the child at once, guesses that result from the parent's first raw
block, sends the guess to the child (JSON through a second pipe) and runs pass 2 alone:
both processes check every row they feed against the guess (see
:attr:`._engine.Session.guessed`). On a row that pass 1 would read differently the work
is dropped and the engine goes on from the real pass 1 result (read on both processes
too, :func:`tracking`), with pass 2 split as above (:func:`split_runs`).

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
import select
from collections import namedtuple
from collections.abc import Iterator
from contextlib import closing

from nnscope.parse_systrace import _engine
from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.summary import RunSummary

TYPE_CHECKING = False  # typing is not imported at run time (start-up)
if TYPE_CHECKING:
    from typing import Optional

#: Smaller files stay serial (the fork and the child's reading cost more than they gain).
MIN_BYTES = 8 << 20
#: Share of the file's bytes before the split row's search starts (the parent also
#: guesses pass 1's result, receives and renders).
PARENT_SHARE = 0.49
_FORMATS = ("systrace", "ftrace")
_GZIP_MAGIC = b"\x1f\x8b"


class ChildFailed(Exception):
    """The child did not deliver a result: the engine redoes the passes serially."""


def plan(source) -> Optional["Split"]:
    """A :class:`Split` ``(at, raw_from, tracking_in)`` for a source worth splitting,
    else None.

    ``at`` is the line start of the split row, the first ``[NN_LA_PO]`` begin row from
    :data:`PARENT_SHARE` of the file's bytes on (a byte search);
    ``raw_from(span, checked)`` reads the raw blocks of the bytes ``span`` = ``(start,
    stop)`` (unchecked: after pass 1's unchecked rows, see
    :attr:`.readers.RowSource.unchecked`); ``tracking_in(span)`` pass 1's unchecked rows
    of those bytes.
    """
    target = getattr(source, "_target", None)
    if (getattr(source, "format", None) not in _FORMATS
            or not isinstance(target, (str, bytes, os.PathLike))):
        return None
    at = _split_at(target)
    if at is None:
        return None
    return Split(at, lambda span, checked: source.raw_batches(checked=checked, span=span),
                 lambda span: source.tracking_rows(checked=False, span=span))


def _split_at(target) -> Optional[int]:
    """The offset of the split row of a file worth splitting, else None (also when the
    search meets a line it cannot read: the serial passes report it with its line number).
    The size comes first: a small file does not count threads (:func:`forks_safely`)."""
    try:
        size = os.stat(target).st_size
        if size < MIN_BYTES or not forks_safely() or usable_cpus() < 2:
            return None
        with open(target, "rb") as handle:
            if handle.read(2) == _GZIP_MAGIC:
                return None
            from nnscope.parse_systrace.readers.systrace import begin_rows_from
            rows = begin_rows_from(handle, int(size * PARENT_SHARE), "[NN_LA_PO]")
            with closing(rows):
                return next((offset for offset, _ in rows), None)
    except (OSError, TraceFormatError):
        return None


def usable_cpus() -> int:
    """The CPUs this process may run on (one: the split would only add the child's reading)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def forks_safely() -> bool:
    """Whether this process may fork a child to read with: only while it runs one thread (a
    lock another thread holds at the fork would stay held in the child). Counted by the OS
    where it lists them (threads not started by Python count too), else by ``threading``."""
    if not hasattr(os, "fork"):
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        import threading  # here, not at start-up

        return threading.active_count() == 1


class Split(namedtuple("Split", "at raw_from tracking_in")):
    """How a source is split; the engine is given one and calls its two methods."""

    __slots__ = ()

    def speculate(self, make_sessions, warn):
        """:func:`runs` (a generator returning None, or pass 1's real result)."""
        return runs(self, make_sessions, warn)

    def feed(self, sessions: list, warn) -> Iterator[RunSummary]:
        """:func:`split_runs`."""
        return split_runs(self, sessions, warn)


def tracking(split: tuple) -> Iterator[tuple]:
    """Pass 1's unchecked rows: from byte ``at`` on read by a child (the result of
    :func:`parse_systrace._engine.scan` is the same: see :func:`.systrace._tracking`)."""
    at, tracking_in = split.at, split.tracking_in
    pid, read = _fork(lambda: [list(row) for row in tracking_in((at, None))])
    try:
        yield from tracking_in((0, at))
        child, pid = pid, 0
        rows = _receive(child, read)
        yield from map(tuple, rows)
    finally:
        _discard(pid, read)


def _fork(work, parent_fds=()) -> tuple:
    """``(pid, read end)`` of a child that sends ``work()`` as JSON and exits (it first
    closes its copies of ``parent_fds``)."""
    if not forks_safely():
        raise ChildFailed("threads running: no fork")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        status = 1
        try:
            for fd in (read, *parent_fds):
                os.close(fd)
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
    """The child's JSON result (the child is reaped in any case; ChildFailed if it
    failed)."""
    try:
        payload = _read_all(read)
    except BaseException:
        _reap(pid)
        raise
    _, status = os.waitpid(pid, 0)
    if status != 0 or not payload:
        raise ChildFailed(f"child status {status}")
    return json.loads(payload)


def _read_all(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as pipe:
        return pipe.read()


def _discard(pid: int, read: int) -> None:
    """Kill and reap a child whose result is not wanted (none if ``pid`` is 0)."""
    if pid:
        os.close(read)
        _reap(pid)


def _reap(pid: int) -> None:
    import signal  # here, not at start-up

    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def runs(split: tuple, make_sessions, warn):
    """Pass 2 at once, with pass 1's result guessed from the first block and checked
    row by row (generator; returns None).

    The child is forked first and reads up to its blocks while the parent reads the
    first block and sends it the guess (JSON through a second pipe). When the guess is
    wrong (the work is dropped) or gives several sessions, nothing is yielded and pass
    1's real result is returned: the caller goes on from it.
    ``make_sessions(found, warn)`` -> the sessions (see :func:`._engine.sessions_of`).
    """
    at, raw_from, _ = split
    pid, read, outbox = _fork_guessed(lambda inbox: _guessed_child(
        raw_from((at, None), True), inbox, make_sessions))
    parent_raw = raw_from((0, at), True)  # checked: no unchecked pass 1 rows came before
    try:
        first, guess, session = _send_guess(outbox, parent_raw, make_sessions)
        if session is not None:
            child, pid = pid, 0  # reaped by _parent_half
            try:
                done, result = _parent_half(session, _engine.then(first, parent_raw),
                                            child, read)
            except _engine.GuessWrong:
                pass
            else:
                guess.seen_runtime = result["runtime"] or session.seen_runtime()
                make_sessions(guess, warn)  # only for its warnings
                yield from _emit(done, result, session, warn)
                return None
    finally:
        parent_raw.close()
        _discard(pid, read)
    return _engine.scan(tracking(split))


def _fork_guessed(work) -> tuple:
    """``(pid, read end, guess pipe)`` of a child doing ``work(guess pipe's read end)``."""
    inbox, outbox = os.pipe()
    try:
        pid, read = _fork(lambda: work(inbox), (outbox,))
    except BaseException:
        os.close(outbox)
        raise
    finally:
        os.close(inbox)
    return pid, read, outbox


def _send_guess(outbox: int, parent_raw, make_sessions) -> tuple:
    """Read the first raw block, guess pass 1's result from it and send the guess to the
    child (or None when it gives no single session with tracked threads). Returns
    ``([first block], guess, its guessed session or None)``."""
    with os.fdopen(outbox, "wb") as pipe:
        first = list(itertools.islice(parent_raw, 1))
        guess = _engine.guess(first[0]) if first else _engine.Scan()
        sessions = make_sessions(guess, _engine.ignore)
        usable = len(sessions) == 1 and bool(guess.tracked)
        pipe.write(json.dumps([list(guess.tracked.items()), sorted(guess.drivers)]
                              if usable else None).encode())
    if not usable:
        return first, guess, None
    sessions[0].guessed = True
    return first, guess, sessions[0]


def _guessed_child(raw, inbox: int, make_sessions) -> dict:
    """The work of :func:`runs`' child: read its blocks until the guess is in ``inbox``
    (at least one), then take it and feed its session (``{"wrong": True}`` if none comes)."""
    first = _read_ahead(raw, inbox)
    guess = json.loads(_read_all(inbox))
    if guess is None:
        return {"wrong": True}
    tracked, drivers = guess
    found = _engine.Scan(dict(map(tuple, tracked)), set(drivers))
    session = make_sessions(found, _engine.ignore)[0]
    session.guessed = True
    return _child(_engine.then(first, raw), session)


def _read_ahead(raw, inbox: int) -> list:
    """The first raw blocks of ``raw``: one, and more while nothing is in ``inbox``."""
    ahead = []
    for block in raw:
        ahead.append(block)
        if select.select([inbox], [], [], 0)[0]:
            break
    return ahead


def split_runs(split: tuple, sessions: list, warn) -> Iterator[RunSummary]:
    """Feed and finish the one session, the rows after the split row in a child."""
    at, raw_from, _ = split
    session = sessions[0]
    pid, read = _fork(lambda: _child(raw_from((at, None), False), session))
    parent_raw = raw_from((0, at), False)
    try:
        done, result = _parent_half(session, parent_raw, pid, read)
    finally:
        parent_raw.close()
    yield from _emit(done, result, session, warn)


def _parent_half(session, parent_raw, pid: int, read: int) -> tuple:
    """``(parent runs, child result)``: feed ``session`` the rows of ``parent_raw`` (the
    raw blocks before the split row), then take the result of the child ``pid`` (which
    fed it the rows from there on; it is reaped in any case). Raises
    :class:`._engine.GuessWrong` when either process met a row against the guess."""
    try:
        done = _feed(session, parent_raw)
        if session.first:  # the rows before the split row belong to the file's first run
            raise ChildFailed("the split row is the file's first run start")
        done.append(session.finish())
        child, pid = pid, 0
        result = _receive(child, read)
    finally:
        _discard(pid, read)
    if result["wrong"]:
        raise _engine.GuessWrong("in the child")
    return done, result


def _emit(done: list, result: dict, session, warn) -> Iterator[RunSummary]:
    """The parent's runs, then the child's, then the orphan warning."""
    for run in done:
        yield from _engine.emit(run, warn)
    for fields in result["runs"]:
        yield from _engine.emit(RunSummary(**fields), warn)
    orphans = sum(t.orphans for t in session.threads.values()) + result["orphans"]
    dropped = orphans + session.dropped + result["dropped"]
    if dropped:
        warn(f"parse_systrace: warning: --tolerant dropped {dropped} orphan rows "
             f"({orphans} E marks without a B)\n")


def _feed(session, raw) -> list:
    """The runs that end in the raw blocks ``raw`` fed to ``session`` (the last one stays
    open: :meth:`._engine.Session.finish` ends it)."""
    return list(_engine.feed_one(_engine.raw_rows(raw, numbered=False), [session],
                                 _engine.ignore))


def _child(raw, session) -> dict:
    """The child's result: the runs from the split row on, orphan and dropped counts,
    whether a mark shows the runtime, or only ``wrong`` (a guessed session's guess)."""
    try:
        found = _feed(session, raw)
    except _engine.GuessWrong:
        return {"wrong": True}
    found.append(session.finish())
    return {"runs": [_plain(vars(run)) for run in found],
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
