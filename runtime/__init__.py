"""nnscope runtime: the NNAPI programming model (Model -> Compilation -> Execution).

Names and meanings follow the NNAPI C API (``ANeuralNetworksModel_addOperand`` is
``Model.add_operand``, result codes are :class:`ResultCode`); every failure raises
:class:`NnError` carrying the code. Every public call is an NNTRACE span.

Example:
    >>> import numpy as np
    >>> from nnscope import runtime
    >>> from nnscope.runtime import OperandType as T, OperationType as Op
    >>> model = runtime.Model("add")
    >>> a, b, act, out = (model.add_operand(T.TENSOR_FLOAT32, (1, 4)), model.add_operand(T.TENSOR_FLOAT32, (1, 4)),
    ...                   model.add_operand(T.INT32), model.add_operand(T.TENSOR_FLOAT32, (1, 4)))
    >>> model.set_operand_value(act, 0)
    >>> _ = model.add_operation(Op.ADD, [a, b, act], [out])
    >>> model.identify_inputs_and_outputs([a, b], [out]); model.finish()
    >>> cpu = runtime.get_device("nnapi-reference")  # runtime.Compilation(model) would use every device
    >>> compilation = runtime.Compilation.for_devices(model, [cpu]); compilation.finish()
    >>> execution = runtime.Execution(compilation)
    >>> x = np.arange(4, dtype=np.float32).reshape(1, 4); y = np.empty_like(x)
    >>> execution.set_input(0, x); execution.set_input(1, x); execution.set_output(0, y)
    >>> execution.compute(); y.tolist()
    [[0.0, 2.0, 4.0, 6.0]]
    >>> execution.free(); compilation.free(); model.free()
"""
from nnscope.runtime.api import (BadDataError, BadStateError, NnError, OpFailedError,
                         OutputInsufficientSizeError, UnexpectedNullError)
from nnscope.runtime.burst import Burst
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.event import Event
from nnscope.runtime.execution import Execution
from nnscope.runtime.graphdump import NN_GRAPHDUMP, graph_dump
from nnscope.runtime.hal.types import (FuseCode, OperandType, OperationType, PaddingCode, Preference,
                               Priority, ResultCode)
from nnscope.runtime.manager import devices, get_device
from nnscope.runtime.memory import Memory
from nnscope.runtime.memory_desc import MemoryDesc
from nnscope.runtime.model import Model
from nnscope.timing import Duration

__all__ = [
    "Model", "Compilation", "Execution", "Burst", "Event", "Memory", "MemoryDesc", "devices", "get_device", "graph_dump",
    "NN_GRAPHDUMP", "NnError", "BadDataError", "BadStateError", "OpFailedError",
    "OutputInsufficientSizeError", "UnexpectedNullError", "ResultCode", "OperandType",
    "OperationType", "FuseCode", "PaddingCode", "Preference", "Priority", "Duration",
]
