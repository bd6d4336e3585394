"""The driver's execution scheduler: priorities within each client, preemption at operation
boundaries, one worker thread.

NNAPI 1.3 priorities rank the prepared models of one client (AOSP's calling UID; here, the
client process). Executions wait in their client's queue, highest priority first, then in order
of arrival; the worker serves the waiting clients in turn (round robin), so one client's
priorities never starve another client. When an execution arrives with a higher priority than
the one of the same client that is running, the running one is asked to yield
(:mod:`runtime.ops.preempt`): it stops at its next operation boundary, goes back to the front of
its priority in the queue, and is later **rerun from the start**. We chose rerun over resume: the
CPU executor writes outputs only after its last operation, so a rerun needs no saved context
that could go stale, and the work lost is at most what ran before the higher-priority arrival.

Each job runs under the service's execution lock, and its ``done`` callback gets the reply payload
on the worker thread (a fenced step queued here too, once its fences signalled). Runs outside
the queue (a burst's frames on its listener thread) take that lock through :meth:`Scheduler.exclusive`, ranked as
executions of their client: a lower-priority execution of the same client that runs is asked to
yield and none starts meanwhile, and a higher-priority one of the same client goes first. While
nothing runs or waits, ``exclusive`` is the bare lock (a burst's hot path stays one acquire).

Example::

    scheduler = Scheduler(exec_lock)
    scheduler.submit(Job(client, Priority.HIGH, run=lambda: payload, done=send_reply))
    with scheduler.exclusive(client, Priority.HIGH):   # a burst frame
        prepared.execute(request)
"""
from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import threading
import time

from nnscope.runtime.ops import preempt

_log = logging.getLogger("nn.SampleDriver")
_YIELDED = object()  # what an attempt that was preempted returns


class Job:
    """One execution: ``run()`` returns the reply payload (errors mapped to a status payload),
    ``done(payload)`` delivers it (an Exception instance if ``run`` raised nonetheless)."""

    __slots__ = ("client", "priority", "seq", "run", "done", "preemptions", "label", "estimate_ns")

    def __init__(self, client, priority: int, run, done, label: str = "execute", estimate_ns: int = 0):
        self.client, self.priority, self.run, self.done = client, int(priority), run, done
        self.seq = 0
        self.preemptions = 0
        self.label = label
        self.estimate_ns = int(estimate_ns)  # expected run time (the deadline policy's backlog)

    def __lt__(self, other: "Job") -> bool:  # heap order: higher priority, then earlier arrival
        return (-self.priority, self.seq) < (-other.priority, other.seq)


class Scheduler:
    """Per-client priority queues served by one worker thread."""

    #: Test hook: called with (client, priority) once a run outside the queue is ranked.
    forTest_ranked = None

    def __init__(self, exec_lock: threading.Lock):
        self.exec_lock = exec_lock
        self._cond = threading.Condition()
        self._queues: dict = {}  # client -> heap of Jobs
        self._turns: dict = {}  # client -> when it was last served (round robin)
        self._arrivals = itertools.count(1)
        self._running: Job | None = None
        self._outside: dict = {}  # client -> priorities of its runs outside the queue (exclusive)
        self._started_ns = 0
        self._yield = preempt.YieldRequest()
        # started now, not on first use: a driver's threads stay the same from start to exit
        threading.Thread(target=self._work, name="nn-scheduler", daemon=True).start()
        self.preemptions = 0  # in all, for the driver's log and tests

    def busy(self) -> bool:
        """True while a job runs or waits: a new execution must queue behind them."""
        return self._running is not None or bool(self._queues)

    def backlog_ns(self, client, priority: int, now_ns: int) -> int:
        """Expected wait before a new execution of ``client`` at ``priority`` starts: the rest of
        the running one (unless it would yield to it), this client's queued executions that go
        first, and one turn of every other waiting client."""
        with self._cond:
            wait = 0
            running = self._running
            if running is not None and not (running.client is client and priority > running.priority):
                wait += max(0, self._started_ns + running.estimate_ns - now_ns)
            for other, queue in self._queues.items():
                if other is client:
                    wait += sum(job.estimate_ns for job in queue if job.priority >= priority)
                else:
                    wait += min(queue).estimate_ns
            return wait

    def submit(self, job: Job) -> None:
        with self._cond:
            job.seq = next(self._arrivals)
            heapq.heappush(self._queues.setdefault(job.client, []), job)
            self._outranked(job.client, job.priority)
            self._cond.notify_all()  # the worker, and exclusive runs it may now have to follow

    def exclusive(self, client, priority: int):
        """The execution lock for a run outside the queue, ranked as ``client``'s execution at
        ``priority`` (see the module docstring); the bare lock while nothing runs or waits."""
        if self._running is None and not self._queues:
            return self.exec_lock  # a job submitted meanwhile waits for this one run
        return self._ranked(client, int(priority))

    @contextlib.contextmanager
    def _ranked(self, client, priority: int):
        with self._cond:
            self._outside.setdefault(client, []).append(priority)
            self._outranked(client, priority)
            if self.forTest_ranked is not None:
                self.forTest_ranked(client, priority)
            while self._ahead_of(client, priority):
                self._cond.wait()
        try:
            with self.exec_lock:
                yield
        finally:
            with self._cond:
                mine = self._outside[client]
                mine.remove(priority)
                if not mine:
                    del self._outside[client]
                self._cond.notify_all()

    def _outranked(self, client, priority: int) -> None:
        """Ask the running job to yield if it is ``client``'s with a lower priority."""
        running = self._running
        if running is not None and running.client is client and priority > running.priority:
            self._yield.wanted = True

    def _ahead_of(self, client, priority: int) -> bool:
        """Whether an execution of ``client`` with a higher priority runs or waits."""
        running, queue = self._running, self._queues.get(client)
        return (running is not None and running.client is client and running.priority > priority) \
            or (bool(queue) and queue[0].priority > priority)

    def _ready(self) -> list:
        """Clients whose best waiting job no run outside the queue of theirs outranks."""
        outside = self._outside
        return [client for client, queue in self._queues.items()
                if client not in outside or queue[0].priority >= max(outside[client])]

    def _take(self) -> Job:
        """The next job (caller holds the condition): the best of the ready client served
        longest ago (then: waiting longest)."""
        while not (ready := self._ready()):
            self._cond.wait()
        turns = self._turns
        client = min(ready, key=lambda c: (turns.get(c, 0), min(job.seq for job in self._queues[c])))
        if len(turns) > 4096:
            turns.clear()
        turns[client] = next(self._arrivals)
        queue = self._queues[client]
        job = heapq.heappop(queue)
        if not queue:
            del self._queues[client]
        self._running, self._yield.wanted = job, False
        self._started_ns = time.monotonic_ns()
        return job

    def _work(self) -> None:
        while True:
            with self._cond:
                job = self._take()
            payload = self._attempt(job)
            with self._cond:
                self._running = None
                self._cond.notify_all()  # exclusive runs that waited for this one
                if payload is _YIELDED:  # back in front of its priority: it keeps its arrival
                    heapq.heappush(self._queues.setdefault(job.client, []), job)
                    continue
            try:
                job.done(payload)
            except Exception as error:  # noqa: BLE001 - never lose the worker
                _log.error("%s: delivering the reply failed: %s", job.label, error)
            job = payload = None  # while idle, hold no request (nor the IBuffers it names)

    def _attempt(self, job: Job):
        """The job's payload, or _YIELDED when it stopped for higher-priority work."""
        try:
            with self.exec_lock, preempt.yielding(self._yield):
                return job.run()
        except preempt.Preempted as stop:
            job.preemptions += 1
            self.preemptions += 1
            _log.debug("%s (priority %d) yielded %s; it will rerun", job.label, job.priority, stop)
            return _YIELDED
        except Exception as error:  # noqa: BLE001 - run() maps errors itself; never lose the worker
            _log.error("%s failed in the scheduler: %s", job.label, error)
            return error  # done() answers it as GENERAL_FAILURE
