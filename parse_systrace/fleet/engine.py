"""The fleet's engine: Dask (``distributed``), a task per few traces, results written as they come.

:func:`cluster` gives a ``distributed.Client``: by default of an embedded ``LocalCluster``
sized to the machine (one worker process per CPU this process may use, one thread each, so a
task parses on one core; a worker holds two tasks at most: :data:`TASKS_IN_FLIGHT`; glibc keeps
its memory settings: :data:`MALLOC_TRIM`; housekeeping is spaced out: :data:`HOUSEKEEPING`), or
of an existing cluster (``--scheduler tcp://HOST:PORT``; its workers need ``pip install
'nnscope[fleet]'`` and the traces on a path they can read).

:func:`run` submits :func:`.task.parse_traces` for consecutive batches of the files (:func:`batches`:
up to :data:`BATCH_BYTES` each, so the scheduler, the client and the workers' event loops handle a
message per batch, not per trace) and hands each trace's result to the caller as its batch
completes (the caller writes it: :class:`.dataset.Writer`), releasing the task at once, so neither
the client nor the cluster holds more than the tasks in flight. A worker that dies has its tasks
run again elsewhere by the scheduler; a batch whose workers keep dying
(``distributed.scheduler.allowed-failures``) is submitted again one trace per task, and a trace
whose task still fails becomes an error row without a modification time, so the next build tries
that file again. A progress bar (stderr, when it is a terminal)
shows traces done, failed and remaining.

Example (starts worker processes, so not run as a doctest):
    >>> from nnscope.parse_systrace.fleet.inputs import InputFile
    >>> results = []
    >>> run([InputFile("trace.html")], lambda result, file: results.append(result))  # doctest: +SKIP
    {'done': 1, 'failed': 0}
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
from typing import Callable, Iterator, Optional

from nnscope.parse_systrace.fleet.task import parse_traces


#: Dask's "root task queuing": the scheduler hands a worker thread this many tasks at most
#: (rounded up), the others wait at the scheduler for the first worker to free a slot. The
#: embedded cluster sets 2 (the running task and the next, so no worker waits a round trip between
#: two tasks), so the last tasks go to whichever worker is free first. With infinity (every task
#: sent at once, work stealing to balance) one of two workers sat idle for the last 1.1-1.9 s of a
#: 46-50 s build; with queuing 0.3 s, and 0.02-0.12 s with tasks that shrink towards the end
#: (:func:`batches`). An existing cluster keeps its own setting.
SATURATION = "distributed.scheduler.worker-saturation"
TASKS_IN_FLIGHT = 2.0
#: The workers' statistical profiler (a stack sample every 10 ms): the embedded cluster turns it
#: off, which makes a worker's parse about 8 % faster (``benchmarks/fleet.py``).
PROFILE = "distributed.worker.profile.enabled"
#: The glibc trim threshold ``distributed`` gives its worker processes (64 kB: freed memory goes back
#: to the OS at once, and large allocations are no longer reused): a worker's parse then page-faults
#: its buffers in again for every trace (about 10x the page faults and 10 % more CPU than the same
#: parse in the client). The embedded cluster unsets it (None), leaving glibc's adaptive default;
#: the workers' RSS stays bounded (``benchmarks/fleet.py`` samples it). An existing cluster keeps
#: its own setting.
MALLOC_TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
#: The housekeeping every process of a Dask cluster does on its event loop (``distributed``'s
#: defaults: a tick every 20 ms that detects a blocked loop, a psutil sample every 500 ms for the
#: dashboard, a memory check every 100 ms in each worker and nanny). An idle embedded 2-worker
#: cluster spends 6.6 % of a core on them; each wake-up also takes the GIL from the worker's parse.
#: The embedded cluster (no dashboard, tasks of a second at most) spaces them out: 1.0 % of a
#: core idle, and a 2-worker build of 288 lab traces took 6.6-6.8 s against 6.8-7.4 s, the
#: workers' CPU 6 % less (three alternating pairs). A worker past its memory limit is still
#: stopped within a second.
HOUSEKEEPING = {"distributed.admin.tick.interval": "1s",
                "distributed.admin.system-monitor.interval": "5s",
                "distributed.worker.memory.monitor-interval": "1s"}
#: Bytes of trace files per task (a larger file is a task of its own): a trace takes tens of ms,
#: the engine's round trip for a task about a ms of the client's, the scheduler's and a worker's
#: time, on the same CPUs (``benchmarks/fleet.py`` measures the engine's cost).
BATCH_BYTES = 8 << 20
#: Tasks per worker thread at least, so that the last batches spread over the workers (see
#: :func:`batches`).
TASKS_PER_THREAD = 4


def default_workers() -> int:
    """One worker per CPU this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def cluster(scheduler: Optional[str] = None, workers: Optional[int] = None,
            timeout: float = 30.0) -> Iterator:
    """A ``distributed.Client``: of the cluster at ``scheduler``, else of an embedded
    ``LocalCluster`` of ``workers`` processes (default :func:`default_workers`), one thread each."""
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler, timeout=timeout) as client:
            yield client
        return
    import dask

    settings = {SATURATION: TASKS_IN_FLIGHT, PROFILE: False, MALLOC_TRIM: None, **HOUSEKEEPING}
    with dask.config.set(settings), LocalCluster(
            n_workers=workers or default_workers(), threads_per_worker=1, processes=True,
            dashboard_address=None, host="127.0.0.1", silence_logs=logging.ERROR) as local, \
            Client(local) as client:
        yield client


def run(files: list, add: Callable[[dict, object], object], *, scheduler: Optional[str] = None,
        workers: Optional[int] = None, tolerant: bool = False, driver_key: bool = False,
        progress: Optional[bool] = None, on_result: Optional[Callable[[dict], None]] = None) -> dict:
    """Parse ``files`` (:class:`.inputs.InputFile`) on the cluster.

    Args:
        add: called as ``add(result, file)`` in the client for each trace, in completion order.
        progress: show the progress bar (None: when stderr is a terminal).
        on_result: called with the running counts after each result (tests use it to act
            mid-run).

    Returns:
        ``{"done": n, "failed": n}`` (failed: results that are errors).
    """
    from distributed import as_completed
    from tqdm import tqdm

    counts = {"done": 0, "failed": 0, "total": len(files)}
    if not files:
        return {"done": 0, "failed": 0}
    with cluster(scheduler, workers) as client, tqdm(
            total=len(files), unit="trace", file=sys.stderr, dynamic_ncols=True,
            disable=(not sys.stderr.isatty()) if progress is None else not progress) as bar:
        tasks = _Tasks(client, tolerant=tolerant, driver_key=driver_key)
        completed = as_completed(tasks.submit(batches(files, worker_threads(client))),
                                 with_results=True, raise_errors=False)
        for future, results in completed:
            for result, file in tasks.results(future, results, completed.add):
                add(result, file)
                _count(counts, result, bar, on_result)
    return {"done": counts["done"], "failed": counts["failed"]}


class _Tasks:
    """The batches submitted to the cluster, by task key."""

    def __init__(self, client, **options) -> None:
        self.client, self.options, self.owner = client, options, {}

    def submit(self, groups: list) -> list:
        """Futures of :func:`.task.parse_traces` for each group of files."""
        futures = self.client.map(parse_traces, [[file.path for file in group] for group in groups],
                                  **self.options, pure=False, retries=1)
        self.owner.update((future.key, group) for future, group in zip(futures, groups))
        return futures

    def results(self, future, results, resubmitted: Callable) -> list:
        """``[(result, file), ...]`` of a completed task (released); a failed batch is given to
        ``resubmitted`` again one trace per task (no result yet), a failed single trace is an
        error row."""
        group = self.owner.pop(future.key)
        if future.status != "finished":
            if len(group) > 1:
                future.release()
                for retry in self.submit([[file] for file in group]):
                    resubmitted(retry)
                return []
            results = [engine_error(group[0].path, future.exception())]
        future.release()
        return list(zip(results, group))


def _count(counts: dict, result: dict, bar, on_result) -> None:
    counts["done"] += 1
    counts["failed"] += bool(result.get("error"))
    remaining = counts["total"] - counts["done"]
    bar.update(1)
    bar.set_postfix(done=counts["done"] - counts["failed"], failed=counts["failed"],
                    remaining=remaining, refresh=False)
    if on_result is not None:
        on_result({"done": counts["done"], "failed": counts["failed"], "remaining": remaining})


def worker_threads(client) -> int:
    """The worker threads of the cluster (at least 1)."""
    return max(1, sum(client.nthreads().values()))


def batches(files: list, threads: int) -> list:
    """``files`` in consecutive groups, a task each, of at most as many files as gives each of
    ``threads`` :data:`TASKS_PER_THREAD` tasks, and of up to :data:`BATCH_BYTES` or, when less, a
    ``threads * TASKS_PER_THREAD``-th of the bytes not yet grouped (a larger file alone): the tasks
    shrink towards the end, down to single traces, so the workers finish together."""
    sizes = [_size(file.path) for file in files]
    shares = threads * TASKS_PER_THREAD
    most = max(1, math.ceil(len(files) / shares))
    groups: list = []
    group: list = []
    size, budget, left = 0, 0, sum(sizes)
    for file, length in zip(files, sizes):
        if group and (len(group) == most or size + length > budget):
            groups.append(group)
            group, size = [], 0
        if not group:
            budget = min(BATCH_BYTES, left // shares)
        group.append(file)
        size += length
        left -= length
    if group:
        groups.append(group)
    return groups


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:  # the task makes it an error row
        return 0


def engine_error(path: str, error: BaseException) -> dict:
    """The error row of a task the engine could not run (no size or time: tried again next
    build)."""
    from nnscope.parse_systrace.fleet.task import one_line

    return dict(path=path, size_bytes=None, mtime_ns=None, trace_id=None, runs=[], phases={},
                error=f"not parsed: {one_line(error)}")
