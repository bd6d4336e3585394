"""Shared pieces of the ported AOSP ``TestValidation`` cases (tests/runtime/test_validation_*.py).

``code(call, *args)`` runs one public call and returns the NNAPI result code it gives
(``NO_ERROR`` when it returns), so each case reads like the C ``EXPECT_EQ(call(...), code)``.
``create_model`` builds the fixture model of ``ValidationTestModel::createModel``: ADD of two
TENSOR_FLOAT32 [2] inputs and an INT32 activation input, one TENSOR_FLOAT32 [2] output.
"""
from __future__ import annotations

import os

import numpy as np

from nnscope.runtime import Compilation, Execution, Memory, Model, NnError, ResultCode
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op

NO_ERROR = ResultCode.NO_ERROR
UNEXPECTED_NULL = ResultCode.UNEXPECTED_NULL
BAD_DATA = ResultCode.BAD_DATA
BAD_STATE = ResultCode.BAD_STATE
#: ``kShortWaitInNanoseconds`` of TestValidation.
SHORT_WAIT_NS = 1_000_000_000
UINT64_MAX = (1 << 64) - 1
#: ``kInvalidTensorType1/2``: dimension info that is not a list of uint32 values.
INVALID_DIMENSIONS = ("2", [-1], [1.5], 7)


def code(call, *args, **kwargs) -> ResultCode:
    """The result code of ``call(*args, **kwargs)``; any other exception fails the test."""
    try:
        call(*args, **kwargs)
    except NnError as error:
        return error.code
    return NO_ERROR


def add_tensor(model: Model, kind=T.TENSOR_FLOAT32, dims=(2,)) -> int:
    return model.add_operand(kind, dims)


def create_model(model: Model | None = None) -> Model:
    """``createModel()``: 0, 1 tensors, 2 INT32 scalar, 3 = ADD(0, 1, 2); all but 3 are inputs."""
    model = model or Model("validation")
    a, b = add_tensor(model), add_tensor(model)
    act, out = model.add_operand(T.INT32), add_tensor(model)
    model.add_operation(Op.ADD, [a, b, act], [out])
    model.identify_inputs_and_outputs([a, b, act], [out])
    model.finish()
    return model


def finished_compilation(model: Model | None = None, devices=None) -> Compilation:
    compilation = Compilation(model or create_model(), devices)
    compilation.finish()
    return compilation


def bind_add(execution: Execution) -> np.ndarray:
    """Set the three inputs and the output of a :func:`create_model` execution; return the output."""
    execution.set_input(0, np.float32([0, 0]))
    execution.set_input(1, np.float32([1, 1]))
    execution.set_input(2, np.int32(0))
    out = np.zeros(2, np.float32)
    execution.set_output(0, out)
    return out


def shared_memory(size: int = 20) -> Memory:
    """``ASharedMemory_create`` + ``ANeuralNetworksMemory_createFromFd(PROT_READ | PROT_WRITE)``."""
    fd = os.memfd_create("nnMemory")
    try:
        os.ftruncate(fd, size)
        import mmap  # noqa: PLC0415
        return Memory.from_fd(size, mmap.PROT_READ | mmap.PROT_WRITE, fd, 0)
    finally:
        os.close(fd)


class SecondCpu(CpuDevice):
    """A second in-process CPU device, for the two-device cases (``ValidationTestCompilationForDevices_2``)."""

    name = "fake-second-cpu"
