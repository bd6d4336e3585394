"""``sample-litert``: an accelerator driver that compiles its partition to LiteRT (XNNPACK).

As a vendor driver translates the NNAPI model it is given into its engine's format,
``prepareModel`` translates the step's subgraph into a TFLite flatbuffer
(``runtime.tflite._writer``, span ``[NN_LD_PC]LiteRtDriver::translate``) and builds a LiteRT
``Interpreter(model_content=...)`` (``[NN_LD_PC]LiteRtDriver::buildInterpreter``): XNNPACK for a
float step, LiteRT's builtin kernels for a step with quantized tensors (bit-exact with NNAPI's
reference requantization). ``getSupportedOperations`` claims exactly what translates and what
LiteRT then accepts (``litert_claims``); the rest goes to other devices. An execution copies
each input from its request pool into the interpreter (``set_tensor``; ``resize_tensor_input``
when an unknown dimension changes), invokes (``[NN_LD_PE]LiteRT::invoke``; ``timeOnDevice``)
and copies each output from the interpreter's tensor into its pool: one copy each way.
Deadlines, memory budget and the driver's scheduling are the sample drivers'
(:class:`~runtime.drivers.sample.SamplePreparedModel`); an invoke is not interruptible, so a
deadline passing during it gives MISSED_DEADLINE_TRANSIENT afterwards. The compilation cache
holds the flatbuffer (data cache) and the model's inputs and outputs (model cache), see
:mod:`runtime.drivers.litert_cache`.

Threads: :data:`NNSCOPE_LITERT_THREADS` (default 1), read by the driver process at start.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> from nnscope.runtime.hal.device_types import Request, RequestArgument as Arg
    >>> hal_model = tiny_add().to_hal()  # output = input0 + input1, float32 [1, 4]
    >>> pool = bytearray(np.ones(8, np.float32).tobytes() + bytes(16))  # two inputs, one output
    >>> request = Request(inputs=(Arg(offset=0, length=16), Arg(offset=16, length=16)),
    ...                   outputs=(Arg(offset=32, length=16),), pools=(pool,))
    >>> driver = LiteRtDriver()  # in-process here; the runtime talks to it in a driver process
    >>> driver.supported_operations(hal_model)
    [True]
    >>> prepared = driver.prepare_model(hal_model)
    >>> prepared.execute(request, measure_timing=True).timing
    Timing(time_on_device=..., time_in_driver=...)
    >>> np.frombuffer(pool, np.float32, 4, 32).tolist()
    [2.0, 2.0, 2.0, 2.0]
    >>> prepared.release()
"""
from __future__ import annotations

import os
import time
from typing import Mapping

from nnscope import tracing
from nnscope.runtime.drivers import memory_budget
from nnscope.runtime.drivers.base import Device, PreparedModel
from nnscope.runtime.drivers.cpu import write_outputs
from nnscope.runtime.drivers.memory_budget import MemoryBudget
from nnscope.runtime.drivers.sample import Load, SamplePreparedModel
from nnscope.runtime.hal.device_types import Capabilities, ExecutionResult, PerformanceInfo, Request
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (DeviceType, ErrorStatus, HalModel, OperandType as T, Preference,
                               Priority, is_scalar)
from nnscope.runtime.hal.validate import invalid, validate_model
from nnscope.runtime.drivers.litert_claims import Claims
from nnscope.runtime.drivers.litert_engine import LiteRtEngine
from nnscope.runtime.tflite._translate import translate
from nnscope.runtime.tflite._writer import TENSOR_TYPES, Translation, Untranslatable
from nnscope.timing import Timing
from nnscope.tracing import Layer, Phase
from nnscope.tracing.naming import format_name

NAME = "sample-litert"
NNSCOPE_LITERT_THREADS = "NNSCOPE_LITERT_THREADS"
"""Threads of each LiteRT interpreter of the ``sample-litert`` driver (default 1)."""
#: Advertised performance relative to nnapi-reference (lower is faster): measured by
#: ``benchmarks/model_latency.py`` (face detector: nnapi-reference 5.0x LiteRT's time, this
#: driver 1.1x: about 0.25 of the reference). Float32 and quant8 alike.
PERFORMANCE = PerformanceInfo(0.25, 0.5)
_invoke_tag = format_name(Layer.DRIVER, Phase.EXECUTION)
_now = time.perf_counter_ns


def configured_threads(environ: Mapping[str, str] | None = None) -> int:
    """:data:`NNSCOPE_LITERT_THREADS` from ``environ`` (default 1). Raises ValueError."""
    text = (os.environ if environ is None else environ).get(NNSCOPE_LITERT_THREADS, "").strip() or "1"
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise ValueError(f"{NNSCOPE_LITERT_THREADS}={text!r}: expected a thread count from 1 to 64")
    return int(text)


class LiteRtPreparedModel(SamplePreparedModel):
    """A step compiled to LiteRT, behind the sample drivers' request binding and policies."""

    def __init__(self, model: HalModel, engine: LiteRtEngine, load: Load, charge) -> None:
        super().__init__(model, engine, PERFORMANCE, load, charge)

    def _execute(self, request: Request, measure: bool, deadline_ns: int | None,
                 recorder) -> ExecutionResult:
        start = _now()
        binding = self._binding_for(request, deadline_ns)
        if isinstance(binding, ExecutionResult):
            return binding
        engine = self.executor
        try:
            with engine.lock:
                engine.load(binding.inputs)
                invoked = _now()
                if recorder is not None:
                    recorder[1]((_invoke_tag, "LiteRT::invoke", recorder[2]()))
                try:
                    engine.interpreter.invoke()
                finally:
                    if recorder is not None:
                        recorder[0](recorder[2]())
                on_device = _now() - invoked
                status, shapes = write_outputs(binding, engine.results())
        except HalError as error:
            return self._fail(error.status, str(error))
        except (RuntimeError, ValueError) as error:
            return self._fail(ErrorStatus.GENERAL_FAILURE, f"LiteRT: {error}")
        if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
            return self._fail(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed during execution")
        if status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
            return ExecutionResult(status, shapes)
        if not measure and shapes is binding.ok_shapes:
            return binding.ok_result
        timing = Timing(on_device // 1000, (_now() - start) // 1000) if measure else None
        return ExecutionResult(status, shapes, timing)

    def bound_run(self, request: Request, result: ExecutionResult):
        return None


class LiteRtDriver(Device):
    """The ``sample-litert`` device (an ACCELERATOR)."""

    name = NAME
    type = DeviceType.ACCELERATOR
    version = "nnscope-litert-1"
    feature_level = 30

    def __init__(self, threads: int | None = None) -> None:
        self.threads = configured_threads() if threads is None else threads
        self.budget_bytes: int | None = None  # the CPU kernels' per-operation budget: unused here
        self.memory = MemoryBudget(memory_budget.configured_driver_budget())
        self.load = Load()
        self.claims = Claims(self.threads)

    def capabilities(self) -> Capabilities:
        types = set(TENSOR_TYPES) - {T.TENSOR_BOOL8}
        listed = tuple((t, PERFORMANCE) for t in T if t in types or (is_scalar(t) and t != T.SUBGRAPH))
        return Capabilities(PERFORMANCE, PERFORMANCE, listed, PERFORMANCE, PERFORMANCE)

    def supported_operations(self, model: HalModel) -> list[bool]:
        validate_model(model)
        if model.referenced:
            return [False] * len(model.main.operations)
        return [self.claims.claims(model, op) for op in model.main.operations]

    def prepare_model(self, model: HalModel, preference: Preference = Preference.FAST_SINGLE_ANSWER,
                      priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
                      cache_dir: str | None = None, token: bytes | None = None) -> PreparedModel:
        if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
            raise HalError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline passed before prepareModel")
        validate_model(model)
        with tracing.driver(Phase.COMPILATION, "LiteRtDriver::translate"):
            try:
                translation = translate(model)
            except Untranslatable as error:
                raise invalid(f"{NAME} cannot translate the model: {error}") from None
        return self.prepared(model, translation)

    def prepared(self, model: HalModel, translation: Translation) -> LiteRtPreparedModel:
        """The prepared model of ``translation``: its interpreter built, its footprint charged
        (the flatbuffer, twice: LiteRT's copy and XNNPACK's packed weights)."""
        charge = self.memory.reserve(2 * len(translation.flatbuffer), memory_budget.PREPARE)
        try:
            with tracing.driver(Phase.COMPILATION, "LiteRtDriver::buildInterpreter"):
                engine = LiteRtEngine(translation, self.threads)
        except (RuntimeError, ValueError) as error:
            charge.release()
            raise HalError(ErrorStatus.GENERAL_FAILURE, f"LiteRT rejected the translation: {error}") from None
        return LiteRtPreparedModel(model, engine, self.load, charge)

    # ------------------------------------------------------------------ compilation caching
    def number_of_cache_files_needed(self) -> tuple[int, int]:
        return (1, 1)

    def write_cache(self, prepared: PreparedModel, model_cache, data_cache, token: bytes) -> None:
        from nnscope.runtime.drivers import litert_cache  # noqa: PLC0415
        litert_cache.save(self, prepared, model_cache, data_cache, token)

    def prepare_model_from_cache_files(self, model_cache, data_cache, token: bytes,
                                       deadline_ns: int | None = None) -> PreparedModel:
        from nnscope.runtime.drivers import litert_cache  # noqa: PLC0415
        if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
            raise HalError(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "deadline passed before prepareModelFromCache")
        return litert_cache.load(self, model_cache, data_cache, token)

