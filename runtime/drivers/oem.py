"""``sample-oem``: a driver for the deprecated OEM_OPERATION, with a documented toy semantics.

NNAPI's OEM_OPERATION (and its operand types OEM, an opaque scalar, and TENSOR_OEM_BYTE) mean
whatever the vendor says; vendor extensions replaced them. No other nnscope device supports them:
the CPU executor has no OEM kernel, so a model using them compiles only for this driver.

Toy semantics, "XOR with a key", checked here in full:

* input 0: TENSOR_OEM_BYTE data, any shape (fully specified at execution);
* input 1: OEM scalar, a constant of 1 to 64 bytes: the key;
* output 0: TENSOR_OEM_BYTE of input 0's shape: ``out[i] = data[i] ^ key[i % len(key)]``.

Anything else (count, types, a missing or oversized key, a shape mismatch) is INVALID_ARGUMENT.

Example:
    >>> oem_xor(bytes([1, 2, 3]), bytes([0xFF])).hex()
    'fefdfc'
"""
from __future__ import annotations

import time

import numpy as np

from nnscope import tracing
from nnscope.runtime.drivers.base import Device, PreparedModel
from nnscope.runtime.drivers.served import ServedModel
from nnscope.runtime.hal.device_types import Capabilities, ExecutionResult, OutputShape, PerformanceInfo, Request
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (DeviceType, ErrorStatus, HalModel, OperandLifetime as L,
                               OperandType as T, OperationType as Op, Preference, Priority)
from nnscope.runtime.hal.validate import invalid, merge_dimensions, pool_buffer, validate_model, validate_request
from nnscope.timing import Timing
from nnscope.tracing import Phase

NAME = "sample-oem"
MAX_KEY_BYTES = 64


def oem_xor(data: bytes, key: bytes) -> bytes:
    """The toy OEM_OPERATION: ``data`` XOR the repeated ``key``."""
    values = np.frombuffer(data, np.uint8)
    pad = np.resize(np.frombuffer(key, np.uint8), values.size)
    return (values ^ pad).tobytes()


def _key(model: HalModel, index: int) -> bytes:
    operand = model.main.operands[index]
    if operand.lifetime not in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
        raise invalid(f"OEM key (operand {index}) must be a constant")
    loc = operand.location
    source = model.operand_values if operand.lifetime == L.CONSTANT_COPY or loc.pool_index == -1 \
        else pool_buffer(model.pools[loc.pool_index])
    key = bytes(memoryview(source).cast("B")[loc.offset:loc.offset + loc.length])
    if not 1 <= len(key) <= MAX_KEY_BYTES:
        raise invalid(f"OEM key has {len(key)} bytes, needs 1 to {MAX_KEY_BYTES}")
    return key


def _check(model: HalModel, position: int) -> bytes:
    """The key of operation ``position`` if it is a valid toy OEM_OPERATION (else raises)."""
    graph = model.main
    op = graph.operations[position]
    if op.type != Op.OEM_OPERATION:
        raise invalid(f"operation {position}: {NAME} supports only OEM_OPERATION")
    if len(op.inputs) != 2 or len(op.outputs) != 1:
        raise invalid(f"operation {position}: OEM_OPERATION takes 2 inputs and 1 output")
    data, key, out = (graph.operands[i] for i in (*op.inputs, *op.outputs))
    if data.type != T.TENSOR_OEM_BYTE or key.type != T.OEM or out.type != T.TENSOR_OEM_BYTE:
        raise invalid(f"operation {position}: needs (TENSOR_OEM_BYTE, OEM) -> TENSOR_OEM_BYTE")
    if merge_dimensions(data.dimensions, out.dimensions) is None:
        raise invalid(f"operation {position}: output shape {list(out.dimensions)} differs from "
                      f"input {list(data.dimensions)}")
    return _key(model, op.inputs[1])


class OemDriver(Device):
    """The ``sample-oem`` device: the toy OEM_OPERATION only."""

    name = NAME
    type = DeviceType.ACCELERATOR
    version = "nnscope-oem-1"
    feature_level = 30
    budget_bytes = None

    def capabilities(self) -> Capabilities:
        perf = PerformanceInfo(1.0, 1.0)
        return Capabilities(perf, perf, ((T.TENSOR_OEM_BYTE, perf), (T.OEM, perf)), perf, perf)

    def supported_operations(self, model: HalModel) -> list[bool]:
        validate_model(model)
        flags = []
        for position in range(len(model.main.operations)):
            try:
                _check(model, position)
                flags.append(True)
            except HalError:
                flags.append(False)
        return flags

    def prepare_model(self, model: HalModel, preference: Preference = Preference.FAST_SINGLE_ANSWER,
                      priority: Priority = Priority.MEDIUM, deadline_ns: int | None = None,
                      cache_dir: str | None = None, token: bytes | None = None) -> PreparedModel:
        with tracing.driver(Phase.COMPILATION, "OemDriver::prepareModel"):
            validate_model(model)
            keys = [_check(model, position) for position in range(len(model.main.operations))]
            return OemPreparedModel(model, keys)


class OemPreparedModel(ServedModel):
    def __init__(self, model: HalModel, keys: list[bytes]):
        self.model, self.keys = model, keys

    def execute(self, request: Request, measure_timing: bool = False,
                deadline_ns: int | None = None) -> ExecutionResult:
        start = time.perf_counter_ns()
        with tracing.driver(Phase.EXECUTION, "OemDriver::execute"):
            try:
                status, shapes = self._run(request)
            except HalError as error:
                return ExecutionResult(error.status)
            except Exception:  # noqa: BLE001 - a driver answers, never raises
                return ExecutionResult(ErrorStatus.GENERAL_FAILURE)
        took = (time.perf_counter_ns() - start) // 1000
        return ExecutionResult(status, shapes, Timing(took, took) if measure_timing else None)

    def _run(self, request: Request):
        validate_request(request, self.model)
        graph, pools = self.model.main, [memoryview(pool_buffer(p)).cast("B") for p in request.pools]
        values, dims = {}, {}
        for arg, index in zip(request.inputs, graph.input_indexes):
            if arg.has_no_value:
                raise invalid(f"input operand {index} cannot be omitted")
            values[index] = bytes(pools[arg.pool_index][arg.offset:arg.offset + arg.length])
            dims[index] = merge_dimensions(graph.operands[index].dimensions, arg.dimensions)
        for op, key in zip(graph.operations, self.keys):
            with tracing.driver(Phase.COMPUTATION, "OEM_OPERATION"):
                if op.inputs[0] not in values:
                    raise invalid("OEM_OPERATION input is neither a model input nor computed")
                values[op.outputs[0]] = oem_xor(values[op.inputs[0]], key)
                dims[op.outputs[0]] = dims.get(op.inputs[0], graph.operands[op.inputs[0]].dimensions)
        status, shapes = ErrorStatus.NONE, []
        for arg, index in zip(request.outputs, graph.output_indexes):
            data = values[index]
            if len(data) > arg.length:
                status = ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
                shapes.append(OutputShape(tuple(dims[index]), False))
                continue
            pools[arg.pool_index][arg.offset:arg.offset + len(data)] = data
            shapes.append(OutputShape(tuple(dims[index]), True))
        return status, tuple(shapes)
