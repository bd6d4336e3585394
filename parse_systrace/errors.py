"""Errors of ``parse_systrace``: one exception type for input that cannot be summarised.

A :class:`TraceFormatError` names *where* in the input the problem is (``"line 1234"``
for text traces, ``"event 56"`` for event-based formats, or a file-level place such as
``"file"``) and *why*. The CLI prints it as one line and exits with status 2.

Example:
    >>> error = TraceFormatError("line 12", "E mark without a matching B")
    >>> str(error)
    'line 12: E mark without a matching B'
    >>> error.where, error.reason
    ('line 12', 'E mark without a matching B')
"""
from __future__ import annotations


class TraceFormatError(Exception):
    """A trace row (or the file as a whole) that cannot be parsed or summarised.

    Attributes:
        where: the place in the input, e.g. ``"line 1234"`` or ``"event 56"``.
        reason: a short human-readable description of the problem.
    """

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(where, reason)
        self.where = str(where)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


class Unchecked(Exception):
    """Internal: a block that an unchecked first pass took as mark rows only is not.

    Raised by readers read with ``checked=False``; the engine then starts again with the
    checked first pass (nothing has been shown by then).
    """


def line_where(where: object) -> str:
    """Format a reader's ``where`` field: ints are line numbers, strings are kept as is.

    >>> line_where(12), line_where("event 3")
    ('line 12', 'event 3')
    """
    return f"line {where}" if isinstance(where, int) else str(where)
