"""Build or extend a fleet dataset: expand the inputs, leave out what the dataset holds, parse the
rest on the cluster, write each trace once.

The embedded cluster starts its workers as new processes (multiprocessing's spawn), which import
the caller's ``__main__``: a script that calls :func:`build` does so under
``if __name__ == "__main__":``, as with any Dask ``LocalCluster``.

Example (starts worker processes, so not run as a doctest):
    >>> build("lab.fleet", ["lab/"], pattern="{device}/{build}/{model}/*")  # doctest: +SKIP
    BuildReport(files=1010, skipped=1000, parsed=10, failed=0, duplicates=0, seconds=1.9)
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from nnscope.parse_systrace.fleet import dataset, engine
from nnscope.parse_systrace.fleet.inputs import expand


@dataclass(frozen=True)
class BuildReport:
    """What a build did: files found, left out as already in the dataset, parsed (as new
    traces), failed (new errors rows), dropped as duplicates (a trace already held), and the
    wall-clock seconds."""

    files: int
    skipped: int
    parsed: int
    failed: int
    duplicates: int
    seconds: float

    def line(self) -> str:
        """One line for the command line."""
        return (f"{self.files} files: {self.parsed} traces added, {self.failed} errors, "
                f"{self.skipped} already in the dataset, {self.duplicates} duplicates "
                f"({self.seconds:.1f} s)")


def build(target, inputs: Iterable[str], *, pattern: Optional[str] = None,
          manifest: Optional[str] = None, trace_keys: bool = False,
          scheduler: Optional[str] = None, workers: Optional[int] = None,
          tolerant: bool = False, progress: Optional[bool] = None,
          on_result: Optional[Callable[[dict], None]] = None) -> BuildReport:
    """Summarise the traces of ``inputs`` into the dataset folder ``target`` (created if needed).

    Args:
        pattern / manifest: where the group keys come from (see :mod:`.inputs`).
        trace_keys: also record the driver each trace shows (``traces.driver``).
        scheduler: ``tcp://HOST:PORT`` of an existing Dask cluster; None: an embedded one.
        workers: worker processes of the embedded cluster (default: one per CPU).
        tolerant: as ``parse_systrace --tolerant``.
        progress / on_result: see :func:`.engine.run`.
    """
    start = time.perf_counter()
    names, files = expand(list(inputs), pattern, manifest)
    known, known_ids = dataset.known_files(target)
    new = [file for file in files if _stat(file.path) not in known]
    writer = dataset.Writer(target, names, known_ids)
    written = {"traces": 0, "errors": 0}

    def add(result: dict, file) -> None:
        if writer.add(result, file.keys):
            written["errors" if result.get("error") else "traces"] += 1

    try:
        engine.run(new, add, scheduler=scheduler, workers=workers, tolerant=tolerant,
                   driver_key=trace_keys, progress=progress, on_result=on_result)
    finally:
        writer.close()
    return BuildReport(len(files), len(files) - len(new), written["traces"], written["errors"],
                       writer.duplicates, round(time.perf_counter() - start, 3))


def _stat(path: str) -> tuple:
    try:
        stat = os.stat(path)
    except OSError:
        return (path, None, None)
    return (path, stat.st_size, stat.st_mtime_ns)
