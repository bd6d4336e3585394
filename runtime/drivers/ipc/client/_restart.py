"""When a dead driver process may be started again: restart on next use, back off when it keeps dying.

The first restart after a death is immediate. A driver that dies again within
:data:`STABLE_S` of its last start waits :data:`BASE_S`, then twice that after each further
quick death, up to :data:`MAX_S`; one that ran for :data:`STABLE_S` starts afresh. Until the wait
is over the device stays dead (DEAD_OBJECT, so executions fall back to the CPU).

Example:
    >>> backoff = Backoff()
    >>> backoff.started(0.0); backoff.died(1.0); backoff.may_restart(1.0)
    True
    >>> backoff.started(1.0); backoff.died(2.0); backoff.may_restart(2.0), backoff.may_restart(2.2)
    (False, True)
"""
from __future__ import annotations

#: Seconds a driver must run before its deaths stop counting as a streak.
STABLE_S = 30.0
#: First and longest wait before restarting a driver that keeps dying.
BASE_S = 0.1
MAX_S = 30.0


class Backoff:
    """Restart bookkeeping of one device; times are ``time.monotonic()`` seconds."""

    def __init__(self) -> None:
        self.streak = 0  # quick deaths in a row
        self.restarts = 0
        self.not_before = 0.0
        self._started = 0.0

    def started(self, now: float) -> None:
        self._started = now

    def died(self, now: float) -> None:
        self.streak = self.streak + 1 if now - self._started < STABLE_S else 1
        wait = 0.0 if self.streak <= 1 else min(MAX_S, BASE_S * 2 ** (self.streak - 2))
        self.not_before = now + wait

    def may_restart(self, now: float) -> bool:
        return now >= self.not_before
