"""Chained plan steps (``EXECUTE_CHAINED``): how consecutive steps of one partitioned execution
hand over from driver to driver without a round trip through the application.

The application sends every step's request at once, each to its driver. A step's request names
two *words* in the plan's step memory (the shared region every step already reads and writes):
the word its step before writes when done, which it waits for, and its own. A word holds
``run << 2 | state``; ``run`` numbers the plan's executions, so a word left from an earlier run
never counts. :data:`DONE` means the step's outputs are in the region and no reply follows;
:data:`REPLIED` means the step ended with a reply on its connection (an error, a step skipped
because the one before did not finish, a full-form answer, or the last step, which always
answers). A step whose step before ended REPLIED does not run: it writes REPLIED and answers
with an error, so a failure reaches the last step and the application at once.

A word is one aligned native 8-byte store (x86: atomic, and ordered after the outputs written
before it). The application may write REPLIED into a word itself, to end a chain whose driver
refused a request or stopped answering.

``EXECUTE_CHAINED`` payload: :data:`HEAD` then an ``EXECUTE_SYNC_MEMO`` payload.

Example:
    >>> region = bytearray(16)
    >>> write(region, 8, word(5, DONE)); read(region, 8) == word(5, DONE)
    True
    >>> state_of(read(region, 8), 5), state_of(read(region, 0), 5)
    (1, 0)
"""
from __future__ import annotations

import struct

#: wait-word offset i64 (-1: the first step, nothing to wait for), own word offset i64, run u64,
#: longest wait for the step before in ns i64, flags u32 (:data:`ALWAYS_REPLY`).
HEAD = struct.Struct("<qqQqI")
#: Flag of the last step: answer even when it succeeded.
ALWAYS_REPLY = 1
#: Word states: not yet written in this run, done without a reply, ended with a reply.
PENDING, DONE, REPLIED = 0, 1, 2
#: Bytes of one word (offsets must be multiples of it).
WORD_SIZE = 8
#: Most runs a word can number (the run counter wraps below it).
MAX_RUN = 1 << 60
#: Longest wait for the step before that one request may ask for (ns); a driver refuses more.
MAX_WAIT_NS = 600 * 1_000_000_000
_WORD = struct.Struct("Q")  # native: one 8-byte store, never torn byte by byte


def word(run: int, state: int) -> int:
    """The value of a word of run ``run`` in ``state``."""
    return run << 2 | state


def state_of(value: int, run: int) -> int:
    """DONE or REPLIED when ``value`` is a word of run ``run``, else PENDING."""
    return value & 3 if value >> 2 == run else PENDING


def read(buffer, offset: int) -> int:
    return _WORD.unpack_from(buffer, offset)[0]


def write(buffer, offset: int, value: int) -> None:
    _WORD.pack_into(buffer, offset, value)
