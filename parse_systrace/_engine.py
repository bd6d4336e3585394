"""The run loop: scan the rows once for tracked threads, then build and summarise runs.

Pass 1 (:func:`scan`) finds the tracked threads (in the order they were first tracked),
the driver processes and whether any runtime mark exists. Pass 2 (:func:`iter_runs`)
re-reads the rows, feeds each tracked thread's marks to its :class:`ThreadState` and
yields a :class:`~parse_systrace.summary.RunSummary` each time a run ends (at the next
``[NN_LA_PO]`` mark and at the end of the file), then drops that run's trees.
:mod:`._parallel` feeds its half of the rows through the same steps: :func:`raw_rows`,
:func:`feed_one` (the loop for one session) and :func:`emit`. Pass 1's result nearly always
shows in the first block of rows already, so a plain systrace/ftrace file is first read once:
pass 2 on the result :func:`guess` gives for that block, each row checked against it
(:func:`speculate`); a row against it starts over with pass 1.

Example:
    >>> rows = [(1.0, 5, 5, "[NN_LA_PO]m", 1), (1.5, 5, 5, "[NN_LR_PC]c", 2),
    ...         (1.75, 5, 5, None, 3), (2.0, 5, 5, None, 4)]
    >>> [run.times["PC"]["LR"] for run in iter_runs(lambda: iter([rows]))]
    [250.0]
"""
from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from functools import partial
from itertools import count, islice, repeat

from nnscope.parse_systrace import _tree
from nnscope.parse_systrace._aggregate import aggregate
from nnscope.parse_systrace._classify import DRIVER, tracking
from nnscope.parse_systrace._thread import (ASYNC_BEGIN, ASYNC_END, END, SYNC, TEXT, TRACKING,
                                    ThreadState, span_ms)
from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.summary import RunSummary, ThreadDetail

TYPE_CHECKING = False  # typing is not imported at run time (start-up)
if TYPE_CHECKING:
    from typing import Optional

_E, _C = _tree.E, _tree.C  # a node's end time and children (see parse_systrace._tree)

NO_RUNTIME = "\n*** No NNAPI Runtime trace present - check your systrace setup ***\n\n"
INCOMPLETE = "Incomplete trace, not able to print all statistics\n"


class Scan:
    """What pass 1 learns: tracked tid -> tgid (first-tracked order), driver tgids."""

    def __init__(self, tracked: Optional[dict] = None, drivers: Optional[set] = None,
                 seen_runtime: bool = False) -> None:
        self.tracked = {} if tracked is None else tracked
        self.drivers = set() if drivers is None else drivers
        self.seen_runtime = seen_runtime

    def __repr__(self) -> str:
        return f"Scan({self.tracked!r}, {self.drivers!r}, {self.seen_runtime!r})"

    @property
    def clients(self) -> list:
        """Client (non-driver) processes owning tracked threads, in tracking order."""
        return list(dict.fromkeys(g for g in self.tracked.values() if g not in self.drivers))


def scan(rows: Iterator[tuple]) -> Scan:
    """Pass 1 over all rows (section 2 of the semantics)."""
    result = Scan()
    tracked, drivers = result.tracked, result.drivers
    for _, tid, tgid, name, _ in rows:
        if name is None:
            continue
        kind = tracking(name)
        if kind:
            tracked[tid] = tgid
            result.seen_runtime = result.seen_runtime or is_runtime(name)
        if kind == DRIVER:
            drivers.add(tgid)
    return result


def is_runtime(name: str) -> bool:
    """Whether a begin mark's name shows the NNAPI runtime (pass 1's ``seen_runtime``)."""
    return "[NN" in name and "NN_LR" in name


def guess(block: tuple) -> Scan:
    """Pass 1's result over the distinct begin rows ``(tid, tgid, name)`` of one raw
    block ``(first_line, rows)``, in first-seen order: the same as over all its rows
    unless a thread's process id changes back (then any guess fails its checks)."""
    first, rows = block
    if first is None:  # parsed line by line: (where, row) pairs
        rows = [row for _, row in rows]
    distinct = dict.fromkeys((tid, tgid, name) for tid, tgid, _, kind, name in rows if kind)
    return scan((None, int(tid), int(tgid), _text(name), None) for tid, tgid, name in distinct)


def _text(name) -> str:
    return name.decode("utf-8", "replace") if type(name) is bytes else name


def then(first: list, rest: Iterator) -> Iterator:
    """The items of ``first`` (taken out of it: not kept alive), then ``rest``."""
    first.reverse()
    while first:
        yield first.pop()
    yield from rest


def ignore(text: str) -> None:
    """Warnings of work whose result may be dropped (given again when it is used)."""


class GuessWrong(Exception):
    """Pass 2 met a row that makes the guessed pass 1 result wrong (see
    :attr:`Session.guessed`)."""


class Session:
    """The trackers of one summary (all tracked threads, or one client process)."""

    def __init__(self, scan_result: Scan, tids, tolerant: bool, detail: bool,
                 process: Optional[int] = None) -> None:
        self.app: list = []
        self.threads = {tid: ThreadState(tid, scan_result.tracked[tid],
                                         scan_result.tracked[tid] in scan_result.drivers,
                                         self.app, tolerant) for tid in tids}
        self.tolerant, self.detail, self.process = tolerant, detail, process
        for thread in self.threads.values():
            thread.keep_parents = detail
        self.first, self.starting_mark, self.dropped = True, "", 0
        self.lookup: dict = {}  # tid as read (bytes or int) -> ThreadState or None
        #: The session comes from a guessed pass 1 result: the hot loop checks each row
        #: against it (:meth:`check_untracked`, :meth:`check_name`, :meth:`check_tgid`)
        #: and raises :class:`GuessWrong` when pass 1 over all rows would differ.
        self.guessed = False
        self.untracking: set = set()  # begin names checked not to make a thread tracked

    def resolve(self, tid):
        """The tracked thread of a tid as read (bytes or int), or None; cached."""
        return self.lookup.setdefault(tid, self.threads.get(int(tid)))

    def check_untracked(self, name) -> None:
        """(guessed) A begin row of an untracked thread must not make it tracked."""
        if name in self.untracking:
            return
        text = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
        if tracking(text):
            raise GuessWrong(f"{text!r} on an untracked thread")
        self.untracking.add(name)

    def check_name(self, thread: ThreadState, info: tuple) -> None:
        """(guessed) A driver's mark must be on a thread of a driver process."""
        if info[TRACKING] == DRIVER and not thread.is_driver:
            raise GuessWrong(f"{info[TEXT]!r} on thread {thread.tid} of a client")

    def check_tgid(self, thread: ThreadState, tgid) -> None:
        """(guessed) A tracking row's process id as read must be its thread's."""
        if int(tgid) != thread.tgid:
            raise GuessWrong(f"thread {thread.tid} in process {int(tgid)}")
        thread.read_tgid = tgid

    def seen_runtime(self) -> bool:
        """Whether a begin mark fed so far shows the NNAPI runtime (for a guessed
        session, where all such marks are on tracked threads)."""
        return any(is_runtime(info[TEXT]) for thread in self.threads.values()
                   for info in thread.cache.values())

    def start_run(self, tgid, text: str) -> Optional[RunSummary]:
        """A ``[NN_LA_PO]`` mark: finish the previous run (if any), remember this mark."""
        finished = None if self.first else self.finish()
        self.starting_mark, self.first = f"B|{int(tgid)}|{text}", False
        return finished

    def feed(self, ts, tid, tgid, name, where) -> Optional[RunSummary]:
        """Handle one row; return the finished previous run when this row starts a run."""
        thread = self.threads.get(tid)
        if thread is None:
            return None
        if name is None:
            thread.end(ts, where)
            return None
        finished = self.start_run(tgid, name) if "[NN_LA_PO]" in name else None
        thread.begin(ts, name, where)
        return finished

    def finish(self) -> RunSummary:
        """Summarise the current run and reset every thread for the next one."""
        try:
            return self._summarise()
        finally:
            for thread in self.threads.values():
                if not self.detail and thread.stats is None:
                    _tree.unlink(thread.root)  # no cycles left: the gc may stay off
                thread.reset()
            self.app.clear()

    def _summarise(self) -> RunSummary:
        threads = list(self.threads.values())
        run = RunSummary(starting_mark=self.starting_mark, process=self.process)
        if not all(thread.complete for thread in threads):
            run.complete = False
            return run
        times, self_times, both, counts = aggregate(threads, self._driver_pairs)
        run.times, run.self_times, run.execution_counts = times, self_times, counts
        run.has_warmup_and_benchmark = both
        if self.detail:
            run.details = [ThreadDetail(t.tid, t.tgid, t.is_driver, t.calculate(), t.root)
                           for t in threads]
        return run

    def _driver_pairs(self, app: str) -> list:
        """Driver/Execution spans: sorted execute::server begins vs notify::client begins."""
        begins, ends, sync = [], [], []
        for thread in self.threads.values():
            for (phase, function), spans in thread.spans.items():
                if phase != app:
                    continue
                if ASYNC_BEGIN.search(function):
                    begins += [span_ms(node)[0] for node in spans]
                elif ASYNC_END.search(function):
                    ends += [span_ms(node)[0] for node in spans]
                elif SYNC.search(function):
                    sync += [span_ms(node) for node in spans]
        begins.sort()
        ends.sort()
        if len(begins) != len(ends):
            if not self.tolerant:
                raise TraceFormatError(
                    f"run {self.starting_mark or '(before the first [NN_LA_PO] mark)'}",
                    f"{len(begins)} driver execute begins but {len(ends)} callback notifies")
            self.dropped += abs(len(begins) - len(ends))
            begins, ends = (begins[:len(ends)], ends) if len(begins) > len(ends) else \
                (begins, ends[len(ends) - len(begins):])
        return list(zip(begins, ends)) + sync


def iter_runs(batches: Callable[[], Iterator[list]], *, tolerant: bool = False,
              per_process: bool = False, detail: bool = False,
              warn: Callable[[str], None] = lambda text: None,
              tracking: Optional[Callable[[], Iterator[tuple]]] = None,
              raw: Optional[Callable[[], Iterator[tuple]]] = None,
              unchecked: Optional[tuple] = None, split=None) -> Iterator[RunSummary]:
    """Yield every run's summary.

    ``batches()`` returns a fresh iterator over lists of rows each call; ``tracking()``
    (optional) the rows that can make a thread tracked, for a cheaper first pass;
    ``raw()`` (optional) the rows in the raw form of
    :meth:`parse_systrace.readers.RowSource.raw_batches`, read instead of ``batches()``.
    ``unchecked`` (optional, ignored with ``detail``): ``(tracking, raw)`` with
    ``checked=False``, tried first with runs and warnings held back; on any error all is
    redone checked (streamed), so the output is exactly that of the checked passes.
    ``split`` (optional, a :class:`._parallel.Split`): that attempt runs on two processes;
    else it first tries pass 2 alone on a guessed pass 1 result (:func:`speculate`).
    """
    options = dict(tolerant=tolerant, per_process=per_process, detail=detail)
    if unchecked is None or detail:
        yield from _runs(batches, tracking, raw, warn, **options)
        return
    events: list = []  # warnings (str) and runs, in order
    try:
        for run in _runs(batches, *unchecked, events.append, **options, split=split,
                         guess_from=raw, numbered=False):
            events.append(run)
    except Exception:  # noqa: BLE001 - redone checked, which shows the error as usual
        yield from _runs(batches, tracking, raw, warn, **options)
        return
    for event in events:
        if isinstance(event, str):
            warn(event)
        else:
            yield event


def _runs(batches, tracking, raw, warn, *, tolerant: bool, per_process: bool,
          detail: bool, split=None, guess_from=None,
          numbered: bool = True) -> Iterator[RunSummary]:
    make = partial(sessions_of, tolerant=tolerant, per_process=per_process, detail=detail)
    collecting = gc.isenabled()
    if not detail:
        gc.disable()  # millions of small lists; every finished tree is unlinked (no cycles)
    try:
        if split is not None:  # (never with detail) pass 2 on a guessed pass 1 result
            found = yield from split.speculate(make, warn)
            if found is None:
                return
        elif guess_from is not None and (yield from speculate(guess_from(), make, warn)):
            return
        elif tracking is None:
            found = scan(row for batch in batches() for row in batch)
        else:
            found = scan(tracking())
        sessions = make(found, warn)
        if split is not None and len(sessions) == 1:
            return (yield from split.feed(sessions, warn))
        feed = feed_one if len(sessions) == 1 else _feed_many
        yield from feed(raw_rows(raw() if raw is not None else _as_raw(batches()),
                                 numbered), sessions, warn)
        yield from _finish(sessions, warn)
    finally:
        if collecting:
            gc.enable()


def sessions_of(found: Scan, warn, *, tolerant: bool, per_process: bool,
                detail: bool) -> list:
    """The sessions of pass 1's result; warns when there is no runtime mark, or when one
    session merges several client processes."""
    if not found.seen_runtime:
        warn(NO_RUNTIME)
    clients = found.clients
    if per_process and clients:
        return [Session(found, [t for t, g in found.tracked.items()
                                if g == client or g in found.drivers],
                        tolerant, detail, client) for client in clients]
    if len(clients) > 1:
        warn(f"parse_systrace: note: the summary merges {len(clients)} client processes "
             f"({', '.join(map(str, clients))}); use --per-process to split them\n")
    return [Session(found, list(found.tracked), tolerant, detail)]


def _as_raw(batches) -> Iterator[tuple]:
    return ((None, [(where, (tid, tgid, ts, b"B" if name is not None else b"", name))
                    for ts, tid, tgid, name, where in batch]) for batch in batches)


def raw_rows(raw, numbered: bool = True) -> Iterator:
    """Iterables of ``(where, (tid, tgid, ts, kind, name))``, one per raw batch. Without
    ``numbered`` (the unchecked attempt: on any error it is all redone numbered) ``where``
    is None in the blocks of byte groups: no line number is made per row."""
    where = count if numbered else _no_lines
    return (rows if first is None else zip(where(first), rows) for first, rows in raw)


def _no_lines(first) -> Iterator:
    return repeat(None)


def _feed_many(batches, sessions: list, warn) -> Iterator[RunSummary]:
    for batch in batches:
        for where, (tid, tgid, ts, kind, name) in batch:
            ts, tid, tgid = float(ts), int(tid), int(tgid)
            if not kind:
                name = None
            elif isinstance(name, bytes):
                name = name.decode("utf-8", "replace")
            for session in sessions:
                finished = session.feed(ts, tid, tgid, name, where)
                if finished is not None:
                    yield from emit(finished, warn)


def feed_one(batches, sessions: list, warn) -> Iterator[RunSummary]:
    """The hot loop for one session: :meth:`ThreadState.begin` / ``end`` inlined."""
    session = sessions[0]
    lookup, app, guessed = session.lookup, session.app, session.guessed
    phase = "PO"  # app[-1] if app else "PO": changes only in slow begins and span ends
    for batch in batches:
        for where, (tid, tgid, ts, kind, name) in batch:
            try:
                thread = lookup[tid]
            except KeyError:
                thread = session.resolve(tid)
            if thread is None:
                if guessed and kind:
                    session.check_untracked(name)
                continue
            stack = thread.stack
            if not kind:
                node = stack.pop()
                if not stack:  # the root: an E without a B
                    stack.append(node)
                    thread.end(float(ts), where)
                    continue
                node[_E] = float(ts)
                if node[END] is not None:
                    thread.ended(node)
                    phase = app[-1] if app else "PO"
                continue
            try:
                info = thread.cache[name]
            except KeyError:
                info = thread.info(name, where)
                if guessed:
                    session.check_name(thread, info)
            mark, layer, mark_phase, subtract, ends, slow, starts_run, text, _, tracks = info
            if guessed and tracks and tgid != thread.read_tgid:
                session.check_tgid(thread, tgid)
            if slow:
                if starts_run:
                    finished = session.start_run(tgid, text)
                    if finished is not None:
                        yield from emit(finished, warn)
                thread.begin_slow(float(ts), info, where)
                phase = app[-1] if app else "PO"
                continue
            parent = stack[-1]
            # The node's slots, in _tree's order: S, E, L, P, A, SUB, C, PAR, M, W, and END.
            node = [float(ts), None, layer, mark_phase, phase, subtract, (), parent, mark,
                    where, ends]
            children = parent[_C]
            if children:
                children.append(node)
            else:  # its first child: a node's children start as the shared empty tuple
                parent[_C] = [node]
            stack.append(node)


def speculate(raw: Iterator, make_sessions, warn):
    """Pass 2 alone, on pass 1's result guessed from the first of the ``raw`` blocks and
    checked row by row (see :attr:`Session.guessed`): a generator that yields the runs and
    returns True, or yields nothing and returns False when the guess gives no single session
    or a row contradicts it (the caller then runs pass 1). Saves pass 1's reading of the
    file (``benchmarks/parse_systrace_speed.py``); the runs are held until the last row."""
    try:
        first = list(islice(raw, 1))
        found = guess(first[0]) if first else Scan()
        sessions = make_sessions(found, ignore)
        if len(sessions) != 1 or not found.tracked:
            return False
        sessions[0].guessed = True
        runs = list(feed_one(raw_rows(then(first, raw), numbered=False), sessions, ignore))
        runs.append(sessions[0].finish())
    except GuessWrong:
        return False
    finally:
        raw.close()
    found.seen_runtime = sessions[0].seen_runtime()
    make_sessions(found, warn)  # only for its warnings
    for run in runs:
        yield from emit(run, warn)
    _warn_dropped(sessions, warn)
    return True


def _finish(sessions: list, warn) -> Iterator[RunSummary]:
    for session in sessions:
        yield from emit(session.finish(), warn)
    _warn_dropped(sessions, warn)


def _warn_dropped(sessions: list, warn) -> None:
    orphans = sum(t.orphans for s in sessions for t in s.threads.values())
    dropped = orphans + sum(s.dropped for s in sessions)
    if dropped:
        warn(f"parse_systrace: warning: --tolerant dropped {dropped} orphan rows "
             f"({orphans} E marks without a B)\n")


def emit(run: RunSummary, warn) -> Iterator[RunSummary]:
    """Yield ``run``, after warning :data:`INCOMPLETE` when it is not complete."""
    if not run.complete:
        warn(INCOMPLETE)
    yield run
