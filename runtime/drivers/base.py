"""The one device interface shared by in-process devices and driver-process proxies (IDevice /
IPreparedModel of HAL 1.3, as AOSP's ``Manager.h``). The runtime sees only these two classes:
every way it uses a device (execute, fenced execution, bursts, device memory, compilation
caching) is a method here, with the in-process CPU device's behaviour as the default.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.drivers.cpu import CpuDevice
    >>> from nnscope.runtime.hal.device_types import Request, RequestArgument as Arg
    >>> hal_model = tiny_add().to_hal()  # output = input0 + input1, float32 [1, 4]
    >>> pool = bytearray(np.arange(8, dtype=np.float32).tobytes() + bytes(16))
    >>> request = Request(inputs=(Arg(offset=0, length=16), Arg(offset=16, length=16)),
    ...                   outputs=(Arg(offset=32, length=16),), pools=(pool,))
    >>> device: Device = CpuDevice()
    >>> prepared = device.prepare_model(hal_model, Preference.FAST_SINGLE_ANSWER)
    >>> result = prepared.execute(request, measure_timing=True)
    >>> result.status, np.frombuffer(pool, np.float32, 4, 32).tolist()
    (<ErrorStatus.NONE: 0>, [4.0, 6.0, 8.0, 10.0])
    >>> prepared.release()
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from nnscope import tracing
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.hal.device_types import Capabilities, ExecutionResult, Request
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import DeviceType, HalModel, Preference, Priority
from nnscope.tracing import Phase


class FencedRun(ABC):
    """A launched fenced execution (what :meth:`PreparedModel.execute_fenced` returns): its
    sync fence, and the IFencedExecutionCallback that tells how it ended."""

    #: The sync fence fd (the run's own; valid until :meth:`close`): signalled when it ends.
    fence: int
    #: Seconds it may run after the runs it waits for ended before its driver counts as silent.
    timeout_s: float
    #: Why it failed (set by :meth:`result`), None if unknown.
    last_error: str | None = None

    @abstractmethod
    def state(self, timeout_s: float) -> str:
        """The fence's state (``runtime.hal.sync_fence``: ACTIVE, DONE or ERROR) after waiting
        up to ``timeout_s`` seconds."""

    @abstractmethod
    def result(self, state: str) -> ExecutionResult:
        """The run's result once its fence is ``state`` (DONE or ERROR)."""

    @abstractmethod
    def wait(self):
        """``(result, fenced timing, message)`` once it ended, or None when its driver died."""

    @abstractmethod
    def give_up(self, why: str) -> None:
        """Its device stopped answering: stop it (a driver process is killed) and fail the
        fence, so that runs waiting for it end."""

    @abstractmethod
    def close(self) -> None:
        """Free what the run holds (its fence fd)."""


class PreparedModel(ABC):
    """IPreparedModel: a model compiled for one device."""

    #: Message of the last failed execution (a HAL result carries only a status); None if unknown.
    last_error: str | None = None
    #: The model it was prepared from (None: not kept).
    model: HalModel | None = None
    #: Seconds the runtime watches for the reply of an execution before it sleeps (a polling
    #: window, as AOSP's burst controller has), and a driver watches a fenced step's fences:
    #: set on the steps of a partitioned plan, where a wake-up per step boundary costs more
    #: than the step. In-process models ignore it.
    reply_poll_s: float = 0.0

    @abstractmethod
    def execute(self, request: Request, measure_timing: bool = False,
                deadline_ns: int | None = None) -> ExecutionResult:
        """Run synchronously (executeSynchronously). A failed computation or a request the device
        rejects is the result's status (a missed deadline: MISSED_DEADLINE_TRANSIENT), with the
        message in :attr:`last_error` where the model keeps one. Raises ``HalError`` when the call
        itself fails: DEAD_OBJECT for a driver process that is gone or stopped answering,
        GENERAL_FAILURE for a reply that breaks the protocol, INVALID_ARGUMENT for a request the
        transport refuses (the runtime's ``_fallback.execute`` turns these into statuses)."""

    def execute_fenced(self, request: Request, fences: list, measure_timing: bool = False,
                       deadline_ns: int | None = None, timeout_after_fence_ns: int | None = None):
        """executeFenced: launch ``request`` to run once the sync fences ``fences`` (fds, the
        caller's) signalled, and return the launched :class:`FencedRun`, or None: the default, as AOSP's
        CPU device, runs fenced work in-process (the runtime waits for the fences, then calls
        :meth:`execute`). Raises ``HalError`` when the driver refuses the launch or is gone."""
        return None

    def configure_burst(self, low_power: bool = False):
        """configureExecutionBurst: a controller whose ``execute`` runs like :meth:`execute`
        (``release()`` frees it), or None (the default, as AOSP's CPU device): executions go
        through :meth:`execute`. Raises ``HalError`` when the driver refuses the burst."""
        return None

    def release(self) -> None:
        """Free driver-side resources."""


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
        from nnscope.runtime.hal.errors import HalError  # noqa: PLC0415
        from nnscope.runtime.hal.types import ErrorStatus  # noqa: PLC0415

        raise HalError(ErrorStatus.GENERAL_FAILURE, f"{self.name} does not cache compilations")

    def supported_extensions(self) -> tuple:
        """``getSupportedExtensions``: ``runtime.hal.extensions.Extension`` records (none here)."""
        return ()

    def get_extension_support(self, extension_name: str) -> bool:
        """ANeuralNetworksDevice_getExtensionSupport: False unless the device supports the
        extension and the runtime's allowlist lets this program use extensions."""
        from nnscope.runtime.extensions import get_extension_support  # noqa: PLC0415 - runtime library check
        return get_extension_support(self, extension_name)

    def number_of_cache_files_needed(self) -> tuple[int, int]:
        """getNumberOfCacheFilesNeeded: (model cache files, data cache files); (0, 0) does
        not cache."""
        return (0, 0)

    def write_cache(self, prepared: PreparedModel, model_cache, data_cache, token: bytes) -> None:
        """Driver side of prepareModel_1_3 with cache files (fds): save ``prepared`` into them
        (the default caches nothing; errors: OSError or ValueError)."""

    def prepare_model_from_cache_files(self, model_cache, data_cache, token: bytes,
                                       deadline_ns: int | None = None) -> PreparedModel:
        """Driver side of prepareModelFromCache_1_3: the model read back from the cache fds,
        or ``HalError``; the default: no caching (GENERAL_FAILURE)."""
        from nnscope.runtime.hal.types import ErrorStatus  # noqa: PLC0415

        raise HalError(ErrorStatus.GENERAL_FAILURE, f"{self.name} does not cache compilations")

    #: The driver's memory budget (``runtime.drivers.memory_budget.MemoryBudget``), None: unbounded.
    memory = None
    #: Whether :meth:`allocate` gives device memory (an IBuffer); False for in-process devices.
    allocates_memory: bool = False

    def allocate(self, dimensions, roles):
        """IDevice::allocate: device memory for a MemoryDesc whose ``roles`` are ``(prepared
        model, "input"|"output", io index, frequency)``. The default, as AOSP's CPU device:
        HalError GENERAL_FAILURE (the runtime then uses its own memory)."""
        from nnscope.runtime.hal.types import ErrorStatus  # noqa: PLC0415

        raise HalError(ErrorStatus.GENERAL_FAILURE, f"{self.name} has no device memory")

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

    def launched(self) -> bool:
        """Whether a backing process (remote devices) has been started; always True here."""
        return True

    def launch(self, wait: bool = False) -> None:
        """Start any backing process (remote devices; a no-op here).

        ``wait=False`` only spawns it, so the runtime can start several driver processes in
        parallel; ``wait=True`` then blocks until it serves (raising ``HalError`` if it cannot).
        """

    def shutdown(self) -> None:
        """Release the device (stop its process for remote devices)."""
