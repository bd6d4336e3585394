"""Per-thread state of one run: the call tree, begin/end times and execution counts.

:class:`ThreadState` turns one thread's B/E marks into a call tree (section 4 of the
semantics) and answers the per-thread questions of the aggregation: a bucket's time,
the special Runtime/Execution time and the execution count. ``app`` is the
application-phase stack shared by all threads of a run.

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

from parse_systrace import _tree
from parse_systrace._classify import MarkError, classify, function_name
from parse_systrace.errors import TraceFormatError, line_where

_E, _A, _C, _L, _P, _M, _S = _tree.E, _tree.A, _tree.C, _tree.L, _tree.P, _tree.M, _tree.S
SYNC_CALLS = ("ANeuralNetworksExecution_create", "ANeuralNetworksExecution_free",
              "ANeuralNetworksEvent_create", "ANeuralNetworksEvent_free",
              "ANeuralNetworksExecution_setInput", "ANeuralNetworksExecution_setOutput",
              "ANeuralNetworksExecution_setInputFromMemory",
              "ANeuralNetworksExecution_setOutputFromMemory")
_APP_GROUPS = ("PWU", "PBM")


class ThreadState:
    """One tracked thread during one run."""

    __slots__ = ("tid", "tgid", "is_driver", "app", "tolerant", "root", "stack", "current",
                 "spans", "la_pe", "stats", "orphans", "_functions", "ignored",
                 "placeholders")

    def __init__(self, tid: int, tgid: int, is_driver: bool, app: list,
                 tolerant: bool = False) -> None:
        self.tid, self.tgid, self.is_driver, self.app = tid, tgid, is_driver, app
        self.tolerant = tolerant
        self.orphans = 0
        self._functions: dict = {}
        self.reset()

    def reset(self) -> None:
        """Forget the run: a new empty tree and bookkeeping."""
        self.root = self.current = _tree.new_root()
        self.stack: list = []
        self.spans: dict = {}  # (app phase, function) -> [[begin_ms, end_ms], ...]
        self.la_pe: dict = {}
        self.stats = None
        self.ignored = self.placeholders = 0

    @property
    def complete(self) -> bool:
        """Whether every begun scope has ended."""
        return self.current is self.root

    def begin(self, ts: float, name: str, where) -> None:
        """Handle a ``B`` mark."""
        try:
            mark, layer, phase, switch, subtract, _ = classify(name)
        except MarkError as error:
            raise TraceFormatError(line_where(where), str(error)) from None
        if switch:
            self.end(ts, where)
            self._push(ts, None, None, None, False, where)
        app = self.app
        if layer == "LA" and phase in _APP_GROUPS:
            app.append(phase)
        if self.is_driver:
            layer = layer.replace("LC", "LD")
        else:
            layer = layer.replace("LD", "LC")
        if layer == "LA" and phase == "PE":
            current = app[-1] if app else "PO"
            self.la_pe[current] = self.la_pe.get(current, 0) + 1
        self._push(ts, mark, layer, phase, subtract, where)

    def _push(self, ts, mark, layer, phase, subtract, where) -> None:
        if mark is None:
            app = None
            self.placeholders += 1
        else:
            app = self.app[-1] if self.app else "PO"
            if layer == "LX":
                self.ignored += 1
        node = [ts, None, layer, phase, app, subtract, [], self.current, mark, where]
        self.current[_C].append(node)
        self.stack.append(self.current)
        self.current = node

    def end(self, ts: float, where) -> bool:
        """Handle an ``E`` mark; False when it was an orphan dropped in tolerant mode."""
        node = self.current
        if node is self.root:
            if not self.tolerant:
                raise TraceFormatError(line_where(where), f"E mark without a matching B on "
                                       f"thread {self.tid} (trace starts mid-call?)")
            self.orphans += 1
            return False
        node[_E] = ts
        self.current = self.stack.pop()
        mark = node[_M]
        if mark is None:
            return True
        if node[_L] == "LA" and node[_P] in _APP_GROUPS and self.app:
            self.app.pop()
        function = self._functions.get(mark)
        if function is None:
            function = self._functions[mark] = function_name(mark)
        key = (node[_A], function)
        pair = [node[_S] * 1000.0, ts * 1000.0]
        spans = self.spans.get(key)
        if spans is None:
            self.spans[key] = [pair]
        else:
            spans.append(pair)
        return True

    def begins(self, app: str, function: str) -> list:
        return [pair[0] for pair in self.spans.get((app, function), ())]

    def ends(self, app: str, function: str) -> list:
        return [pair[1] for pair in self.spans.get((app, function), ())]

    def calculate(self) -> dict:
        """Transform the finished tree and sum its buckets (once per run)."""
        if self.stats is None:
            self.stats = _tree.calculate(self.root, self.ignored, self.placeholders) if self.root[_C] else {}
        return self.stats

    def stat(self, layer: str, phase: str, app: str) -> float:
        """The thread's time in bucket ``<app>_<layer>_<phase>`` (LR_PE special-cased)."""
        stats = self.calculate()
        if layer == "LR" and phase == "PE":
            return self.runtime_execution(app)
        return stats.get(f"{app}_{layer}_{phase}", 0.0)

    def runtime_execution(self, app: str) -> float:
        """startCompute-to-wait spans plus the synchronous execution calls (section 5)."""
        starts = self.begins(app, "ANeuralNetworksExecution_startCompute")
        waits = self.ends(app, "ANeuralNetworksEvent_wait")
        if len(waits) < len(starts) and not self.tolerant:
            raise TraceFormatError(f"thread {self.tid}", f"{len(starts)} startCompute calls "
                                   f"but {len(waits)} Event_wait calls")
        elapsed = 0.0
        for index in range(min(len(starts), len(waits))):
            elapsed = elapsed + (waits[index] - starts[index])
        for sync in SYNC_CALLS:
            for begin, end in self.spans.get((app, sync), ()):
                elapsed = elapsed + (end - begin)
        return elapsed

    def execution_count(self, app: str) -> int:
        """Execution_create calls, or else the application's [NN_LA_PE] scopes."""
        count = len(self.spans.get((app, "ANeuralNetworksExecution_create"), ()))
        return count or self.la_pe.get(app, 0)
