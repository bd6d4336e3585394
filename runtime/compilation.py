"""``Compilation``: prepare a finished model for devices (ANeuralNetworksCompilation).

``finish()`` partitions the model into an :class:`~runtime.plan.ExecutionPlan` of steps (each a
sub-model prepared on one device) and, when ``NN_GRAPHDUMP`` names a directory, writes the
plan's Graphviz dot there. ``Compilation(model)`` compiles for every device of
``runtime.manager.devices()`` following ``NN_PARTITION`` (default: partitioning with CPU
fallback: the CPU device ``nnapi-reference`` takes what no driver can do, and the whole model
when a driver fails). ``Compilation.for_devices(model, devices)`` uses only ``devices``,
without CPU fallback (BAD_DATA if they cannot run the whole model), as
``ANeuralNetworksCompilation_createForDevices``.

Example:
    >>> compilation = Compilation(model)                       # doctest: +SKIP
    >>> compilation.set_preference(Preference.SUSTAINED_SPEED)  # doctest: +SKIP
    >>> compilation.finish()                                   # doctest: +SKIP
    >>> [step.device.name for step in compilation.plan.steps]  # doctest: +SKIP
    ['nnapi-reference']
"""
from __future__ import annotations

import os
import time
from typing import Sequence

import tracing
from runtime import graphdump, manager
from runtime.api import NnError, ResultCode
from runtime.drivers.base import Device
from runtime.hal.types import Preference, Priority
from runtime.model import Model
from runtime.plan import ExecutionPlan, build_plan
from tracing import Phase

#: ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN.
BYTE_SIZE_OF_CACHE_TOKEN = 32


class Compilation:
    """A model being compiled; after :meth:`finish`, an executable plan.

    Args:
        model: A finished :class:`Model`.
        devices: Devices to compile for; None means every device (CPU fallback included).

    Raises:
        NnError: BAD_STATE if the model is not finished, BAD_DATA for an empty device list.
    """

    def __init__(self, model: Model, devices: Sequence[Device] | None = None):
        name = "ANeuralNetworksCompilation_create" if devices is None else \
            "ANeuralNetworksCompilation_createForDevices"
        with tracing.runtime(Phase.COMPILATION, name):
            if not isinstance(model, Model):
                raise NnError(ResultCode.UNEXPECTED_NULL, f"Compilation: expected a Model, got {model!r}")
            if not model.finished:
                raise NnError(ResultCode.BAD_STATE, f"Compilation: model {model.name} is not finished")
            if devices is not None and not list(devices):
                raise NnError(ResultCode.BAD_DATA, "createForDevices: empty device list")
            self.model = model
            self.explicit_devices = devices is not None
            #: NN_PARTITION mode; explicit device lists never fall back (as NNAPI).
            self.partitioning = manager.PARTITIONING_WITHOUT_FALLBACK if self.explicit_devices \
                else manager.partitioning()
            self.devices: tuple[Device, ...] = tuple(devices) if devices is not None else manager.devices()
            self.preference = Preference.FAST_SINGLE_ANSWER
            self.priority = Priority.MEDIUM
            self.timeout_ns = 0
            self.cache_dir: str | None = None
            self.cache_token: bytes | None = None
            self.plan: ExecutionPlan | None = None

    @classmethod
    def for_devices(cls, model: Model, devices: Sequence[Device]) -> Compilation:
        """Compile only for ``devices`` (ANeuralNetworksCompilation_createForDevices).

        CPU fallback is off: ``finish`` raises BAD_DATA if ``devices`` cannot run every
        operation, and a failing driver is reported, not replaced by the CPU.
        """
        return cls(model, list(devices))

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_setPreference")
    def set_preference(self, preference: int) -> None:
        """LOW_POWER, FAST_SINGLE_ANSWER or SUSTAINED_SPEED. Raises NnError BAD_DATA / BAD_STATE."""
        self._check_mutable("setPreference")
        self.preference = _enum(Preference, preference, "setPreference")

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_setPriority")
    def set_priority(self, priority: int) -> None:
        """LOW, MEDIUM or HIGH (90/100/110). Raises NnError BAD_DATA / BAD_STATE."""
        self._check_mutable("setPriority")
        self.priority = _enum(Priority, priority, "setPriority")

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_setTimeout")
    def set_timeout(self, duration_ns: int) -> None:
        """Give prepare a deadline of ``duration_ns`` from finish() (0 = none).

        Raises:
            NnError: BAD_DATA unless compiling for exactly one explicit device (as NNAPI).
        """
        self._check_mutable("setTimeout")
        if not self.explicit_devices or len(self.devices) != 1:
            raise NnError(ResultCode.BAD_DATA, "setTimeout: only for a compilation created "
                          "for exactly one device (Compilation.for_devices)")
        if duration_ns < 0:
            raise NnError(ResultCode.BAD_DATA, f"setTimeout: negative duration {duration_ns}")
        self.timeout_ns = int(duration_ns)

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_setCaching")
    def set_caching(self, cache_dir: str, token: bytes) -> None:
        """Let devices cache the compiled model in ``cache_dir`` under a 32-byte ``token``."""
        self._check_mutable("setCaching")
        if not isinstance(token, (bytes, bytearray)) or len(token) != BYTE_SIZE_OF_CACHE_TOKEN:
            raise NnError(ResultCode.BAD_DATA, f"setCaching: token must be {BYTE_SIZE_OF_CACHE_TOKEN} bytes")
        if not cache_dir or not os.path.isdir(cache_dir):
            raise NnError(ResultCode.BAD_DATA, f"setCaching: {cache_dir!r} is not a directory")
        self.cache_dir, self.cache_token = str(cache_dir), bytes(token)

    @tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_finish")
    def finish(self) -> None:
        """Partition and prepare the model on its devices.

        Raises:
            NnError: BAD_STATE if already finished; BAD_DATA when an operation is supported by
                no device; the failing device's code when a prepare fails.
        """
        self._check_mutable("finish")
        deadline = time.monotonic_ns() + self.timeout_ns if self.timeout_ns else None
        fallback = manager.cpu_device() if manager.allows_fallback(self.partitioning) else None
        manager.start_devices(self.devices)  # first real use: driver processes start in parallel
        self.plan = build_plan(self.model.to_hal(), self.devices, self.preference, self.priority,
                               deadline, self.cache_dir, self.cache_token, fallback,
                               self.partitioning)
        graphdump.dump_to_env_dir(self)

    @property
    def finished(self) -> bool:
        return self.plan is not None

    def free(self) -> None:
        """Release the prepared models (ANeuralNetworksCompilation_free)."""
        with tracing.runtime(Phase.TERMINATION, "ANeuralNetworksCompilation_free"):
            if self.plan is not None:
                self.plan.release()

    def _check_mutable(self, call: str) -> None:
        if self.plan is not None:
            raise NnError(ResultCode.BAD_STATE, f"{call}: compilation of {self.model.name} is finished")

    def __repr__(self) -> str:
        devices = ", ".join(d.name for d in self.devices)
        return f"Compilation({self.model.name!r}, devices=[{devices}], finished={self.finished})"


def _enum(kind, value: int, call: str):
    try:
        return kind(value)
    except ValueError:
        valid = ", ".join(f"{m.name}={m.value}" for m in kind)
        raise NnError(ResultCode.BAD_DATA, f"{call}: invalid value {value!r}; valid: {valid}") from None
