"""The one device interface shared by in-process devices and driver-process proxies (IDevice /
IPreparedModel of HAL 1.3). The runtime sees only these two classes.

Example:
    >>> prepared = device.prepare_model(hal_model, Preference.FAST_SINGLE_ANSWER)  # doctest: +SKIP
    >>> result = prepared.execute(request, measure_timing=True)                     # doctest: +SKIP
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import tracing
from runtime.api import NnError, ResultCode
from runtime.hal.device_types import Capabilities, ExecutionResult, Request
from runtime.hal.errors import HalError
from runtime.hal.types import DeviceType, HalModel, Preference, Priority
from tracing import Phase


class PreparedModel(ABC):
    """IPreparedModel: a model compiled for one device."""

    @abstractmethod
    def execute(self, request: Request, measure_timing: bool = False,
                deadline_ns: int | None = None) -> ExecutionResult:
        """Run synchronously (executeSynchronously); never raises for driver-side errors."""

    def compute_outputs(self, request: Request, shapes: tuple) -> list | None:
        """Optional fast path for a driver service answering a repeated request: the output
        arrays of an untimed, unobserved run (no deadline, no tracing or vlog), or None (the
        default) to use :meth:`execute`."""
        return None

    def release(self) -> None:
        """Free driver-side resources."""

    def forget(self, match) -> None:
        """Drop what the model remembers of requests for which ``match(request)`` is true (a
        cached binding keeps their memory mapped): a driver service calls it before it unmaps
        or frees that memory. Nothing is remembered by default."""


class Device(ABC):
    """IDevice. ``name``, ``type``, ``version`` and ``feature_level`` describe the device."""

    name: str
    type: DeviceType = DeviceType.OTHER
    version: str = "1.0"
    feature_level: int = 30

    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abstractmethod
    def supported_operations(self, model: HalModel) -> list[bool]:
        """One flag per operation of ``model.main``."""

    @abstractmethod
    def prepare_model(self, model: HalModel, preference: Preference = Preference.FAST_SINGLE_ANSWER,
                      priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
                      cache_dir: str | None = None, token: bytes | None = None) -> PreparedModel:
        """Compile ``model``; raise ``runtime.hal.errors.HalError`` carrying an ErrorStatus on failure."""

    def prepare_model_from_cache(self, model: HalModel, deadline_ns: int | None = None,
                                 cache_dir: str | None = None, token: bytes | None = None,
                                 preference: Preference | None = None,
                                 priority: Priority | None = None) -> PreparedModel:
        """The model prepared from the device's cache files for ``token`` (prepareModelFromCache_1_3),
        or ``HalError``; the default: no caching (GENERAL_FAILURE). ``preference`` and
        ``priority`` (already in the token) are what the model would be prepared again with."""
        from runtime.hal.errors import HalError  # noqa: PLC0415
        from runtime.hal.types import ErrorStatus  # noqa: PLC0415

        raise HalError(ErrorStatus.GENERAL_FAILURE, f"{self.name} does not cache compilations")

    def supported_extensions(self) -> tuple:
        """``getSupportedExtensions``: ``runtime.hal.extensions.Extension`` records (none here)."""
        return ()

    def get_extension_support(self, extension_name: str) -> bool:
        """ANeuralNetworksDevice_getExtensionSupport: False unless the device supports the
        extension and the runtime's allowlist lets this program use extensions."""
        from runtime.extensions import get_extension_support  # noqa: PLC0415 - runtime library check
        return get_extension_support(self, extension_name)

    def number_of_cache_files_needed(self) -> tuple[int, int]:
        return (0, 0)

    def forget_pool(self, pool) -> None:
        """Stop caching the shared pool ``pool`` (it is about to close); a no-op in-process."""

    def wait(self) -> None:
        """ANeuralNetworksDevice_wait: block until the device is live (:meth:`ensure_live`).

        Raises:
            NnError: OP_FAILED when it cannot be (a driver process whose restart failed).
        """
        with tracing.runtime(Phase.INITIALIZATION, "ANeuralNetworksDevice_wait"):
            try:
                self.ensure_live()
            except HalError as error:
                raise NnError(ResultCode.OP_FAILED, f"ANeuralNetworksDevice_wait({self.name}): "
                              f"{error}") from None

    def ensure_live(self) -> None:
        """Return once the device serves (an in-process device: at once); HalError if it cannot."""

    def launch(self, wait: bool = False) -> None:
        """Start any backing process (remote devices; a no-op here).

        ``wait=False`` only spawns it, so the runtime can start several driver processes in
        parallel; ``wait=True`` then blocks until it serves (raising ``HalError`` if it cannot).
        """

    def shutdown(self) -> None:
        """Release the device (stop its process for remote devices)."""
