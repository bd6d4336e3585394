"""Sample drivers modelled on AOSP's ``driver/sample``: the reference CPU executor behind
different advertised capabilities and supported-operation sets.

Each sample is a :class:`SampleConfig` (AOSP's ~90-line ``SampleDriverFloatFast`` & co. become a
few fields). :class:`SampleDriver` is the in-process ``Device`` for one config; in production it
runs inside a driver process (``python -m nnscope.runtime.drivers sample-float-fast --socket PATH``) and
the runtime talks to it through ``runtime.drivers.ipc.RemoteDevice``. An operation is supported
when the executor implements it, the config lists it, the type of its first input is one of the
config's primary types and every tensor operand's type is allowed.

Example:
    >>> driver = SampleDriver(SAMPLES["sample-float-fast"])
    >>> driver.capabilities().performance(T.TENSOR_FLOAT32).exec_time
    0.8
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass

from nnscope.runtime.drivers import cache_payload, memory_budget
from nnscope.runtime.drivers.base import Device, PreparedModel
from nnscope.runtime.drivers.cache_files import CacheError
from nnscope.runtime.drivers.cpu import CpuPreparedModel
from nnscope.runtime.drivers.memory_budget import Charge, MemoryBudget
from nnscope.runtime.hal.device_types import Capabilities, ExecutionResult, PerformanceInfo, Request
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (DeviceType, ErrorStatus, HalModel, OperandType as T, OperationType as O,
                               Preference, Priority, is_scalar)
from nnscope.runtime.hal.validate import invalid, validate_model
from nnscope.runtime.ops import control_flow, registry
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.ops.registry import OpValidationError

_FLOAT = frozenset({T.TENSOR_FLOAT32})
_QUANT = frozenset({T.TENSOR_QUANT8_ASYMM})
_INDEX = frozenset({T.TENSOR_INT32})
_BOOL = frozenset({T.TENSOR_BOOL8})  # comparison results, SELECT conditions
_EXECUTE = memory_budget.EXECUTE
#: Estimated nanoseconds per operation at exec_time 1.0, before a model has run.
_NS_PER_OPERATION = 20_000


@dataclass(frozen=True)
class SampleConfig:
    """One sample driver. ``None`` for ``operations``/``primary_types`` means "all"."""

    name: str
    perf: PerformanceInfo
    primary_types: frozenset | None = None
    tensor_types: frozenset | None = None
    operations: frozenset | None = None
    device_type: DeviceType = DeviceType.CPU
    version: str = "nnscope-sample-1.3"


SAMPLES = {c.name: c for c in (
    SampleConfig("sample-all", PerformanceInfo(1.1, 1.1)),
    SampleConfig("sample-float-fast", PerformanceInfo(0.8, 1.2), _FLOAT, _FLOAT | _INDEX | _BOOL),
    SampleConfig("sample-float-slow", PerformanceInfo(1.3, 0.7), _FLOAT, _FLOAT | _INDEX | _BOOL),
    SampleConfig("sample-quant", PerformanceInfo(50.0, 1.0), _QUANT,
                 _QUANT | _INDEX | _BOOL | {T.TENSOR_QUANT8_SYMM_PER_CHANNEL}),
    SampleConfig("sample-minimal", PerformanceInfo(0.4, 0.5), _FLOAT, _FLOAT | _INDEX,
                 frozenset({O.ADD, O.CONV_2D, O.DEPTHWISE_CONV_2D, O.FULLY_CONNECTED,
                            O.AVERAGE_POOL_2D, O.MAX_POOL_2D, O.RELU})),
)}


class Load:
    """The executions running on one sample driver: when the last of them should end."""

    __slots__ = ("running", "busy_until_ns")

    def __init__(self) -> None:
        self.running = 0
        self.busy_until_ns = 0

    def pending_ns(self, now: int) -> int:
        return max(0, self.busy_until_ns - now) if self.running else 0


class SamplePreparedModel(CpuPreparedModel):
    """The reference CPU prepared model (request binding, timing, tracing of ``cpu.py``), with
    AOSP's mapping of a kernel failure caused by an omitted input to INVALID_ARGUMENT, and a
    deadline policy: the run's duration is estimated (from its earlier runs, else from the
    advertised performance); a deadline that even an idle driver cannot make is declined with
    MISSED_DEADLINE_PERSISTENT, one missed only because of the work already running with
    MISSED_DEADLINE_TRANSIENT; a deadline passed before the start, or passing during the run
    (which stops at the next operation boundary), gives MISSED_DEADLINE_TRANSIENT. While it runs,
    an execution holds its request's bytes in the driver's memory budget (``memory_budget``:
    RESOURCE_EXHAUSTED_TRANSIENT / _PERSISTENT when they do not fit), as the model its footprint."""

    def __init__(self, model: HalModel, executor, perf: PerformanceInfo, load: Load, charge: Charge):
        super().__init__(model, executor)
        self.load = load
        #: The model's footprint in the driver's memory budget (given back by :meth:`release`).
        self.charge = charge
        weakref.finalize(self, charge.release)
        self._need: tuple = (None, 0)  # (request, its bytes) of the request charged last
        self.mean_ns = len(model.main.operations) * _NS_PER_OPERATION * perf.exec_time
        self.runs = 0  # successful runs measured (the first replaces the advertised estimate)

    def execute(self, request: Request, measure_timing: bool = False,
                deadline_ns: int | None = None) -> ExecutionResult:
        if deadline_ns is not None:
            declined = self._decline(deadline_ns)
            if declined is not None:
                return declined
        try:
            taken = self._reserve(request)
        except HalError as error:
            return self._fail(error.status, str(error))
        memory = self.charge.budget
        load, start = self.load, time.monotonic_ns()
        load.running += 1
        load.busy_until_ns = max(load.busy_until_ns, start + int(self.mean_ns))
        try:
            result = CpuPreparedModel.execute(self, request, measure_timing, deadline_ns)
        finally:
            load.running -= 1
            memory.give(taken)
        if not result.status:
            self._took(time.monotonic_ns() - start)
        elif result.status == ErrorStatus.GENERAL_FAILURE and any(a.has_no_value for a in request.inputs):
            return ExecutionResult(ErrorStatus.INVALID_ARGUMENT)
        return result

    def bound_run(self, request: Request, result: ExecutionResult):
        """:meth:`CpuPreparedModel.bound_run`, accounted as :meth:`execute` accounts: the
        request's bytes held in the memory budget while it runs (False, the ordinary path then
        reports, when they do not fit), the load, and the running estimate of its time."""
        run = CpuPreparedModel.bound_run(self, request, result)
        if run is None:
            return None
        load, memory = self.load, self.charge.budget

        def accounted() -> bool:
            try:
                taken = self._reserve(request)
            except HalError:
                return False
            start = time.monotonic_ns()
            load.running += 1
            load.busy_until_ns = max(load.busy_until_ns, start + int(self.mean_ns))
            try:
                ran = run()
            finally:
                load.running -= 1
                memory.give(taken)
            if ran:
                self._took(time.monotonic_ns() - start)
            return ran

        return accounted

    def _took(self, took_ns: int) -> None:
        """A successful run took ``took_ns``: the running estimate follows it."""
        self.mean_ns = took_ns if not self.runs else self.mean_ns + (took_ns - self.mean_ns) / 4
        self.runs += 1

    def release(self) -> None:
        self.charge.release()

    def forget(self, match) -> None:
        super().forget(match)
        if self._need[0] is not None and match(self._need[0]):
            self._need = (None, 0)

    def _reserve(self, request: Request) -> int:
        """Take ``request``'s bytes from the driver's memory budget (the request is bound, and
        so validated, first); returns them. Raises HalError: the binding's, or RESOURCE_EXHAUSTED_*."""
        need_of, needed = self._need
        if need_of is not request:
            cached_request, binding = self._cache
            if cached_request is not request:
                binding = self._bind(request)
                self._cache = (request, binding)
            needed = memory_budget.request_bytes(binding.inputs, binding.capacities)
            self._need = (request, needed)
        charge = self.charge
        charge.budget.take(needed, _EXECUTE, charge.bytes)
        return needed

    def _decline(self, deadline_ns: int, queued_ns: int = 0) -> ExecutionResult | None:
        """The MISSED_DEADLINE result to decline with, or None to run; ``queued_ns``: the
        expected wait in the driver's queue before this run starts."""
        now = time.monotonic_ns()
        left, needed = deadline_ns - now, int(self.mean_ns)
        waiting = self.load.pending_ns(now) + queued_ns
        if left <= 0 or (needed <= left and needed + waiting <= left):
            return None  # passed already: the CPU model reports it (TRANSIENT, as fenced runs want)
        status = ErrorStatus.MISSED_DEADLINE_PERSISTENT if needed > left else ErrorStatus.MISSED_DEADLINE_TRANSIENT
        return self._fail(status, f"needs about {needed / 1e6:.3g} ms (+{waiting / 1e6:.3g} ms of running and "
                                  f"queued work), {max(left, 0) / 1e6:.3g} ms left before the deadline")

    decline_queued = _decline  # the driver's scheduler asks before it queues a run


class SampleDriver(Device):
    """The reference CPU executor advertised as one :class:`SampleConfig`."""

    feature_level = 30

    def __init__(self, config: SampleConfig):
        self.config = config
        self.name = config.name
        self.type = config.device_type
        self.version = config.version
        #: Bytes one operation may allocate (None: ``runtime.ops.budget.configured_budget()``).
        self.budget_bytes: int | None = None
        #: What its prepared models and running executions may hold at once (``memory_budget``).
        self.memory = MemoryBudget(memory_budget.configured_driver_budget())
        self.load = Load()

    def capabilities(self) -> Capabilities:
        perf = self.config.perf
        types = self.config.tensor_types
        listed = tuple((t, perf) for t in T if t != T.SUBGRAPH
                       and (types is None or t in types or is_scalar(t)))
        return Capabilities(perf, perf, listed, perf, perf)

    def supported_operations(self, model: HalModel) -> list[bool]:
        validate_model(model)
        return [self._supports(model, op) for op in model.main.operations]

    def _supports(self, model: HalModel, operation, graph=None) -> bool:
        cfg = self.config
        record = registry.get(operation.type)
        if record is None or (cfg.operations is not None and operation.type not in cfg.operations):
            return False
        graph = graph or model.main
        operands = graph.operands
        ins = [operands[i] for i in operation.inputs]
        outs = [operands[i] for i in operation.outputs]
        if cfg.primary_types is not None and (not ins or ins[0].type not in cfg.primary_types):
            return False
        if cfg.tensor_types is not None and any(
                not is_scalar(o.type) and o.type != T.SUBGRAPH and o.type not in cfg.tensor_types
                for o in (*ins, *outs)):
            return False
        try:
            record.validate(ins, outs)
            if operation.type in control_flow.TYPES:  # IF/WHILE: every referenced operation too
                control_flow.check_signature(operation, graph, model)
                return all(self._supports(model, inner, sub) for sub, inner
                           in control_flow.referenced_operations(model, operation, graph))
        except (OpValidationError, ValueError, TypeError, IndexError, KeyError, AttributeError):
            return False
        return True

    def prepare_model(self, model: HalModel, preference: Preference = Preference.FAST_SINGLE_ANSWER,
                      priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
                      cache_dir: str | None = None, token: bytes | None = None) -> PreparedModel:
        if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
            raise HalError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline passed before prepareModel")
        unsupported = [i for i, ok in enumerate(self.supported_operations(model)) if not ok]
        if unsupported:
            raise invalid(f"{self.name} does not support operations {unsupported}")
        try:
            executor = CpuExecutor(model, self.budget_bytes)
        except (OpValidationError, ValueError, TypeError, IndexError, KeyError) as error:
            raise invalid(f"model rejected by the CPU executor: {error}") from None
        return self._prepared(model, executor)

    def _prepared(self, model: HalModel, executor, footprint: int | None = None) -> SamplePreparedModel:
        """The prepared model, its footprint (computed unless given) charged (HalError
        RESOURCE_EXHAUSTED_* if refused)."""
        if footprint is None:
            footprint = memory_budget.model_footprint(model, executor)
        charge = self.memory.reserve(footprint, memory_budget.PREPARE)
        return SamplePreparedModel(model, executor, self.config.perf, self.load, charge)

    # ------------------------------------------------------------------ compilation caching
    def number_of_cache_files_needed(self) -> tuple[int, int]:
        """One model-cache file and one data-cache file (``runtime.drivers.cache_payload``)."""
        return (1, 1)

    def write_cache(self, prepared: PreparedModel, model_cache, data_cache, token: bytes) -> None:
        """Save ``prepared`` to the cache fds (during prepareModel_1_3). Raises CacheError/OSError."""
        cache_payload.save(self, prepared, model_cache, data_cache, token)

    def prepare_model_from_cache_files(self, model_cache, data_cache, token: bytes,
                                       deadline_ns: int | None = None) -> PreparedModel:
        """prepareModelFromCache_1_3: the prepared model the cache fds hold, or HalError."""
        if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
            raise HalError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline passed before prepareModelFromCache")
        try:
            model, executor, footprint = cache_payload.load(self, model_cache, data_cache, token)
        except CacheError as error:
            raise HalError(ErrorStatus.GENERAL_FAILURE, f"cache not usable: {error}") from None
        return self._prepared(model, executor, footprint)
