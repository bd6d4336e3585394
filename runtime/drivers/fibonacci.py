"""``sample-fibonacci``: the example extension driver (AOSP ``extensions/example/fibonacci``).

It supports exactly the extension ``com.example.fibonacci`` (see
``runtime.hal.fibonacci_extension``): the FIBONACCI operation with its operand types
EXAMPLE_INT64 and EXAMPLE_TENSOR_QUANT64_ASYMM (plus TENSOR_FLOAT32 input/output, as AOSP's
driver). No ordinary operation runs here. The driver validates every extension operand and
parameter it receives: a bad one makes ``supported_operations`` answer False for that operation,
and ``prepare_model`` / ``execute`` answer INVALID_ARGUMENT; nothing a client sends crashes it.
Executions emit ``[NN_LD_PE]FibonacciDriver::execute`` with a COMPUTATION scope per operation
named ``com.example.fibonacci:FIBONACCI``.

Example:
    >>> driver = FibonacciDriver()
    >>> [e.name for e in driver.supported_extensions()]
    ['com.example.fibonacci']
    >>> fibonacci_numbers(6).tolist()
    [1, 1, 2, 3, 5, 8]
"""
from __future__ import annotations

import math
import struct
import time

import numpy as np

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime.drivers.base import Device, PreparedModel
from nnscope.runtime.drivers.served import ServedModel
from nnscope.runtime.hal import fibonacci_extension as fx
from nnscope.runtime.hal.device_types import (Capabilities, ExecutionResult, OutputShape, PerformanceInfo,
                                      Request)
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.extensions import (Extension, ExtensionOperandTypeInformation, by_prefix,
                                    is_extension, prefix_of, type_within)
from nnscope.runtime.hal.types import (DeviceType, ErrorStatus, HalModel, OperandLifetime as L,
                               OperandType as T, Preference, Priority)
from nnscope.runtime.hal.validate import invalid, pool_buffer, validate_model, validate_request
from nnscope.timing import Timing
from nnscope.tracing import Phase

NAME = "sample-fibonacci"
EXTENSION = fx.EXAMPLE_FIBONACCI_EXTENSION_NAME
#: Largest n of a quantized output (F(94) no longer fits 64 bits) and of a float32 output.
MAX_N_QUANT64, MAX_N_FLOAT = 93, 1 << 16
_INT64 = struct.Struct("<q")


def fibonacci_numbers(n: int) -> np.ndarray:
    """The first ``n`` Fibonacci numbers 1, 1, 2, ... as uint64 (n <= 93)."""
    out = np.ones(n, np.uint64)
    for i in range(2, n):
        out[i] = out[i - 1] + out[i - 2]
    return out


class _Checker:
    """Validation of one model against the extension (raises ``invalid`` HalErrors)."""

    def __init__(self, model: HalModel):
        self.model = model
        self.prefix = next((p for name, p in model.extension_name_to_prefix if name == EXTENSION), None)
        self.names = by_prefix(model.extension_name_to_prefix)

    def ours(self, value: int, within: int) -> bool:
        return self.prefix is not None and is_extension(value) and prefix_of(value) == self.prefix \
            and type_within(value) == within

    def operand(self, index: int, where: str):
        operand = self.model.main.operands[index]
        kind = operand.type
        if is_extension(kind) and prefix_of(kind) != self.prefix:
            raise invalid(f"{where}: operand {index} has type {int(kind)} of extension "
                          f"{self.names.get(prefix_of(kind), '?')!r}, which {NAME} does not support")
        if self.ours(kind, fx.EXAMPLE_INT64):
            if operand.dimensions:
                raise invalid(f"{where}: EXAMPLE_INT64 operand {index} is a scalar, has dimensions")
        elif self.ours(kind, fx.EXAMPLE_TENSOR_QUANT64_ASYMM):
            if len(operand.dimensions) > 1:
                raise invalid(f"{where}: operand {index} must be 1-D, has {list(operand.dimensions)}")
            quant_params(operand, f"{where}: operand {index}")
        elif is_extension(kind):
            raise invalid(f"{where}: operand {index}: unknown {EXTENSION} operand type {type_within(kind)}")
        if operand.extension_data is not None and not self.ours(kind, fx.EXAMPLE_TENSOR_QUANT64_ASYMM):
            raise invalid(f"{where}: operand {index} carries extension data its type does not take")
        if is_extension(kind) and (operand.scale != 0 or operand.zero_point != 0):
            raise invalid(f"{where}: extension operand {index} must have scale 0 and zero point 0")
        return operand

    def operation(self, position: int) -> None:
        """Raise unless operation ``position`` is a valid FIBONACCI."""
        op = self.model.main.operations[position]
        where = f"operation {position}"
        for index in (*op.inputs, *op.outputs):
            self.operand(index, where)
        if not self.ours(op.type, fx.FIBONACCI):
            raise invalid(f"{where}: {NAME} supports only {EXTENSION}:FIBONACCI, not "
                          f"{getattr(op.type, 'name', op.type)}")
        if len(op.inputs) != 1 or len(op.outputs) != 1:
            raise invalid(f"{where}: FIBONACCI takes 1 input and 1 output, got "
                          f"{len(op.inputs)} and {len(op.outputs)}")
        n, out = (self.model.main.operands[i] for i in (op.inputs[0], op.outputs[0]))
        if not (self.ours(n.type, fx.EXAMPLE_INT64) or n.type == T.TENSOR_FLOAT32):
            raise invalid(f"{where}: input n must be EXAMPLE_INT64 or TENSOR_FLOAT32")
        if n.type == T.TENSOR_FLOAT32 and (len(n.dimensions) > 1 or n.dimensions not in ((), (0,), (1,))):
            raise invalid(f"{where}: TENSOR_FLOAT32 input n must hold one value, has {list(n.dimensions)}")
        if not (self.ours(out.type, fx.EXAMPLE_TENSOR_QUANT64_ASYMM) or out.type == T.TENSOR_FLOAT32):
            raise invalid(f"{where}: output must be EXAMPLE_TENSOR_QUANT64_ASYMM or TENSOR_FLOAT32")
        if out.type == T.TENSOR_FLOAT32 and len(out.dimensions) > 1:
            raise invalid(f"{where}: output must be 1-D, has {list(out.dimensions)}")
        if n.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
            _n_value(_constant(self.model, op.inputs[0]), n, self, f"{where}: constant n")

    def supported(self) -> list[bool]:
        flags = []
        for position in range(len(self.model.main.operations)):
            try:
                self.operation(position)
                flags.append(True)
            except HalError:
                flags.append(False)
        return flags


def quant_params(operand, where: str) -> fx.ExampleQuant64AsymmParams:
    """The operand's ExampleQuant64AsymmParams, checked (scale finite > 0, zero point >= 0)."""
    try:
        params = fx.ExampleQuant64AsymmParams.unpack(operand.extension_data)
    except ValueError as error:
        raise invalid(f"{where}: {error}") from None
    if not (math.isfinite(params.scale) and params.scale > 0) or params.zero_point < 0:
        raise invalid(f"{where}: bad ExampleQuant64AsymmParams scale {params.scale} "
                      f"zero point {params.zero_point}")
    return params


class FibonacciDriver(Device):
    """The ``sample-fibonacci`` device: FIBONACCI of ``com.example.fibonacci`` only."""

    name = NAME
    type = DeviceType.ACCELERATOR
    version = "nnscope-fibonacci-1"
    feature_level = 30
    budget_bytes = None  # the driver process CLI sets it; unused here

    def capabilities(self) -> Capabilities:
        perf = PerformanceInfo(1.0, 1.0)
        return Capabilities(perf, perf, ((T.TENSOR_FLOAT32, perf),), perf, perf)

    def supported_extensions(self) -> tuple[Extension, ...]:
        return (Extension(EXTENSION, (
            ExtensionOperandTypeInformation(fx.EXAMPLE_INT64, False, 8),
            ExtensionOperandTypeInformation(fx.EXAMPLE_TENSOR_QUANT64_ASYMM, True, 8))),)

    def supported_operations(self, model: HalModel) -> list[bool]:
        validate_model(model)
        return _Checker(model).supported()

    def prepare_model(self, model: HalModel, preference: Preference = Preference.FAST_SINGLE_ANSWER,
                      priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
                      cache_dir: str | None = None, token: bytes | None = None) -> PreparedModel:
        with tracing.driver(Phase.COMPILATION, "FibonacciDriver::prepareModel"):
            validate_model(model)
            checker = _Checker(model)
            for position in range(len(model.main.operations)):
                checker.operation(position)
            return FibonacciPreparedModel(model, checker)


def _constant(model: HalModel, index: int) -> bytes:
    loc = model.main.operands[index].location
    source = model.operand_values if model.main.operands[index].lifetime == L.CONSTANT_COPY \
        or loc.pool_index == -1 else pool_buffer(model.pools[loc.pool_index])
    return bytes(memoryview(source)[loc.offset:loc.offset + loc.length])


def _n_value(data: bytes, operand, checker: _Checker, where: str) -> int:
    """n from the bytes of an EXAMPLE_INT64 scalar or a one-value TENSOR_FLOAT32."""
    if checker.ours(operand.type, fx.EXAMPLE_INT64):
        if len(data) != 8:
            raise invalid(f"{where}: EXAMPLE_INT64 needs 8 bytes, got {len(data)}")
        n = _INT64.unpack(data)[0]
    elif operand.type == T.TENSOR_FLOAT32:
        if len(data) != 4:
            raise invalid(f"{where}: n as TENSOR_FLOAT32 needs 4 bytes, got {len(data)}")
        value = float(np.frombuffer(data, np.float32)[0])
        if not math.isfinite(value):
            raise invalid(f"{where}: n is {value}")
        n = int(value)  # truncated, as AOSP's static_cast<int64_t>
    else:
        return 0  # a constant FIBONACCI does not read (e.g. an output-only operand)
    if not 1 <= n <= MAX_N_FLOAT:
        raise invalid(f"{where}: n = {n} outside [1, {MAX_N_FLOAT}]")
    return n


class FibonacciPreparedModel(ServedModel):
    """Runs the model's FIBONACCI operations in order (intermediates stay in the driver)."""

    def __init__(self, model: HalModel, checker: _Checker):
        self.model, self.checker = model, checker
        self.last_error: str | None = None

    def execute(self, request: Request, measure_timing: bool = False,
                deadline_ns: int | None = None) -> ExecutionResult:
        start = time.perf_counter_ns()
        with tracing.driver(Phase.EXECUTION, "FibonacciDriver::execute"):
            try:
                if deadline_ns is not None and time.monotonic_ns() > deadline_ns:
                    return self._fail(ErrorStatus.MISSED_DEADLINE_TRANSIENT, "deadline passed")
                status, shapes = self._run(request)
            except HalError as error:
                return self._fail(error.status, str(error))
            except Exception as error:  # noqa: BLE001 - a driver answers, never raises
                return self._fail(ErrorStatus.GENERAL_FAILURE, f"{type(error).__name__}: {error}")
        took = (time.perf_counter_ns() - start) // 1000
        return ExecutionResult(status, shapes, Timing(took, took) if measure_timing else None)

    def _fail(self, status: ErrorStatus, message: str) -> ExecutionResult:
        self.last_error = message
        vlog.log("driver", "FibonacciDriver", "execution failed (%s): %s", status.name, message)
        return ExecutionResult(status)

    def _run(self, request: Request) -> tuple[ErrorStatus, tuple]:
        validate_request(request, self.model)
        graph = self.model.main
        pools = [memoryview(pool_buffer(p)).cast("B") for p in request.pools]
        values: dict[int, bytes] = {}
        for arg, index in zip(request.inputs, graph.input_indexes):
            if arg.has_no_value:
                raise invalid(f"input operand {index}: FIBONACCI inputs cannot be omitted")
            values[index] = bytes(pools[arg.pool_index][arg.offset:arg.offset + arg.length])
        for index, operand in enumerate(graph.operands):
            if operand.lifetime in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
                values[index] = _constant(self.model, index)
        for position, op in enumerate(graph.operations):
            name = getattr(op.type, "name", f"{EXTENSION}:FIBONACCI")
            with tracing.driver(Phase.COMPUTATION, name):
                n_operand = graph.operands[op.inputs[0]]
                n = _n_value(values[op.inputs[0]], n_operand, self.checker, f"operation {position} input n")
                values[op.outputs[0]] = self._compute(n, graph.operands[op.outputs[0]], position)
            vlog.log("driver", "FibonacciDriver", "operation %d (%s) n=%d", position, name, n)
        return self._write(request, pools, values)

    def _compute(self, n: int, out, position: int) -> bytes:
        where = f"operation {position} output"
        if out.dimensions and out.dimensions[0] not in (0, n):
            raise invalid(f"{where}: declared {list(out.dimensions)} but n = {n}")
        if out.type == T.TENSOR_FLOAT32:
            result = np.ones(n, np.float64)
            for i in range(2, n):
                result[i] = result[i - 1] + result[i - 2]
            with np.errstate(over="ignore"):
                return result.astype(np.float32).tobytes()
        params = quant_params(out, where)
        if n > MAX_N_QUANT64:
            raise invalid(f"{where}: n = {n} overflows 64 bits (at most {MAX_N_QUANT64})")
        real = fibonacci_numbers(n).astype(np.float64) / params.scale + float(params.zero_point)
        if not np.all(np.isfinite(real)) or float(real.max()) >= 2.0 ** 64:
            raise invalid(f"{where}: quantized values overflow uint64 (scale {params.scale})")
        return real.astype(np.uint64).tobytes()

    def _write(self, request: Request, pools: list, values: dict) -> tuple[ErrorStatus, tuple]:
        status, shapes = ErrorStatus.NONE, []
        for arg, index in zip(request.outputs, self.model.main.output_indexes):
            data = values[index]
            shape = (len(data) // (4 if self.model.main.operands[index].type == T.TENSOR_FLOAT32 else 8),)
            if len(data) > arg.length:
                status = ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
                shapes.append(OutputShape(shape, False))
                continue
            pools[arg.pool_index][arg.offset:arg.offset + len(data)] = data
            shapes.append(OutputShape(shape, True))
        return status, tuple(shapes)
