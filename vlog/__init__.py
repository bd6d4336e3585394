"""Verbose logging switched by ``NN_VLOG``, the grammar of Android's ``debug.nn.vlog``.

``NN_VLOG`` is read once, at import. It lists tags from :data:`TAGS`, separated by
spaces, commas or colons in any mix (case ignored); ``1`` or ``all`` enables every
tag of :data:`TAGS`; unset or empty disables everything. The finer tags of :data:`FINE_TAGS`
(``partition``: one line per operation and device) are on only when named. Unknown tags produce one warning naming
them and the valid tags, and the known tags still apply; the processes a program starts (its
driver processes) inherit :data:`VLOG_WARNED` and do not repeat it.

Messages go to Python ``logging`` at INFO, on the logger ``nn.<LogTag>`` (e.g.
``nn.ExecutionPlan``), and are formatted only when their vlog tag is on. On the
first emitted message, if no handler is reachable from the ``nn`` logger, nnscope
installs its own handler there (stderr, logcat ``threadtime`` format, ``ANDROID_LOG_TAGS``
filter) and stops ``nn`` from propagating, so nothing prints twice. If the
application configured logging first, its handlers get the records instead (and
``ANDROID_LOG_TAGS`` does not apply) unless it calls :func:`configure_logging`.

Example:
    >>> from nnscope import vlog
    >>> with vlog.override("execution, model"):
    ...     vlog.is_on("execution"), vlog.is_on("driver")
    (True, False)
    >>> vlog.log("cpuexe", "CpuExecutor", "never formatted: %s", object())

    Output line: ``11-22 14:11:16.123  4242  4243 I ExecutionPlan: step 0``.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import IO

from nnscope.vlog import _logcat
from nnscope.vlog._grammar import BITS, FINE_TAGS, TAGS, parse, unknown_tag_message

__all__ = ["NN_VLOG", "ANDROID_LOG_TAGS", "VLOG_WARNED", "TAGS", "FINE_TAGS", "is_on", "log", "reload",
           "override", "configure_logging", "reset_logging"]

NN_VLOG = "NN_VLOG"
"""Environment variable: the vlog tag list (``debug.nn.vlog`` on Android).

E.g. ``NN_VLOG=1``, ``NN_VLOG=all`` or ``NN_VLOG="compilation,execution"``. Read once at
import; call :func:`reload` to read it again.
"""

ANDROID_LOG_TAGS = "ANDROID_LOG_TAGS"
"""Environment variable: logcat filter spec for nnscope's handler.

Whitespace-separated ``tag:P`` rules, ``P`` one of ``V D I W E F S`` (S = silent),
``*`` for the default; e.g. ``ExecutionPlan:V CpuExecutor:S *:S``. Read each time
:func:`configure_logging` installs the handler.
"""

VLOG_WARNED = "NNSCOPE_VLOG_WARNED"
"""Environment variable set by nnscope, not by you: the ``NN_VLOG`` value whose unknown tags
this process has warned about. Its child processes (the driver processes) inherit it and, while
their ``NN_VLOG`` is the same value, stay quiet: one run prints the warning once, not once per
process.
"""

_mask = 0
_warner = logging.getLogger(_logcat.PREFIX + "VLog")
_output_ready = False


def _unknown(tag: str) -> ValueError:
    return ValueError(f"unknown vlog tag {tag!r}; valid tags: {', '.join(TAGS + FINE_TAGS)}")


def is_on(tag: str) -> bool:
    """Tells whether a vlog tag is enabled; one dict lookup and one ``&``.

    Args:
        tag: One of :data:`TAGS`.

    Raises:
        ValueError: ``tag`` is not one of :data:`TAGS`.
    """
    try:
        return _mask & BITS[tag] != 0
    except KeyError:
        raise _unknown(tag) from None


def log(tag: str, log_tag: str, fmt: str, *args: object) -> None:
    """Logs ``fmt % args`` at INFO under ``log_tag`` when vlog ``tag`` is on.

    When the tag is off nothing is formatted (neither ``fmt`` nor ``args``).

    Args:
        tag: The vlog tag gating the message, one of :data:`TAGS`.
        log_tag: The Android-style log tag, e.g. ``"ExecutionPlan"``.
        fmt: A ``%``-style format string.
        *args: Its arguments, formatted only if the message is emitted.
    """
    try:
        on = _mask & BITS[tag]
    except KeyError:
        raise _unknown(tag) from None
    if on:
        _emit(log_tag, fmt, args)


def _emit(log_tag: str, fmt: str, args: tuple[object, ...]) -> None:
    global _output_ready
    if not _output_ready:
        _logcat.ensure_output()
        _output_ready = True
    extra = {"nn_tag": log_tag, "nn_tid": threading.get_native_id()}
    logging.getLogger(_logcat.PREFIX + log_tag).info(fmt, *args, extra=extra, stacklevel=3)


def reload(value: str | None = None) -> int:
    """Re-reads ``NN_VLOG`` (or parses ``value``) and replaces the mask.

    Args:
        value: A setting to use instead of the environment variable.

    Returns:
        The new bitmask (bit ``i`` is ``TAGS[i]``).
    """
    global _mask
    setting = os.environ.get(NN_VLOG, "") if value is None else value
    parsed = parse(setting)
    warned = value is None and os.environ.get(VLOG_WARNED) == setting  # by the parent process
    if parsed.unknown and not warned:
        _warner.warning("%s", unknown_tag_message(parsed.unknown))
        if value is None:
            os.environ[VLOG_WARNED] = setting
    _mask = parsed.mask
    return _mask


@contextlib.contextmanager
def override(value: str) -> Iterator[int]:
    """Scopes a vlog setting, for tests; the previous mask comes back on exit.

    Args:
        value: A setting in the ``NN_VLOG`` grammar, e.g. ``"all"`` or ``""``.

    Yields:
        The mask in force inside the block.

    Raises:
        ValueError: ``value`` names an unknown tag (strict, unlike the env var).
    """
    global _mask
    parsed = parse(value)
    if parsed.unknown:
        raise ValueError(unknown_tag_message(parsed.unknown))
    previous, _mask = _mask, parsed.mask
    try:
        yield _mask
    finally:
        _mask = previous


def configure_logging(stream: IO[str] | None = None,
                      log_tags: str | None = None) -> logging.Handler:
    """Installs nnscope's logcat-style handler on the ``nn`` logger; idempotent.

    Replaces any handler a previous call installed (never adds a second one), sets
    the ``nn`` level to INFO unless the application set one, and stops ``nn``
    records from propagating to the root logger.

    Args:
        stream: Where lines go; None means the current ``sys.stderr`` at each write.
        log_tags: An ``ANDROID_LOG_TAGS`` spec; None reads the environment variable.

    Returns:
        The installed handler.
    """
    global _output_ready
    handler = _logcat.install(stream, log_tags)
    _output_ready = True
    return handler


def reset_logging() -> None:
    """Removes nnscope's handler and logging changes, for tests; the mask is untouched."""
    global _output_ready
    _logcat.uninstall()
    _output_ready = False


reload()
