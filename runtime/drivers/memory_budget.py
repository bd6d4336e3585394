"""A sample driver's memory budget: the bytes its prepared models and running executions may
hold at once, with AOSP's RESOURCE_EXHAUSTED_TRANSIENT / _PERSISTENT answers.

What is charged, and when:

- ``prepareModel`` / ``prepareModelFromCache``: the model's :func:`model_footprint` (its constant
  operand bytes plus the planned peak of the executor's temporaries, from the declared shapes),
  held until the prepared model is released (``IPreparedModel`` release, or garbage collected);
- each execution: its :func:`request_bytes` (the bytes of its input and output arguments), held
  while it runs and given back when it ends;
- each IBuffer (``IDevice::allocate``, ``runtime.drivers.ipc.service.buffers``): its tensor's bytes,
  held until the buffer is freed or its client process is gone.

A charge never waits. One that cannot fit even with every other model released and every other
execution ended (for an execution: with its own prepared model's charge, which it cannot outlive)
is refused with RESOURCE_EXHAUSTED_PERSISTENT: retrying on this driver cannot help. One that would
fit, but not in what is free now, is refused with RESOURCE_EXHAUSTED_TRANSIENT. Each refusal is
a VLOG ``driver`` line (log tag SampleDriver) naming the HAL code and its number, and a zero-length
driver span named after it, e.g. ``[NN_LD_PE]SampleDriver::execute::RESOURCE_EXHAUSTED_TRANSIENT``.

The budget is :data:`DEFAULT_DRIVER_BUDGET_BYTES`, or the bytes in :data:`DRIVER_BUDGET_ENV`
(read when a sample driver is made; driver processes inherit it from the runtime), or for one
driver process ``python -m nnscope.runtime.drivers NAME --driver-memory-budget BYTES``. It is not
``runtime.ops.budget``'s per-operation budget (``--memory-budget``), which bounds what one
operation of one execution may allocate. The accounting is thread-safe: any thread may charge.

Example:
    >>> budget = MemoryBudget(1000)
    >>> model = budget.reserve(600, PREPARE)
    >>> with budget.reserve(300, EXECUTE, own=model.bytes):
    ...     budget.held_bytes
    900
    >>> budget.reserve(500, EXECUTE).bytes
    Traceback (most recent call last):
    ...
    nnscope.runtime.hal.errors.HalError: needs 500 bytes, 400 of the 1000-byte memory budget are free
    (other models or executions hold the rest)
    >>> model.release(); budget.held_bytes
    0
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Mapping, NamedTuple

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, HalModel, OperandLifetime as L, numpy_dtype
from nnscope.runtime.ops.budget import OutputPlan, charge, element_count
from nnscope.tracing import Phase

#: Environment variable holding a sample driver's whole memory budget in bytes.
DRIVER_BUDGET_ENV = "NNSCOPE_DRIVER_MEMORY_BUDGET"
#: The whole budget unless configured otherwise: generous, so only a configured budget refuses.
DEFAULT_DRIVER_BUDGET_BYTES = 4 * 1024 ** 3
_LOG_TAG = "SampleDriver"
_log = logging.getLogger("nn.SampleDriver")


class Activity(NamedTuple):
    """What a charge is for: the HAL method it is named after, and its trace phase."""

    method: str
    phase: Phase


PREPARE = Activity("prepareModel", Phase.COMPILATION)
EXECUTE = Activity("execute", Phase.EXECUTION)


class Charge:
    """Bytes held in a :class:`MemoryBudget` until :meth:`release` (idempotent; also on leaving
    a ``with`` block)."""

    __slots__ = ("budget", "bytes", "_held")

    def __init__(self, budget: MemoryBudget, nbytes: int):
        self.budget, self.bytes, self._held = budget, nbytes, True

    def release(self) -> None:
        with self.budget._lock:
            if self._held:
                self._held = False
                self.budget._held -= self.bytes

    def __enter__(self) -> Charge:
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


class MemoryBudget:
    """``total_bytes`` shared by one driver's prepared models and running executions."""

    def __init__(self, total_bytes: int):
        self.total_bytes = total_bytes
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held_bytes(self) -> int:
        """Bytes charged now."""
        return self._held

    def reserve(self, needed: int, activity: Activity, own: int = 0) -> Charge:
        """Charge ``needed`` bytes for ``activity`` (``own``: bytes already held that the work
        cannot outlive, e.g. an execution's prepared model) until the charge is released.

        Raises:
            HalError: RESOURCE_EXHAUSTED_PERSISTENT when ``needed + own`` exceeds the whole
                budget, RESOURCE_EXHAUSTED_TRANSIENT when it fits but not in what is free now.
        """
        self.take(needed, activity, own)
        return Charge(self, needed)

    def take(self, needed: int, activity: Activity, own: int = 0) -> None:
        """:meth:`reserve` without a :class:`Charge` (an execution's fast path): the caller
        gives the bytes back with :meth:`give`."""
        with self._lock:
            free = self.total_bytes - self._held
            if needed <= free and needed + own <= self.total_bytes:
                self._held += needed
                return
        if needed + own > self.total_bytes:
            raise refusal(ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT, activity,
                          f"needs {needed} bytes{_own(own)}, more than the whole memory budget of "
                          f"{self.total_bytes} bytes")
        raise refusal(ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT, activity,
                      f"needs {needed} bytes, {max(free, 0)} of the {self.total_bytes}-byte memory "
                      f"budget are free (other models or executions hold the rest)")

    def give(self, nbytes: int) -> None:
        """Give back bytes charged with :meth:`take`."""
        with self._lock:
            self._held -= nbytes


def _own(own: int) -> str:
    return f" (+{own} held by its prepared model)" if own else ""


def refusal(status: ErrorStatus, activity: Activity, message: str) -> HalError:
    """The HalError of a refused charge, logged (VLOG ``driver``) and traced by its code name."""
    vlog.log("driver", _LOG_TAG, "%s: %s (ErrorStatus %d): %s", activity.method, status.name,
             int(status), message)
    with tracing.driver(activity.phase, f"{_LOG_TAG}::{activity.method}::{status.name}"):
        pass
    return HalError(status, message)


def configured_driver_budget(environ: Mapping[str, str] | None = None) -> int:
    """The bytes in :data:`DRIVER_BUDGET_ENV`, or :data:`DEFAULT_DRIVER_BUDGET_BYTES` when unset
    or not a positive number (logged)."""
    text = (os.environ if environ is None else environ).get(DRIVER_BUDGET_ENV, "").strip()
    if not text:
        return DEFAULT_DRIVER_BUDGET_BYTES
    value = int(text) if text.isdigit() else 0
    if value <= 0:
        _log.warning("%s=%r is not a positive number of bytes; using %d", DRIVER_BUDGET_ENV, text,
                     DEFAULT_DRIVER_BUDGET_BYTES)
        return DEFAULT_DRIVER_BUDGET_BYTES
    return value


def model_footprint(model: HalModel, executor) -> int:
    """What a prepared model holds: :func:`constant_bytes` plus :func:`planned_peak_bytes`."""
    return constant_bytes(model) + planned_peak_bytes(executor)


def constant_bytes(model: HalModel) -> int:
    """Bytes of every constant operand of the main and referenced graphs."""
    return sum(operand.location.length for graph in (model.main, *model.referenced)
               for operand in graph.operands
               if operand.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE) and operand.location)


def planned_peak_bytes(executor) -> int:
    """The most a run of ``executor``'s main graph holds at once, planned from the declared
    shapes (unknown dimensions count as empty): before each step, the outputs of earlier steps
    not yet freed plus the step's own charge (``runtime.ops.budget.charge``: its outputs and
    their kernels' temporaries)."""
    live, peak, sizes = 0, 0, {}
    for step in executor.calls:
        operands = step.output_operands
        work = charge(OutputPlan([o.dimensions for o in operands]), [o.type for o in operands])
        peak = max(peak, live + work)
        for index, operand in zip(step.outputs, operands):
            sizes[index] = element_count(operand.dimensions) * _itemsize(operand.type)
            live += sizes[index]
        for index in step.frees:
            live -= sizes.pop(index, 0)
    return peak


def _itemsize(operand_type) -> int:
    try:
        return numpy_dtype(operand_type).itemsize
    except ValueError:  # no element dtype (an extension or OEM type): charge a word
        return 8


def request_bytes(inputs, output_capacities) -> int:
    """An execution's charge: the bytes of its bound inputs (None: omitted) and of its output
    regions."""
    return sum(value.nbytes for value in inputs if value is not None) + sum(output_capacities)

