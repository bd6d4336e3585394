"""Process and thread names of a trace, and the role each thread plays for NNAPI.

Names come from the trace itself: the ``TASK-PID`` column of systrace/ftrace lines (the
thread's command name; a process is named after its main thread, tid == pid), the
``process_name`` / ``thread_name`` metadata events of Chrome JSON, or Perfetto's process
and thread track descriptors and process tree. Threads the trace does not name fall back
to ``pid N`` / ``tid N``.

The role of a thread comes from the layers of its spans (:func:`role_of`): the
application, the runtime, a driver process, or a CPU executor thread.

Example:
    >>> role_of({"LA", "LR"}), role_of({"LC"}), role_of({"LD", "LC"})
    ('application', 'CPU executor', 'driver')
"""
from __future__ import annotations

import gzip
import json
import re

#: How much of the file a name search reads at most (names appear early in a trace).
SEARCH_BYTES = 1 << 27
_METADATA = re.compile(rb'\{[^{}]*"ph"\s*:\s*"M"[^{}]*\{[^{}]*\}[^{}]*\}')
_METADATA_ALT = re.compile(rb'\{[^{}]*\{[^{}]*\}[^{}]*"ph"\s*:\s*"M"[^{}]*\}')


def read_head(path, limit: int = SEARCH_BYTES) -> bytes:
    """Up to ``limit`` bytes of the trace content (gzip unwrapped)."""
    with open(path, "rb") as handle:
        magic = handle.read(2)
        handle.seek(0)
        if magic == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=handle) as unzipped:
                return unzipped.read(limit)
        return handle.read(limit)


def task_names(data: bytes, tids) -> dict:
    """``tid -> command name`` from the first systrace/ftrace line of each thread."""
    found = {}
    for tid in tids:
        pattern = rb"\n *([^\n]{1,16}?)-%d +(?:\(|\[)" % tid
        match = re.search(pattern, data)
        if match:
            found[tid] = match.group(1).decode("utf-8", "replace").strip()
    return found


def chrome_names(data: bytes) -> tuple:
    """``({pid: name}, {tid: name})`` from Chrome JSON metadata events."""
    processes, threads = {}, {}
    for pattern in (_METADATA, _METADATA_ALT):
        for match in pattern.finditer(data):
            try:
                event = json.loads(match.group(0))
            except ValueError:
                continue
            name = (event.get("args") or {}).get("name")
            if not isinstance(name, str):
                continue
            if event.get("name") == "process_name":
                processes[event.get("pid")] = name
            elif event.get("name") == "thread_name":
                threads[event.get("tid")] = name
    return processes, threads


def perfetto_names(data: bytes) -> tuple:
    """``({pid: name}, {tid: name})`` from Perfetto descriptors and process trees."""
    try:
        from google.protobuf.message import DecodeError  # noqa: PLC0415
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2  # noqa: PLC0415
    except ImportError:
        return {}, {}
    try:
        trace = perfetto_trace_pb2.Trace.FromString(data)
    except DecodeError:
        return {}, {}
    processes, threads = {}, {}
    for packet in trace.packet:
        track = packet.track_descriptor
        if track.HasField("process") and track.process.process_name:
            processes[track.process.pid] = track.process.process_name
        if track.HasField("thread") and track.thread.thread_name:
            threads[track.thread.tid] = track.thread.thread_name
        for process in packet.process_tree.processes:
            if process.cmdline:
                processes.setdefault(process.pid, process.cmdline[0])
        for thread in packet.process_tree.threads:
            if thread.name:
                threads.setdefault(thread.tid, thread.name)
    return processes, threads


def lane_names(path, format_name: str, keys) -> tuple:
    """``({tgid: process name}, {tid: thread name})`` for the lanes ``keys`` (tgid, tid)."""
    try:
        data = read_head(path)
    except (OSError, EOFError, gzip.BadGzipFile):
        return {}, {}
    if format_name == "chrome_json":
        return chrome_names(data)
    if format_name == "perfetto":
        return perfetto_names(data)
    if format_name in ("systrace", "ftrace"):
        threads = task_names(data, sorted({tid for _, tid in keys} | {tgid for tgid, _ in keys}))
        processes = {tgid: threads[tgid] for tgid, _ in keys if tgid in threads}
        return processes, threads
    return {}, {}


def role_of(layers) -> str:
    """What a thread is for NNAPI, from the set of layer codes of its spans."""
    if "LA" in layers:
        return "application"
    if "LD" in layers:
        return "driver"
    if "LR" in layers:
        return "runtime"
    if "LC" in layers:
        return "CPU executor"
    if "LI" in layers:
        return "IPC"
    return "other"
