"""The fleet's engine: Dask (``distributed``), one task per trace, results written as they come.

:func:`cluster` gives a ``distributed.Client``: by default of an embedded ``LocalCluster``
sized to the machine (one worker process per CPU this process may use, one thread each, so a
task parses on one core; tasks are not held back: :data:`SATURATION`), or of an existing cluster (``--scheduler tcp://HOST:PORT``; its
workers need ``pip install 'nnscope[fleet]'`` and the traces on a path they can read).

:func:`run` submits :func:`.task.parse_trace` for every file and hands each result to the
caller as it completes (the caller writes it: :class:`.dataset.Writer`), releasing the task
at once, so neither the client nor the cluster holds more than the tasks in flight. A worker
that dies has its tasks run again elsewhere by the scheduler; a task whose workers keep dying
(``distributed.scheduler.allowed-failures``) becomes an error row without a modification
time, so the next build tries that file again. A progress bar (stderr, when it is a terminal)
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
import os
import sys
from typing import Callable, Iterator, Optional

from nnscope.parse_systrace.fleet.task import parse_trace


#: The scheduler setting that holds tasks back until a worker thread is free (Dask's "root task
#: queuing"). Our tasks are short (tens of ms) and independent, so the embedded cluster sets it to
#: infinity: every task goes to a worker at once (work stealing balances them) and no worker
#: waits a scheduler round trip between two traces; ``benchmarks/fleet.py`` measures the engine's
#: cost. An existing cluster keeps its own setting (``DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION
#: =inf dask scheduler`` gives the same).
SATURATION = "distributed.scheduler.worker-saturation"
#: The workers' statistical profiler (a stack sample every 10 ms): the embedded cluster turns it
#: off, which makes a worker's parse about 8 % faster (``benchmarks/fleet.py``).
PROFILE = "distributed.worker.profile.enabled"


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

    with dask.config.set({SATURATION: float("inf"), PROFILE: False}), LocalCluster(
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

    counts = {"done": 0, "failed": 0}
    if not files:
        return counts
    with cluster(scheduler, workers) as client, tqdm(
            total=len(files), unit="trace", file=sys.stderr, dynamic_ncols=True,
            disable=(not sys.stderr.isatty()) if progress is None else not progress) as bar:
        futures = client.map(parse_trace, [file.path for file in files], tolerant=tolerant,
                             driver_key=driver_key, pure=False, retries=1)
        owner = {future.key: file for future, file in zip(futures, files)}
        completed = as_completed(futures, with_results=True, raise_errors=False)
        del futures
        for future, result in completed:
            file = owner.pop(future.key)
            if future.status != "finished":
                result = engine_error(file.path, future.exception())
            future.release()
            add(result, file)
            counts["done"] += 1
            counts["failed"] += bool(result.get("error"))
            bar.update(1)
            bar.set_postfix(done=counts["done"] - counts["failed"], failed=counts["failed"],
                            remaining=len(files) - counts["done"], refresh=False)
            if on_result is not None:
                on_result(dict(counts, remaining=len(files) - counts["done"]))
    return counts


def engine_error(path: str, error: BaseException) -> dict:
    """The error row of a task the engine could not run (no size or time: tried again next
    build)."""
    from nnscope.parse_systrace.fleet.task import one_line

    return dict(path=path, size_bytes=None, mtime_ns=None, trace_id=None, runs=[], phases={},
                error=f"not parsed: {one_line(error)}")
