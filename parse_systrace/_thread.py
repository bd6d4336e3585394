"""Per-thread state of one run: the call tree, begin/end times and execution counts.

:class:`ThreadState` turns one thread's B/E marks into a call tree (section 4 of the
semantics) and answers the per-thread questions of the aggregation: a bucket's time,
the special Runtime/Execution time and the execution count. ``app`` is the
application-phase stack shared by all threads of a run.

Beyond the established tool: Runtime/Execution also counts the synchronous
``ANeuralNetworksExecution_compute`` and ``ANeuralNetworksExecution_burstCompute`` calls
(:data:`SYNC_RUNS`), which that tool leaves out (giving negative Runtime self-times for
runtimes that execute synchronously, like ours). Its traces never contain them, so its
numbers are unchanged.

Example:
    >>> app = []
    >>> t = ThreadState(tid=7, tgid=7, is_driver=False, app=app)
    >>> t.begin(1.0, "[NN_LA_PE]run", 1); t.begin(1.001, "[NN_LR_PC]f", 2)
    >>> t.end(1.002, 3); t.end(1.004, 4)
    True
    True
    >>> t.complete, t.execution_count("PO")
    (True, 1)
"""
from __future__ import annotations

import re

from nnscope.parse_systrace import _tree
from nnscope.parse_systrace._walk import calculate
from nnscope.parse_systrace._classify import MarkError, classify, function_name, tracking
from nnscope.parse_systrace.errors import TraceFormatError, line_where

_E, _A, _C, _L, _P, _M, _S = _tree.E, _tree.A, _tree.C, _tree.L, _tree.P, _tree.M, _tree.S
#: Index of a node's end bookkeeping ``(span function or None, pops the app phase)``.
END = 10
SYNC_CALLS = ("ANeuralNetworksExecution_create", "ANeuralNetworksExecution_free",
              "ANeuralNetworksEvent_create", "ANeuralNetworksEvent_free",
              "ANeuralNetworksExecution_setInput", "ANeuralNetworksExecution_setOutput",
              "ANeuralNetworksExecution_setInputFromMemory",
              "ANeuralNetworksExecution_setOutputFromMemory")
#: Synchronous runs the established tool leaves out of Runtime/Execution (it pairs only
#: startCompute with Event_wait): we add their durations after :data:`SYNC_CALLS`.
SYNC_RUNS = ("ANeuralNetworksExecution_compute", "ANeuralNetworksExecution_burstCompute")
ASYNC_BEGIN = re.compile(r"::IPreparedModel::execute(_\d+_\d+)?::server$")
ASYNC_END = re.compile(r"::IExecutionCallback::notify(_\d+_\d+)?::client$")
SYNC = re.compile(r"::(IPreparedModel|IBurstContext|IBurstCallback)::\w*"
                  r"(execute|Fenced|[Bb]urst)\w*::server$")
#: Functions whose begin/end times the aggregation reads (besides the regexes above).
SPAN_FUNCTIONS = frozenset(SYNC_CALLS + SYNC_RUNS + ("ANeuralNetworksExecution_startCompute",
                                         "ANeuralNetworksEvent_wait"))
_APP_GROUPS = ("PWU", "PBM")
#: Fields of a mark's cached info (see :meth:`ThreadState.info`).
MARK, LAYER, PHASE, SUBTRACT, ENDS, SLOW, START, TEXT, SWITCH, TRACKING = range(10)


def _span_function(mark: str):
    function = function_name(mark)
    if (function in SPAN_FUNCTIONS or ASYNC_BEGIN.search(function)
            or ASYNC_END.search(function) or SYNC.search(function)):
        return function
    return None


def span_ms(node: list) -> tuple:
    """``(begin, end)`` in ms of an ended node recorded in :attr:`ThreadState.spans`."""
    return node[_S] * 1000.0, node[_E] * 1000.0


class ThreadState:
    """One tracked thread during one run.

    ``stack`` holds the open nodes, the root first. Each distinct begin-mark name is
    classified once (:meth:`info`); a node records its begin/end times only when the
    aggregation reads its function (:data:`SPAN_FUNCTIONS`, driver execute marks).
    """

    __slots__ = ("tid", "tgid", "is_driver", "app", "tolerant", "root", "stack",
                 "spans", "la_pe", "stats", "orphans", "cache", "ignored", "placeholders",
                 "removals", "keep_parents", "read_tgid")

    def __init__(self, tid: int, tgid: int, is_driver: bool, app: list,
                 tolerant: bool = False) -> None:
        self.tid, self.tgid, self.is_driver, self.app = tid, tgid, is_driver, app
        self.tolerant = tolerant
        self.orphans = 0
        self.cache: dict = {}
        self.keep_parents = True  # False: calculate() leaves the tree without cycles
        self.read_tgid = None  # a process id as read that is known to be ``tgid``
        self.reset()

    def reset(self) -> None:
        """Forget the run: a new empty tree and bookkeeping."""
        self.root = _tree.new_root()
        self.stack: list = [self.root]
        self.spans: dict = {}  # (app phase, function) -> [ended node, ...] (see span_ms)
        self.la_pe: dict = {}
        self.stats = None
        self.ignored = self.placeholders = 0
        self.removals: set = set()  # ids of the nodes with an ignored or placeholder child

    @property
    def current(self) -> list:
        return self.stack[-1]

    @property
    def complete(self) -> bool:
        """Whether every begun scope has ended."""
        return len(self.stack) == 1

    def info(self, name, where) -> tuple:
        """``(mark, layer, phase, subtract, ends, slow, starts_run, text, switch,
        tracking)`` of a begin mark name (str, or bytes as read), cached per name."""
        text = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
        try:
            mark, layer, phase, switch, subtract, _ = classify(text)
        except MarkError as error:
            raise TraceFormatError(line_where(where), str(error)) from None
        layer = layer.replace("LC", "LD") if self.is_driver else layer.replace("LD", "LC")
        group = layer == "LA" and phase in _APP_GROUPS
        function = _span_function(mark)
        ends = (function, group) if function is not None or group else None
        starts_run = "[NN_LA_PO]" in text
        slow = (switch or group or starts_run or layer == "LX"
                or (layer == "LA" and phase == "PE"))
        info = self.cache[name] = (mark, layer, phase, subtract, ends, slow, starts_run,
                                   text, switch, tracking(text))
        return info

    def begin(self, ts: float, name, where) -> None:
        """Handle a ``B`` mark."""
        info = self.cache.get(name)
        if info is None:
            info = self.info(name, where)
        if info[SLOW]:
            self.begin_slow(ts, info, where)
        else:
            self.push(ts, info, where)

    def begin_slow(self, ts: float, info: tuple, where) -> None:
        """A begin with side effects: [SW], app phases, LA_PE counts, ignored marks."""
        mark, layer, phase, subtract, ends, _, _, _, switch, _ = info
        stack, app = self.stack, self.app
        if switch:  # [SW]: close the switched node, open a placeholder
            self.end(ts, where)
            self.placeholders += 1
            parent = stack[-1]
            self.removals.add(id(parent))
            node = [ts, None, None, None, None, False, (), parent, None, where, None]
            _tree.append(parent, node)
            stack.append(node)
        if layer == "LA":
            if phase in _APP_GROUPS:
                app.append(phase)
            elif phase == "PE":
                current = app[-1] if app else "PO"
                self.la_pe[current] = self.la_pe.get(current, 0) + 1
        elif layer == "LX":
            self.ignored += 1
            self.removals.add(id(stack[-1]))
        parent = stack[-1]
        node = [ts, None, layer, phase, app[-1] if app else "PO", subtract, (), parent, mark,
                where, ends]
        _tree.append(parent, node)
        stack.append(node)

    def push(self, ts: float, info: tuple, where) -> None:
        stack = self.stack
        parent = stack[-1]
        node = [ts, None, info[LAYER], info[PHASE], self.app[-1] if self.app else "PO",
                info[SUBTRACT], (), parent, info[MARK], where, info[ENDS]]
        _tree.append(parent, node)
        stack.append(node)

    def end(self, ts: float, where) -> bool:
        """Handle an ``E`` mark; False when it was an orphan dropped in tolerant mode."""
        stack = self.stack
        if len(stack) == 1:
            if not self.tolerant:
                raise TraceFormatError(line_where(where), f"E mark without a matching B on "
                                       f"thread {self.tid} (trace starts mid-call?)")
            self.orphans += 1
            return False
        node = stack.pop()
        node[_E] = ts
        if node[END] is not None:
            self.ended(node)
        return True

    def ended(self, node: list) -> None:
        """End bookkeeping: leave an app phase, record the span of a function we read."""
        function, group = node[END]
        if group and self.app:
            self.app.pop()
        if function is not None:
            key = (node[_A], function)
            spans = self.spans.get(key)
            if spans is None:
                self.spans[key] = [node]
            else:
                spans.append(node)

    def begins(self, app: str, function: str) -> list:
        return [node[_S] * 1000.0 for node in self.spans.get((app, function), ())]

    def ends(self, app: str, function: str) -> list:
        return [node[_E] * 1000.0 for node in self.spans.get((app, function), ())]

    def calculate(self) -> dict:
        """Transform the finished tree and sum its buckets (once per run)."""
        if self.stats is None:
            self.stats = (calculate(self.root, self.ignored, self.placeholders,
                                    self.removals, not self.keep_parents)
                          if self.root[_C] else {})
        return self.stats

    def stat(self, layer: str, phase: str, app: str) -> float:
        """The thread's time in bucket ``<app>_<layer>_<phase>`` (LR_PE special-cased)."""
        stats = self.calculate()
        if layer == "LR" and phase == "PE":
            return self.runtime_execution(app)
        return stats.get(f"{app}_{layer}_{phase}", 0.0)

    def runtime_execution(self, app: str) -> float:
        """startCompute-to-wait spans plus the synchronous execution calls (section 5),
        then (beyond the established tool) the synchronous ``compute``/``burstCompute``."""
        starts = self.begins(app, "ANeuralNetworksExecution_startCompute")
        waits = self.ends(app, "ANeuralNetworksEvent_wait")
        if len(waits) < len(starts) and not self.tolerant:
            raise TraceFormatError(f"thread {self.tid}", f"{len(starts)} startCompute calls "
                                   f"but {len(waits)} Event_wait calls")
        elapsed = 0.0
        for index in range(min(len(starts), len(waits))):
            elapsed = elapsed + (waits[index] - starts[index])
        for sync in SYNC_CALLS + SYNC_RUNS:
            for node in self.spans.get((app, sync), ()):  # end less begin, in ms
                elapsed = elapsed + (node[_E] * 1000.0 - node[_S] * 1000.0)
        return elapsed

    def execution_count(self, app: str) -> int:
        """Execution_create calls, or else the application's [NN_LA_PE] scopes."""
        count = len(self.spans.get((app, "ANeuralNetworksExecution_create"), ()))
        return count or self.la_pe.get(app, 0)
