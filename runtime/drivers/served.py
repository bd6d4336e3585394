"""What a driver service needs of the models it serves, beyond the HAL's ``PreparedModel``.

A driver process (``runtime.drivers.ipc.service``) runs models of an in-process ``Device`` and
asks more of them than the runtime does: their rank in its scheduler, their expected run time,
whether a run with a deadline is worth queueing, a bound run for repeats, and forgetting
requests whose memory it is about to unmap. The runtime never uses these: its interface is
``runtime.drivers.base`` (AOSP's ``Manager.h``). Every model a driver process serves is a
:class:`ServedModel`; the defaults suit a model without a scheduler estimate or a fast path.

Example:
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.drivers.cpu import CpuDevice
    >>> prepared = CpuDevice().prepare_model(tiny_add().to_hal())
    >>> isinstance(prepared, ServedModel), prepared.priority.name, prepared.decline_queued(0)
    (True, 'MEDIUM', None)
"""
from __future__ import annotations

from nnscope.runtime.drivers.base import PreparedModel
from nnscope.runtime.hal.device_types import ExecutionResult, Request
from nnscope.runtime.hal.types import Priority


class ServedModel(PreparedModel):
    """A prepared model a driver service can serve."""

    #: Its rank among one client's models in a driver's scheduler (the driver service sets it).
    priority: Priority = Priority.MEDIUM
    #: Expected run time in nanoseconds (0: unknown); a driver queues a model above its limit.
    mean_ns: float = 0

    def decline_queued(self, deadline_ns: int, queued_ns: int = 0) -> ExecutionResult | None:
        """Asked by a driver's scheduler before it queues a run with a deadline: the
        MISSED_DEADLINE result to decline with, or None (the default) to run it."""
        return None

    def bound_run(self, request: Request, result: ExecutionResult):
        """After ``result`` of :meth:`execute` on ``request``: a callable repeating that run
        untimed, with the accounting and the spans of :meth:`execute` (True when it ran as
        bound), or None (the default): use :meth:`execute`."""
        return None

    def forget(self, match) -> None:
        """Drop what the model remembers of requests for which ``match(request)`` is true (a
        cached binding keeps their memory mapped): a driver service calls it before it unmaps
        or frees that memory. Nothing is remembered by default."""
