"""Run a .tflite model split as the TFLite NNAPI delegate splits it.

:class:`DelegatedModel` decides once where each operator goes (``delegation.decide``), then
builds, once, a kernel per step:

* a delegated partition becomes an NNAPI model (the partition sliced out of the .tflite and
  loaded by ``runtime.tflite`` for the feature level: HARD_SWISH below 30 is MUL and ADD, as
  the delegate builds it), compiled for the chosen devices (all of them by default), so
  NNAPI's own partitioning across devices still happens inside it; below feature level 30 its
  int8 tensors are uint8 in NNAPI, as the delegate passes them (``int8``: zero point and values
  + 128 going in, values - 128 coming out);
* an operator left to the CPU becomes a one-operator .tflite slice (with the constant-only
  operators feeding it) on a LiteRT interpreter in this process, built once and reused
  (``drivers.litert_engine``, as ``sample-litert`` builds its own: XNNPACK for float operators,
  LiteRT's builtin kernels for quantized ones).

An execution runs the steps in order. Tensors live in one table keyed by their .tflite index;
each crossing between NNAPI and LiteRT is one copy (into the interpreter, or into NNAPI's
request; NNAPI writes a partition's outputs straight into the buffers the table holds).

Traces look as TFLite's on a device: each CPU operator is a span named by its TFLite
operator (``CONV_2D``, or a custom operator's name), each partition one ``TfLiteNnapiDelegate``
span with the NNAPI spans of its execution inside, from the runtime down to the drivers.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph
    >>> g = FlatbufferGraph()
    >>> x, y, z = (g.tensor(n, (1, 4), "FLOAT32") for n in "xyz")
    >>> g.operator("RELU", [x], [y]); g.operator("GELU", [y], [z])
    >>> g.inputs, g.outputs = [x], [z]
    >>> from nnscope.runtime.manager import get_device
    >>> model = DelegatedModel(g.serialize(), devices=[get_device("nnapi-reference")])
    >>> model.compile()
    >>> model.delegation.summary()
    '1 of 2 operators delegated, in 1 partition'
    >>> [round(float(v), 3) for v in model.run([np.array([[-1, 0, 1, 2]], np.float32)])[0][0]]
    [0.0, 0.0, 0.841, 1.954]
    >>> model.free()
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from nnscope import tracing
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.delegate.delegation import (DEFAULT_MAX_PARTITIONS, CpuOperator, Delegation,
                                                 Partition, decide)
from nnscope.runtime.delegate.int8 import (SIGNED_INT8_LEVEL, as_uint8_model, int8_to_uint8,
                                           uint8_to_int8_in_place)
from nnscope.runtime.delegate.validate import FEATURE_LEVELS
from nnscope.runtime.drivers.litert_engine import LiteRtEngine
from nnscope.runtime.execution import Execution
from nnscope.runtime.hal.types import HalModel, numpy_dtype
from nnscope.runtime.manager import devices as all_devices
from nnscope.runtime.model import Model
from nnscope.runtime.tflite import UnsupportedOperator, convert_tflite
from nnscope.runtime.tflite._reader import TfliteGraph, element_dtype, read_graph
from nnscope.runtime.tflite._writer import Translation

#: The span of a delegated partition, as TFLite names the NNAPI delegate's kernel.
DELEGATE_KERNEL_SPAN = "TfLiteNnapiDelegate"

__all__ = ["DELEGATE_KERNEL_SPAN", "DelegatedModel", "default_feature_level"]


def default_feature_level(devices: Sequence | None) -> int:
    """The feature level of the devices in use: the lowest, within 27..30."""
    levels = [d.feature_level for d in (devices or all_devices())]
    return max(FEATURE_LEVELS[0], min([FEATURE_LEVELS[-1], *levels]))


def nnapi_model(sliced: bytes, feature_level: int, label: str = "<bytes>") -> HalModel:
    """The NNAPI model of a .tflite slice as the delegate builds it at ``feature_level``: only
    operations of that level (the loader builds a newer operator from older ones where the
    delegate does: HARD_SWISH below 30), int8 tensors as uint8 below API 30
    (:func:`int8.as_uint8_model`)."""
    hal, _, _ = convert_tflite(sliced, label, feature_level)
    return hal if feature_level >= SIGNED_INT8_LEVEL else as_uint8_model(hal)


def _int8_as_uint8(graph: TfliteGraph, tensors, dtypes) -> list[bool]:
    """Per tensor crossing into (or out of) a partition: an int8 tensor that is uint8 in NNAPI."""
    return [graph.tensors[t].type_name == "INT8" and np.dtype(d) == np.uint8
            for t, d in zip(tensors, dtypes)]


class _NnapiKernel:
    """A partition: its NNAPI model compiled once, and the output buffers NNAPI writes."""

    def __init__(self, step: Partition, data: bytes, graph: TfliteGraph, feature_level: int) -> None:
        self.step = step
        label = f"partition {step.number}"
        self.model = Model.from_hal(nnapi_model(step.slice(data), feature_level, label), name=label)
        self.compilation: Compilation | None = None
        self.input_dtypes = [numpy_dtype(self.model.operands[i].type) for i in self.model.inputs]
        self.buffers = [np.zeros(tuple(d or 1 for d in self.model.operands[i].dimensions),
                                 numpy_dtype(self.model.operands[i].type))
                        for i in self.model.outputs]
        output_dtypes = [b.dtype for b in self.buffers]
        self.unsigned_inputs = _int8_as_uint8(graph, step.inputs, self.input_dtypes)
        self.unsigned_outputs = _int8_as_uint8(graph, step.outputs, output_dtypes)

    def compile(self, devices, preference: int | None) -> None:
        self.compilation = Compilation(self.model, list(devices) if devices else None)
        if preference is not None:
            self.compilation.set_preference(preference)
        self.compilation.finish()

    def run(self, tensors: dict) -> None:
        with tracing.named(DELEGATE_KERNEL_SPAN):
            execution = Execution(self.compilation)
            for position, tensor in enumerate(self.step.inputs):
                execution.set_input(position, self._into_nnapi(tensors[tensor], position))
            for position, buffer in enumerate(self.buffers):
                execution.set_output(position, buffer)
            execution.start_compute().wait()
            execution.free()
            tensors.update(zip(self.step.outputs, self._out_of_nnapi()))

    def _into_nnapi(self, array: np.ndarray, position: int) -> np.ndarray:
        if self.unsigned_inputs[position]:
            return int8_to_uint8(array)
        return _as(array, self.input_dtypes[position])

    def _out_of_nnapi(self) -> list[np.ndarray]:
        """The output buffers as the model's tensors: uint8 ones made int8 again, in place."""
        return [uint8_to_int8_in_place(buffer) if unsigned else buffer
                for buffer, unsigned in zip(self.buffers, self.unsigned_outputs)]

    def device_names(self) -> list[str]:
        """The devices NNAPI chose for this partition, in plan order."""
        return list(dict.fromkeys(step.device.name for step in self.compilation.plan.steps))

    def free(self) -> None:
        if self.compilation is not None:
            self.compilation.free()


class _CpuKernel:
    """One operator on LiteRT's CPU kernels: its slice's interpreter, built once."""

    def __init__(self, step: CpuOperator, data: bytes, graph: TfliteGraph, label: str,
                 dynamic: bool = False) -> None:
        self.step = step
        operator = graph.operators[step.operators[0]]
        self.span = operator.name.removeprefix("CUSTOM:")
        quantized = any(graph.tensors[t].scales for t in (*step.inputs, *step.outputs))
        try:
            self.engine = LiteRtEngine(Translation(step.slice(data), (), (), quantized), threads=1,
                                       allocate=not dynamic)
        except (RuntimeError, ValueError) as error:
            raise UnsupportedOperator(f"{label}: operator {step.operators[0]} ({operator.label}) "
                                      f"does not run on LiteRT either: "
                                      f"{_first_line(error)}") from None
        details = self.engine.interpreter.get_input_details()
        self.dtypes = [d["dtype"] for d in details]

    def run(self, tensors: dict) -> None:
        engine = self.engine
        with tracing.named(self.span):
            engine.load([_as(tensors[t], dtype) for t, dtype in zip(self.step.inputs, self.dtypes)])
            engine.interpreter.invoke()
        for index, tensor in zip(engine.outputs, self.step.outputs):
            tensors[tensor] = engine.interpreter.get_tensor(index)

    def compile(self, devices, preference: int | None) -> None:
        """Nothing to do: the interpreter was built with the slice."""

    def free(self) -> None:
        self.engine = None


def _as(array: np.ndarray, dtype) -> np.ndarray:
    """``array`` as ``dtype`` (an INT64 tensor is INT32 in NNAPI), copied only when it differs."""
    return array if array.dtype == dtype else np.asarray(array, dtype)


def _first_line(error: Exception) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    unresolved = [line for line in lines if "unresolved custom op" in line]
    return (unresolved or lines or [type(error).__name__])[0]


class DelegatedModel:
    """A .tflite model run the NNAPI delegate's way: build, :meth:`compile` once, :meth:`run`
    many times. Building validates, partitions, makes each partition's NNAPI model and each
    CPU operator's LiteRT interpreter (the delegate's Prepare); compiling is NNAPI's.

    Args:
        data: the .tflite flatbuffer.
        devices: the NNAPI devices of the partitions (None: all, NNAPI's CPU fallback on; when
            named, operators they cannot run stay on the CPU, as ``getSupportedOperations`` says).
        feature_level: 27..30 (None: :func:`default_feature_level` of the devices).
        max_partitions: the delegate's limit (<= 0: none).

    Raises:
        TfliteFormatError: a truncated or corrupt flatbuffer (one line).
        UnsupportedOperator: an operator neither NNAPI nor LiteRT runs (one line naming it).
    """

    def __init__(self, data: bytes, devices: Sequence | None = None, feature_level: int | None = None,
                 max_partitions: int = DEFAULT_MAX_PARTITIONS, label: str = "<bytes>") -> None:
        self.graph = _read(data, label)
        self.devices = list(devices) if devices else None
        self.compiled = False
        level = feature_level or default_feature_level(self.devices)
        supported = _device_check(self.devices, level) if self.devices else None
        dynamic = dynamic_tensors(data, self.graph)
        self.delegation: Delegation = decide(data, level, max_partitions, supported, self.graph,
                                             dynamic)
        self.kernels = []
        try:
            for step in self.delegation.steps:
                self.kernels.append(_NnapiKernel(step, data, self.graph, level)
                                    if isinstance(step, Partition) else
                                    _CpuKernel(step, data, self.graph, label, bool(dynamic)))
        except BaseException:
            self.free()
            raise

    def compile(self, preference: int | None = None) -> None:
        """Compile every partition for the devices (once; ``preference``: a ``Preference``).

        Raises:
            NnError: a partition that does not compile.
        """
        for kernel in self.kernels:
            kernel.compile(self.devices, preference)
        self.compiled = True

    @property
    def input_names(self) -> list[str]:
        return [self.graph.tensors[i].name for i in self.graph.inputs]

    @property
    def output_names(self) -> list[str]:
        return [self.graph.tensors[i].name for i in self.graph.outputs]

    def input_specs(self) -> list[tuple[tuple[int, ...], np.dtype]]:
        """(shape, dtype) of each model input."""
        return [(t.shape, element_dtype(t.type_name)) for t in
                (self.graph.tensors[i] for i in self.graph.inputs)]

    def run(self, inputs: Sequence[np.ndarray], times: list | None = None) -> list[np.ndarray]:
        """One execution: the model's outputs for ``inputs`` (in model input order). With
        ``times``, appends each step's nanoseconds (one list per execution, in step order).

        Raises:
            NnError: BAD_STATE before :meth:`compile`.
        """
        if not self.compiled:
            raise NnError(ResultCode.BAD_STATE, "DelegatedModel.run: compile() it first")
        tensors = dict(zip(self.graph.inputs, inputs))
        if times is None:
            for kernel in self.kernels:
                kernel.run(tensors)
        else:
            times.append(_timed(self.kernels, tensors))
        return [np.array(tensors[i], element_dtype(self.graph.tensors[i].type_name))
                for i in self.graph.outputs]

    def step_devices(self) -> list[list[str]]:
        """Per step, the NNAPI devices that run it ([] for a CPU operator on LiteRT)."""
        return [k.device_names() if isinstance(k, _NnapiKernel) else [] for k in self.kernels]

    def free(self) -> None:
        for kernel in self.kernels:
            kernel.free()
        self.kernels = []


def _timed(kernels, tensors: dict) -> list[int]:
    """Run ``kernels`` as :meth:`DelegatedModel.run` does, with each one's nanoseconds."""
    times = []
    for kernel in kernels:
        start = time.perf_counter_ns()
        kernel.run(tensors)
        times.append(time.perf_counter_ns() - start)
    return times


def dynamic_tensors(data: bytes, graph: TfliteGraph) -> list[int]:
    """The tensors LiteRT sizes only when it runs (a RESHAPE to a computed shape, a WHILE's
    outputs, what follows them): those it leaves unallocated when it allocates the whole
    model. [] for a static model, or one LiteRT cannot build (its CPU operators say why)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415 - optional extra
    try:
        interpreter = Interpreter(model_content=data, experimental_op_resolver_type=
                                  OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        interpreter.allocate_tensors()
    except (RuntimeError, ValueError):
        return []
    return [i for i, t in enumerate(graph.tensors)
            if t.data is None and 0 not in t.shape and not _allocated(interpreter, i)]


def _allocated(interpreter, index: int) -> bool:
    try:
        interpreter.tensor(index)()
    except ValueError:  # "Tensor data is null": a dynamic tensor before its operator runs
        return False
    return True


def _read(data: bytes, label: str) -> TfliteGraph:
    from nnscope.runtime.tflite import TfliteFormatError  # noqa: PLC0415
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise TfliteFormatError(f"{label}: not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        return read_graph(data)
    except ValueError as error:
        raise type(error)(f"{label}: {error}") from None


def _device_check(devices: Sequence, feature_level: int):
    """``supported(slice)``: whether ``devices`` run every NNAPI operation of a slice (in the
    form the delegate gives it at ``feature_level``)."""
    def supported(sliced: bytes) -> bool:
        try:
            hal = nnapi_model(sliced, feature_level)
        except ValueError:
            return False
        model = Model.from_hal(hal)
        try:
            return all(model.get_supported_operations_for_devices(devices))
        finally:
            model.free()
    return supported
