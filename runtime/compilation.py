"""``Compilation``: prepare a finished model for devices (ANeuralNetworksCompilation).

``finish()`` partitions the model into an :class:`~runtime.plan.ExecutionPlan` of steps (each a
sub-model prepared on one device) and, when ``NN_GRAPHDUMP`` names a directory, writes the
plan's Graphviz dot there. ``Compilation(model)`` compiles for every device of
``runtime.manager.devices()`` following ``NN_PARTITION`` (default: partitioning with CPU
fallback: the CPU device ``nnapi-reference`` takes what no driver can do, and the whole model
when a driver fails). ``Compilation.for_devices(model, devices)`` uses only ``devices``,
without CPU fallback (BAD_DATA if they cannot run the whole model), as
``ANeuralNetworksCompilation_createForDevices``. After ``finish()``, successful or not, every
setter and a second ``finish()`` raise BAD_STATE. A compilation that is garbage-collected without
``free()`` releases its prepared models too, at the next compilation's ``finish()`` (its finalizer
only queues the plan, so that no driver call runs inside another one).

Example:
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> model = tiny_add()
    >>> cpu = manager.get_device("nnapi-reference")
    >>> compilation = Compilation.for_devices(model, [cpu])  # Compilation(model): every device
    >>> compilation.set_preference(Preference.SUSTAINED_SPEED)
    >>> compilation.finish()
    >>> [step.device.name for step in compilation.plan.steps]
    ['nnapi-reference']
    >>> compilation.set_preference(Preference.LOW_POWER)
    Traceback (most recent call last):
    ...
    nnscope.runtime.api.BadStateError: BAD_STATE: ...
    >>> compilation.free()
"""
from __future__ import annotations

import collections
import time
import weakref
from typing import Sequence

from nnscope import tracing
from nnscope.runtime import _checks as checks
from nnscope.runtime import _plantrace, graphdump, manager
from nnscope.runtime._lifecycle import BuilderState
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.drivers.base import Device
from nnscope.runtime.hal.types import Preference, Priority
from nnscope.runtime.model import Model
from nnscope.runtime.plan import ExecutionPlan, build_plan
from nnscope.tracing import Phase

#: Plans of compilations collected without free(), released at the next finish().
_UNREFERENCED: collections.deque = collections.deque()

#: ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN.
BYTE_SIZE_OF_CACHE_TOKEN = 32
INT64_MAX = (1 << 63) - 1


class Compilation:
    """A model being compiled; after :meth:`finish`, an executable plan.

    Args:
        model: A finished :class:`Model`.
        devices: Devices to compile for; None means every device (CPU fallback included).

    Raises:
        NnError: UNEXPECTED_NULL for a None model or device; BAD_DATA for something that is not
            a model, or an empty, duplicated or non-device list; BAD_STATE if the model is not
            finished (or its finish failed).
    """

    def __init__(self, model: Model, devices: Sequence[Device] | None = None):
        explicit = devices is not None
        name = "ANeuralNetworksCompilation_createForDevices" if explicit else \
            "ANeuralNetworksCompilation_create"
        call = name.split("_", 1)[1]
        with tracing.runtime(Phase.COMPILATION, name):
            checks.not_null(model, call, "model")
            selected = checks.devices(devices, call, Device) if explicit else None
            if not isinstance(model, Model):
                raise checks.bad(call, f"expected a Model, got {type(model).__name__}")
            model._state.check_usable(call, "a compilation")
            self.model = model
            self.explicit_devices = explicit
            #: NN_PARTITION mode; explicit device lists never fall back (as NNAPI).
            self.partitioning = manager.PARTITIONING_WITHOUT_FALLBACK if explicit \
                else manager.partitioning()
            self.devices: tuple[Device, ...] = selected if explicit else manager.devices()
            self.preference = Preference.FAST_SINGLE_ANSWER
            self.priority = Priority.MEDIUM
            self.timeout_ns = 0
            self.cache_dir: str | None = None
            self.cache_token: bytes | None = None
            self.plan: ExecutionPlan | None = None
            self._state = BuilderState(f"compilation of {model.name}")

    @classmethod
    def for_devices(cls, model: Model, devices: Sequence[Device]) -> Compilation:
        """Compile only for ``devices`` (ANeuralNetworksCompilation_createForDevices).

        CPU fallback is off: ``finish`` raises BAD_DATA if ``devices`` cannot run every
        operation, and a failing driver is reported, not replaced by the CPU.

        Raises:
            NnError: as the constructor; UNEXPECTED_NULL for ``devices=None``.
        """
        if devices is None:
            with tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_createForDevices"):
                raise NnError(ResultCode.UNEXPECTED_NULL, "createForDevices: devices is None")
        return cls(model, devices)

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_setPreference")
    def set_preference(self, preference: int) -> None:
        """LOW_POWER, FAST_SINGLE_ANSWER or SUSTAINED_SPEED. Raises NnError BAD_DATA / BAD_STATE."""
        self._state.check_mutable("setPreference")
        self.preference = _enum(Preference, preference, "setPreference")

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_setPriority")
    def set_priority(self, priority: int) -> None:
        """LOW, MEDIUM or HIGH (90/100/110). Raises NnError BAD_DATA / BAD_STATE."""
        self._state.check_mutable("setPriority")
        self.priority = _enum(Priority, priority, "setPriority")

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_setTimeout")
    def set_timeout(self, duration_ns: int) -> None:
        """Give prepare a deadline of ``duration_ns`` from finish() (0 = none).

        Raises:
            NnError: BAD_STATE after finish; BAD_DATA unless compiling for exactly one explicit
                device (as NNAPI) or for a duration that is not a uint64.
        """
        self._state.check_mutable("setTimeout")
        if not self.explicit_devices or len(self.devices) != 1:
            raise NnError(ResultCode.BAD_DATA, "setTimeout: only for a compilation created "
                          "for exactly one device (Compilation.for_devices)")
        self.timeout_ns = checks.duration(duration_ns, "setTimeout")

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_setCaching")
    def set_caching(self, cache_dir: str, token: bytes) -> None:
        """Let devices cache the compiled model in ``cache_dir`` under a 32-byte ``token``.

        As in NNAPI the directory is not checked here; a device that cannot use it compiles
        without a cache. At :meth:`finish` each driver step first tries
        ``prepareModelFromCache_1_3`` and silently prepares from the model (rewriting its cache
        files) when that fails; see ``runtime._caching``.

        Raises:
            NnError: UNEXPECTED_NULL for None; BAD_STATE after finish; BAD_DATA for a token
                that is not 32 bytes or a directory that is not a string/path.
        """
        checks.not_null(cache_dir, "setCaching", "cache_dir")
        checks.not_null(token, "setCaching", "token")
        self._state.check_mutable("setCaching")
        directory = checks.text(cache_dir, "setCaching", "cache_dir")
        if not isinstance(token, (bytes, bytearray, memoryview)) or len(bytes(token)) != BYTE_SIZE_OF_CACHE_TOKEN:
            raise NnError(ResultCode.BAD_DATA, f"setCaching: token must be {BYTE_SIZE_OF_CACHE_TOKEN} bytes")
        self.cache_dir, self.cache_token = directory, bytes(token)

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_finish")
    def finish(self) -> None:
        """Partition and prepare the model on its devices.

        Raises:
            NnError: BAD_STATE if already finished (also after a failed finish: the compilation
                is then invalid and no Execution can be made from it); BAD_DATA when an
                operation is supported by no device; the failing device's code when a prepare fails.
        """
        self._state.check_mutable("finish")
        release_unreferenced()
        self._state.invalidate()  # NNAPI: finished from here on, valid only if planning succeeds
        deadline = deadline_after(self.timeout_ns)
        fallback = manager.cpu_device() if manager.allows_fallback(self.partitioning) else None
        manager.start_devices(self.devices)  # first real use: driver processes start in parallel
        self.plan = build_plan(self.model.to_hal(), self.devices, self.preference, self.priority,
                               deadline, self.cache_dir, self.cache_token, fallback,
                               self.partitioning)
        self._finalizer = weakref.finalize(self, _UNREFERENCED.append, self.plan)
        self._finalizer.atexit = False  # the driver processes stop at exit anyway
        _plantrace.record(self.plan)  # each step's model operations, for trace readers
        self._state.finish()
        graphdump.dump_to_env_dir(self)

    @property
    def finished(self) -> bool:
        return self.plan is not None

    def check_executable(self, call: str) -> None:
        """BAD_STATE unless :meth:`finish` succeeded (before an Execution is created)."""
        self._state.check_usable(call, "an execution")

    def free(self) -> None:
        """Release the prepared models (ANeuralNetworksCompilation_free)."""
        with tracing.runtime(Phase.TERMINATION, "ANeuralNetworksCompilation_free"):
            if self.plan is not None:
                self._finalizer.detach()
                self.plan.release()

    def __repr__(self) -> str:
        devices = ", ".join(d.name for d in self.devices)
        return f"Compilation({self.model.name!r}, devices=[{devices}], finished={self.finished})"


def release_unreferenced() -> None:
    """Release the plans of compilations that were collected without ``free()``."""
    while _UNREFERENCED:
        _UNREFERENCED.popleft().release()


def deadline_after(duration_ns: int) -> int | None:
    """The monotonic deadline ``duration_ns`` from now (None for 0); a deadline beyond the
    int64 clock saturates, as AOSP's ``makeDeadline``."""
    if not duration_ns:
        return None
    return min(time.monotonic_ns() + duration_ns, INT64_MAX)


def _enum(kind, value: int, call: str):
    try:
        return kind(checks.integer(value, call, "value"))
    except ValueError:
        valid = ", ".join(f"{m.name}={m.value}" for m in kind)
        raise NnError(ResultCode.BAD_DATA, f"{call}: invalid value {value!r}; valid: {valid}") from None
