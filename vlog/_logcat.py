"""logcat-style output for vlog: threadtime formatter, ANDROID_LOG_TAGS filter, handler.

Design: the vlog logger for log tag ``ExecutionPlan`` is ``nn.ExecutionPlan``. Its
parent ``nn`` carries nnscope's single handler and stops propagation, so no line is
printed twice even when the application configured the root logger. The formatter
prints the bare log tag (``ExecutionPlan``), as logcat would.

Example:
    >>> import io, logging
    >>> stream = io.StringIO()
    >>> handler = install(stream, "ExecutionPlan:I *:S")
    >>> logging.getLogger("nn.ExecutionPlan").info("step %d", 1)
    >>> logging.getLogger("nn.CpuExecutor").info("dropped")
    >>> stream.getvalue().rstrip().endswith("I ExecutionPlan: step 1")
    True
    >>> uninstall()
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import IO, NamedTuple

#: Parent logger of every vlog logger; carries nnscope's handler.
ROOT_LOGGER = "nn"
PREFIX = ROOT_LOGGER + "."
#: A level above every real one: logcat's ``S`` (silent).
SILENT = logging.CRITICAL + 1000
PRIORITIES = {"V": 0, "D": logging.DEBUG, "I": logging.INFO, "W": logging.WARNING,
              "E": logging.ERROR, "F": logging.CRITICAL, "S": SILENT}
_LETTERS = ((logging.DEBUG, "V"), (logging.INFO, "D"), (logging.WARNING, "I"),
            (logging.ERROR, "W"), (logging.CRITICAL, "E"))
_lock = threading.Lock()
_we_set_level = False
_warned = logging.getLogger(PREFIX + "VLog")


def level_letter(levelno: int) -> str:
    """Maps a ``logging`` level to logcat's letter (V D I W E F)."""
    for bound, letter in _LETTERS:
        if levelno < bound:
            return letter
    return "F"


def tag_of(record: logging.LogRecord) -> str:
    """The log tag of a record: ``extra`` ``nn_tag`` or the logger name minus ``nn.``."""
    tag = getattr(record, "nn_tag", None)
    return tag if tag else record.name.removeprefix(PREFIX)


class ThreadtimeFormatter(logging.Formatter):
    """Formats like ``logcat -v threadtime``: ``MM-DD HH:MM:SS.mmm  PID  TID L Tag     : msg``.

    PID and TID are the OS ids (the TID comes from the ``nn_tid`` extra that
    :func:`vlog.log` records, else from the formatting thread). The tag is padded
    to 8 columns as logcat does; a multi-line message gets the header on each line.
    """

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(record.created))
        pid = record.process if record.process is not None else os.getpid()
        tid = getattr(record, "nn_tid", None) or threading.get_native_id()
        head = (f"{stamp}.{int(record.msecs):03d} {pid:5d} {tid:5d} "
                f"{level_letter(record.levelno)} {tag_of(record):<8}: ")
        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return "\n".join(head + line for line in text.splitlines() or [""])


class LogTagRules(NamedTuple):
    """Parsed ``ANDROID_LOG_TAGS``: default level, per-tag levels, rejected tokens."""

    default: int
    per_tag: dict[str, int]
    rejected: tuple[str, ...]


def parse_log_tags(spec: str | None) -> LogTagRules:
    """Parses an ``ANDROID_LOG_TAGS`` filter spec such as ``"ExecutionPlan:V *:S"``.

    As in liblog: rules are whitespace-separated ``tag[:priority]``; a bare tag means
    ``V``, a bare ``*`` means ``D``; without a ``*`` rule everything passes.

    Args:
        spec: The filter spec; None or blank lets everything through.

    Returns:
        The rules; malformed tokens are skipped and listed in ``rejected``.
    """
    default, per_tag, rejected = 0, {}, []
    for token in (spec or "").split():
        tag, colon, letter = token.partition(":")
        letter = letter.upper() if colon else ("D" if tag == "*" else "V")
        if not tag or letter not in PRIORITIES:
            rejected.append(token)
        elif tag == "*":
            default = PRIORITIES[letter]
        else:
            per_tag[tag] = PRIORITIES[letter]
    return LogTagRules(default, per_tag, tuple(rejected))


class LogTagsFilter(logging.Filter):
    """Passes a record when its level reaches the minimum set for its log tag."""

    def __init__(self, spec: str | None = None) -> None:
        super().__init__()
        self.rules = parse_log_tags(spec)

    def filter(self, record: logging.LogRecord) -> bool:
        minimum = self.rules.per_tag.get(tag_of(record), self.rules.default)
        return record.levelno >= minimum


class NnHandler(logging.StreamHandler):
    """nnscope's handler; with no stream it writes to whatever ``sys.stderr`` is now."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__(stream if stream is not None else sys.stderr)
        self.follows_stderr = stream is None

    def emit(self, record: logging.LogRecord) -> None:
        if self.follows_stderr:
            self.stream = sys.stderr
        super().emit(record)


def install(stream: IO[str] | None = None, log_tags: str | None = None) -> NnHandler:
    """Replaces nnscope's handler on the ``nn`` logger; see ``vlog.configure_logging``."""
    rules_spec = os.environ.get("ANDROID_LOG_TAGS", "") if log_tags is None else log_tags
    handler = NnHandler(stream)
    handler.setFormatter(ThreadtimeFormatter())
    handler.addFilter(LogTagsFilter(rules_spec))
    root = logging.getLogger(ROOT_LOGGER)
    with _lock:
        _remove_handlers(root)
        root.addHandler(handler)
        root.propagate = False
    _ensure_level(root)
    rejected = handler.filters[0].rules.rejected
    if rejected:
        _warned.warning("ANDROID_LOG_TAGS: ignoring malformed rule(s) %s; expected "
                        "tag:P with P one of %s", " ".join(rejected), " ".join(PRIORITIES))
    return handler


def ensure_output() -> None:
    """Makes INFO records of ``nn.*`` loggers visible, installing the handler if none.

    Called before the first emitted vlog message. Leaves an application's own
    handlers and an explicitly set ``nn`` level alone.
    """
    root = logging.getLogger(ROOT_LOGGER)
    _ensure_level(root)
    if not root.hasHandlers():
        install()


def uninstall() -> None:
    """Removes nnscope's handler and undoes what :func:`ensure_output` changed."""
    global _we_set_level
    root = logging.getLogger(ROOT_LOGGER)
    with _lock:
        _remove_handlers(root)
        root.propagate = True
        if _we_set_level:
            root.setLevel(logging.NOTSET)
            _we_set_level = False


def _ensure_level(root: logging.Logger) -> None:
    global _we_set_level
    if root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
        _we_set_level = True


def _remove_handlers(root: logging.Logger) -> None:
    for old in [h for h in root.handlers if isinstance(h, NnHandler)]:
        root.removeHandler(old)
        old.close()
