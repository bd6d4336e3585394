"""Helpers of the fleet tests: a dataset's tables as comparable data, and a Dask cluster made
of the ``distributed`` command-line tools (``dask scheduler``, ``dask worker``)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from nnscope.parse_systrace.fleet import query

#: Bounded waits (seconds) for the cluster's processes.
START_TIMEOUT, STOP_TIMEOUT = 60, 5
DASK = str(Path(sys.executable).with_name("dask"))


def tables(dataset) -> dict:
    """Every table's rows, sorted, without the columns that differ from run to run (the
    task's seconds); paths made relative to nothing (kept absolute: both builds read the same)."""
    columns, traces = query(dataset, "SELECT * EXCLUDE (parse_s) FROM traces ORDER BY trace_id")
    return {
        "traces": (columns, traces),
        "runs": query(dataset, "SELECT * FROM runs ORDER BY trace_id, run"),
        "phases": query(dataset, "SELECT * FROM phases ORDER BY trace_id, run, app_phase, phase, layer"),
        "errors": query(dataset, "SELECT * FROM errors ORDER BY path"),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DaskCluster:
    """``dask scheduler`` and ``dask worker`` processes on 127.0.0.1 (no nanny: a killed worker
    stays dead), always stopped by :meth:`stop`."""

    def __init__(self, folder: Path, workers: int = 2) -> None:
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.folder = folder
        self.processes: list[subprocess.Popen] = []
        self._start([DASK, "scheduler", "--host", "127.0.0.1", "--port", self.address.rpartition(":")[2],
                     "--no-dashboard"], "scheduler")
        self.workers = [self._start([DASK, "worker", self.address, "--nthreads", "1", "--no-nanny",
                                     "--no-dashboard", "--host", "127.0.0.1",
                                     "--local-directory", str(folder / f"worker{n}")], f"worker{n}")
                        for n in range(workers)]
        self._wait_for_workers(workers)

    def _start(self, command: list[str], name: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "wb")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder,
                                   start_new_session=True)
        log.close()
        self.processes.append(process)
        return process

    def _wait_for_workers(self, count: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=START_TIMEOUT) as client:
            client.wait_for_workers(count, timeout=START_TIMEOUT)

    def kill_worker(self, index: int) -> None:
        os.kill(self.workers[index].pid, signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM the workers, then the scheduler; SIGKILL what is left after a bounded wait."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT)
