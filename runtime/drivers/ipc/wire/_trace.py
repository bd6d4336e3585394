"""The IPC layer's view of ``tracing``: the scopes it needs, or no-ops if tracing is absent.

Resolved once at import; every name here is a direct reference to the tracing function so the
execute fast path pays no lookup. ``Phase`` comes from ``tracing.naming`` (always present).

Example:
    >>> with ipc(Phase.EXECUTION, "executeSynchronously"):
    ...     with hidl("IPreparedModel", "executeSynchronously", "client"):
    ...         pass
"""
from __future__ import annotations

import contextlib
import os as _os
import time as _time

from nnscope.tracing.naming import Phase

#: Seconds between two writes of a driver's spans while it serves a traced session.
FLUSH_S = 0.5

try:
    from nnscope import tracing as _tracing

    ipc = _tracing.ipc
    driver = _tracing.driver
    hidl = _tracing.hidl
    adopt = _tracing.adopt
    context = _tracing.context
    fail = _tracing.fail
    session_env = _tracing.session_env
    from nnscope.tracing import session as _session

    def flush() -> int:
        """Write buffered spans to the session directory; once the session has ended (its
        directory is gone) stop recording instead of warning on every call."""
        if not _tracing.enabled():
            return 0
        directory = _session.current_config().directory
        if directory and not _os.path.isdir(directory):
            _session.configure(_session.TraceConfig())
            return 0
        return _tracing.flush()

    def join_session(directory: str | None) -> None:
        """Write this process's spans to the session ``directory`` from now on (None: stop);
        the directory it writes to already: write out what it holds."""
        flush()
        if (directory or None) != _session.current_config().directory:
            _session.configure(_session.TraceConfig(directory=directory or None))

    _flushed = [0.0]

    def flush_due() -> None:
        """:func:`flush` at most every :data:`FLUSH_S` seconds: a driver writes its spans now
        and then, and all of them when the session is collected (``RemoteDevice.flush_trace``)."""
        if _tracing.enabled() and _time.monotonic() - _flushed[0] >= FLUSH_S:
            flush()
            _flushed[0] = _time.monotonic()

    on_gather = _tracing.on_gather

    def session_dir() -> str | None:
        """The session directory a child process started now would join."""
        return session_env().get(_session.NNSCOPE_TRACE_DIR)
    enabled = _tracing.enabled
    set_process_name = _tracing.set_process_name
    AVAILABLE = True
except (ImportError, AttributeError):  # tracing API not installed yet: spans are no-ops
    _NULL = contextlib.nullcontext()
    AVAILABLE = False

    def ipc(phase, detail):  # noqa: D103
        return _NULL

    def driver(phase, detail):  # noqa: D103
        return _NULL

    def hidl(interface, method, side):  # noqa: D103
        return _NULL

    def session_env() -> dict:  # noqa: D103
        return {}

    def adopt(parent):  # noqa: D103
        return _NULL

    def context():  # noqa: D103
        return None

    def fail(code, name) -> None:  # noqa: D103
        return None

    def flush() -> None:  # noqa: D103
        return None

    def flush_due() -> None:  # noqa: D103
        return None

    def on_gather(hook) -> None:  # noqa: D103
        return None

    def enabled() -> bool:  # noqa: D103
        return False

    def set_process_name(name: str) -> None:  # noqa: D103
        return None

    def join_session(directory) -> None:  # noqa: D103
        return None

    def session_dir():  # noqa: D103
        return None

__all__ = ["Phase", "ipc", "driver", "hidl", "adopt", "context", "fail", "session_env", "flush", "flush_due",
           "on_gather", "enabled", "join_session",
           "session_dir", "AVAILABLE"]
