"""Starting the driver processes a command uses, with one line on a terminal when it takes long.

``nnscope run`` and ``nnscope devices`` start their drivers through :func:`start_drivers`
(``manager.start_devices``: all at once, traced as the runtime's Initialization). A driver
process imports the runtime before it serves, so the first start of eight takes seconds on a
small machine; when it is still going after ``$NNSCOPE_STARTUP_NOTE_S`` seconds (default 1) and
stderr is a terminal, one line says so: ``nnscope: starting 8 driver processes...``. Piped or
redirected stderr gets nothing, as the bench's progress bar.

Example:
    >>> import io
    >>> from nnscope.runtime.manager import get_device
    >>> start_drivers([get_device("nnapi-reference")], io.StringIO())  # in-process: nothing to start
    0
"""
from __future__ import annotations

import os
import sys
import threading
from typing import IO, Sequence

from nnscope.runtime import manager

STARTUP_NOTE_S = "NNSCOPE_STARTUP_NOTE_S"
"""Environment variable: seconds of driver start-up after which ``nnscope run`` and ``nnscope
devices`` say, on a terminal, that driver processes are starting (default 1; 0 says it always)."""
_DEFAULT_NOTE_S = 1.0


def note_after_s() -> float:
    """``$NNSCOPE_STARTUP_NOTE_S`` as seconds (the default for a missing or bad value)."""
    try:
        return max(0.0, float(os.environ.get(STARTUP_NOTE_S, _DEFAULT_NOTE_S)))
    except ValueError:
        return _DEFAULT_NOTE_S


def start_drivers(devices: Sequence, stream: IO[str] | None = None) -> int:
    """Start the processes of ``devices`` that are not running and wait until they serve; on a
    terminal ``stream`` (default stderr), one line when that takes long. Returns how many
    processes were started."""
    stream = sys.stderr if stream is None else stream
    pending = [device for device in devices if not device.launched()]
    note = None
    if pending and stream.isatty():
        line = f"nnscope: starting {len(pending)} driver process{'es' if len(pending) > 1 else ''}..."
        note = threading.Timer(note_after_s(), lambda: print(line, file=stream, flush=True))
        note.daemon = True
        note.start()
    try:
        manager.start_devices(devices)
    finally:
        if note is not None:
            note.cancel()
            note.join()
    return len(pending)
