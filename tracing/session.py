"""Trace sessions: switch recording on, gather the events of every process, export.

A :class:`TraceSession` owns a directory. Child processes started with
:func:`session_env` join it: they record from import, and :func:`flush` (also run
at exit) appends their events to a file there, which :meth:`TraceSession.collect`
merges with this process's own buffers. The environment is read once, at import;
tests change it with :func:`override_environment`.

Example:
    >>> import os, subprocess, sys, tempfile
    >>> from nnscope import tracing
    >>> driver = "from nnscope import tracing\\nwith tracing.driver(tracing.Phase.EXECUTION, 'execute'): pass"
    >>> with tracing.TraceSession() as session:
    ...     with tracing.application(tracing.Phase.OVERALL, "mobilenet"):
    ...         _ = subprocess.run([sys.executable, "-c", driver], env={**os.environ, **tracing.session_env()})
    >>> sorted(span.name for span in session.collect().spans())  # the child's span too
    ['[NN_LA_PO]mobilenet', '[NN_LD_PE]execute']
    >>> with tempfile.TemporaryDirectory() as tmp:  # format from the extension
    ...     session.export(os.path.join(tmp, "trace.json"))
    <ExportResult.SUCCESS: 0>
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from nnscope.tracing import _buffer, _childfile
from nnscope.tracing.exporters import ExportResult, TraceExporter, exporter_for_path, otlp_endpoint
from nnscope.tracing.span import ThreadTrack, TraceData

_log = logging.getLogger(__name__)

NNSCOPE_TRACE = "NNSCOPE_TRACE"
"""
.. envvar:: NNSCOPE_TRACE

Output file: trace the whole program from import and export at exit, in the format given by
the file's extension (``.json`` Chrome JSON, ``.html`` systrace HTML, ``.txt`` ftrace text,
``.perfetto-trace`` Perfetto), or ``otlp`` / ``otlp://HOST:PORT``: send it over OTLP/HTTP
(``otlp`` alone: ``$OTEL_EXPORTER_OTLP_ENDPOINT``, else ``http://localhost:4318``).
Ignored when :envvar:`NNSCOPE_TRACE_DIR` is set.
"""

NNSCOPE_TRACE_DIR = "NNSCOPE_TRACE_DIR"
"""
.. envvar:: NNSCOPE_TRACE_DIR

Session directory this process contributes to: recording is on from import and
:func:`tracing.flush` (and exit) appends the events to ``trace-<pid>.jsonl`` there.
:func:`session_env` sets it for child processes.
"""


@dataclass(frozen=True)
class TraceConfig:
    """The tracing settings read from the environment."""

    output: str | None = None
    directory: str | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "TraceConfig":
        """Read :data:`NNSCOPE_TRACE` and :data:`NNSCOPE_TRACE_DIR` (empty means unset)."""
        return cls(environ.get(NNSCOPE_TRACE) or None, environ.get(NNSCOPE_TRACE_DIR) or None)


_lock = threading.RLock()
_active: list["TraceSession"] = []   # started and not stopped, outermost first
_gather_hooks: list = []  # weak references to callables run before a session reads its children
_config = TraceConfig()
_contributor_dir: str | None = None  # set when this process joins a session from outside
_program: "TraceSession | None" = None
#: The recorder's switch and clock (``tracing.tracer`` attaches them when it loads).
_switch: Callable[[bool], None] = lambda flag: None
_clock: Callable[[], int] = time.monotonic_ns


def attach_recorder(switch: Callable[[bool], None], clock: Callable[[], int]) -> None:
    """Let this module switch the recorder on and off (now, and whenever that changes) and
    time sessions with the recorder's clock. Called once, by :mod:`tracing.tracer`."""
    global _switch, _clock
    _switch, _clock = switch, clock
    _update_enabled()


def recording() -> bool:
    """Whether spans are recorded: a session is active or this process joined one."""
    return bool(_active) or _contributor_dir is not None


class TraceSession:
    """Record spans of this process and its session children between start and stop.

    Sessions may nest; an inner one sees the events from its own start and shares the
    outermost session's directory.
    """

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        """Create a session (not started).

        Args:
            directory: where children write their events; default: a temporary
                directory removed when the session stops.
        """
        self._requested = os.fspath(directory) if directory is not None else None
        self._directory: str | None = None
        self._owns_directory = False
        self._start_ns = 0
        self._data: TraceData | None = None

    @property
    def directory(self) -> str | None:
        """The session directory children write to (None before start)."""
        return self._directory

    @property
    def active(self) -> bool:
        return self in _active

    def start(self) -> "TraceSession":
        """Switch recording on; returns self.

        Raises:
            RuntimeError: when the session was already started.
        """
        with _lock:
            if self._directory is not None:
                raise RuntimeError("a TraceSession can be started only once")
            if _active:
                self._directory = _active[0].directory
            elif self._requested is not None:
                os.makedirs(self._requested, exist_ok=True)
                self._directory = self._requested
            else:
                self._directory = _contributor_dir or tempfile.mkdtemp(prefix="nnscope-trace-")
                self._owns_directory = _contributor_dir is None
            _active.append(self)
            self._start_ns = _clock()
            _update_enabled()
        return self

    def stop(self) -> TraceData:
        """Collect the trace, switch recording off if no other session is active.

        Returns:
            The session's trace, also returned by later :meth:`collect` calls.
        """
        if self._data is None and self.active:
            _before_gather()
        with _lock:
            if self._data is not None or not self.active:
                return self.collect()
            self._data = self._gather()
            _active.remove(self)
            _update_enabled()
            if not recording():
                _buffer.clear()
            if self._owns_directory:
                shutil.rmtree(self._directory, ignore_errors=True)
        return self._data

    def __enter__(self) -> "TraceSession":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """Environment variables that make a child process join this session."""
        return {NNSCOPE_TRACE_DIR: self._directory} if self._directory else {}

    def collect(self) -> TraceData:
        """Return all threads of all processes recorded so far (or at stop)."""
        if self._data is not None:
            return self._data
        if self._directory is None:
            return TraceData()
        _before_gather()
        with _lock:
            return self._gather()

    def export(self, target: str | os.PathLike | TraceExporter) -> ExportResult:
        """Export :meth:`collect` to a file (format from its extension) or an exporter.

        Raises:
            ValueError: when the file extension names no known format.
        """
        if isinstance(target, TraceExporter):
            exporter = target
        else:
            exporter = exporter_for_path(os.fspath(target))(os.fspath(target))
        return exporter.export(self.collect())

    def _gather(self) -> TraceData:
        tracks, processes = _childfile.read_tracks(self._directory)
        by_key = {(t.pid, t.tid): t for t in tracks}
        for own in _buffer.snapshot():
            known = by_key.get((own.pid, own.tid))
            if known is None:
                tracks.append(own)
            else:
                known.events.extend(own.events)
                known.notes.extend(own.notes)
        processes.setdefault(os.getpid(), _buffer.process_name())
        threads = [t for t in (_balanced(t, self._start_ns) for t in tracks) if t.events]
        threads.sort(key=lambda t: (t.pid, t.events[0][0]))
        return TraceData({pid: processes[pid] for pid in sorted(processes)}, threads)


def on_gather(hook) -> None:
    """Run ``hook()`` (a bound method, held weakly) before a session reads its children's files:
    a process whose children write their spans now and then has them write out the rest (the
    runtime asks its driver processes)."""
    _gather_hooks.append(weakref.WeakMethod(hook))


def _before_gather() -> None:
    for ref in list(_gather_hooks):
        hook = ref()
        if hook is None:
            _gather_hooks.remove(ref)
            continue
        try:
            hook()
        except Exception as error:  # noqa: BLE001 - a child that cannot flush loses its last spans only
            _log.warning("before collecting the trace: %s", error)


def _balanced(track: ThreadTrack, since_ns: int) -> ThreadTrack:
    """Drop events before ``since_ns`` and ends whose begin is not in the track."""
    depth, events = 0, []
    for event in track.events:
        if event[0] < since_ns:
            continue
        if event[1] is None:
            if depth == 0:
                continue
            depth -= 1
        else:
            depth += 1
        events.append(event)
    return ThreadTrack(track.pid, track.tid, track.name, events, track.notes)


def _update_enabled() -> None:
    _switch(recording())


def session_env() -> dict[str, str]:
    """Env vars for a child process so that its spans join the current session.

    Empty when no session is active. Use as ``Popen(env={**os.environ, **session_env()})``.
    """
    with _lock:
        directory = _active[0].directory if _active else _contributor_dir
    return {NNSCOPE_TRACE_DIR: directory} if directory else {}


def flush() -> int:
    """In a process that joined a session from outside, write its buffered events there.

    Returns:
        The number of events written (0 when this process writes to no session directory
        or on an I/O error, which is logged).
    """
    with _lock:
        directory = _contributor_dir
        if directory is None:
            return 0
        tracks = _buffer.snapshot(drain=True)
        try:
            return _childfile.append_tracks(directory, tracks, _buffer.process_name())
        except OSError as error:
            if not os.path.isdir(directory):  # the session ended: its owner removed the directory
                _leave_ended_session(directory, sum(len(t.events) for t in tracks))
            else:
                _log.warning("cannot write trace events to %s: %s", directory, error)
            return 0


def _leave_ended_session(directory: str, events: int) -> None:
    """Stop recording for a session that has ended (e.g. a driver process outliving the
    ``TraceSession`` that started it): what was recorded since its end belongs to no trace."""
    global _config, _contributor_dir
    _contributor_dir, _config = None, TraceConfig()
    _update_enabled()
    if not recording():
        _buffer.clear()
    _log.debug("trace session %s has ended; %d events recorded after it are dropped", directory, events)


def configure(config: TraceConfig) -> None:
    """Apply ``config`` like at import: end the previous env-started tracing, start the new one.

    An ``NNSCOPE_TRACE`` program session being replaced is exported, as at exit.
    """
    global _config, _contributor_dir, _program
    with _lock:
        flush()
        if _program is not None:
            _export_program()
        _contributor_dir = None
        _config = config
        if config.directory:
            _contributor_dir = config.directory
        elif config.output and _known_format(config.output):
            _program = TraceSession().start()
        _update_enabled()
        if not recording():
            _buffer.clear()


def current_config() -> TraceConfig:
    """The configuration in force."""
    return _config


@contextlib.contextmanager
def override_environment(environ: Mapping[str, str]) -> Iterator[TraceConfig]:
    """Run a block as if the process had started with ``environ`` (for tests).

    Sessions started in the block should be stopped in it. On exit the previous
    configuration is applied again (an ``NNSCOPE_TRACE`` output is written then).
    """
    previous = _config
    config = TraceConfig.from_environ(environ)
    configure(config)
    try:
        yield config
    finally:
        configure(previous)


def _known_format(path: str) -> bool:
    try:
        if otlp_endpoint(path) is None:
            exporter_for_path(path)
    except ValueError as error:
        _log.warning("%s=%s not traced: %s", NNSCOPE_TRACE, path, error)
        return False
    return True


def _export_program() -> None:
    global _program
    session, _program = _program, None
    session.stop()
    endpoint = otlp_endpoint(_config.output)
    if endpoint is not None:
        from nnscope.tracing.exporters.otel import send  # noqa: PLC0415 - OpenTelemetry on demand

        if send(session.collect(), endpoint) is not ExportResult.SUCCESS:
            _log.warning("the OTLP collector at %s did not take the trace", endpoint)
    elif session.export(_config.output) is not ExportResult.SUCCESS:
        _log.warning("could not write the trace to %s", _config.output)


def _at_exit() -> None:
    with _lock:
        flush()
        if _program is not None:
            _export_program()


def _after_fork_in_child() -> None:
    """A forked child joins its parent's session as a contributor."""
    global _lock, _contributor_dir, _program
    _lock = threading.RLock()
    if _active:
        _contributor_dir = _active[0].directory
    _active.clear()
    _program = None
    _update_enabled()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
configure(TraceConfig.from_environ(os.environ))
