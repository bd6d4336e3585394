"""One LiteRT interpreter of a translated step (``sample-litert``'s engine), shared by the driver
(``runtime.drivers.litert``) and its operation claims (``runtime.drivers.litert_claims``), which
build one per operation to see that LiteRT takes it.

Example::

    engine = LiteRtEngine(translate(step_model), threads=1)
    with engine.lock:
        engine.load(input_arrays)
        engine.interpreter.invoke()
        outputs = engine.results()
"""
from __future__ import annotations

import contextlib
import os
import threading

from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.runtime.tflite._writer import Translation


class LiteRtEngine:
    """One LiteRT interpreter of a translation; one execution at a time (``lock``). A float
    translation runs on XNNPACK; one with quantized tensors on LiteRT's builtin kernels, which
    requantize as NNAPI's reference does (XNNPACK's uint8/int8 kernels round differently: one
    step off on some elements, seen on random graphs). ``allocate=False`` leaves the
    allocation to the first :meth:`load` (a slice whose stored input shapes are placeholders
    for shapes known only when the graph runs)."""

    def __init__(self, translation: Translation, threads: int, allocate: bool = True) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415 - optional extra

        self.translation = translation
        self.xnnpack = not translation.quantized
        resolver = OpResolverType.AUTO if self.xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        with _first_xnnpack_quietly(self.xnnpack):
            self.interpreter = Interpreter(model_content=translation.flatbuffer, num_threads=threads,
                                           experimental_op_resolver_type=resolver)
            if allocate:
                self.interpreter.allocate_tensors()
        self.allocated = self.strict = allocate  # placeholder shapes: any dimension may change
        self.inputs = [d["index"] for d in self.interpreter.get_input_details()]
        self.outputs = [d["index"] for d in self.interpreter.get_output_details()]
        self.shapes = [tuple(d["shape"]) for d in self.interpreter.get_input_details()]
        self.lock = threading.Lock()

    def load(self, values: list) -> None:
        """Copy the input arrays in (resizing the tensors whose shape changed)."""
        interpreter = self.interpreter
        resized = False
        for position, value in enumerate(values):
            if value is None:
                raise HalError(ErrorStatus.INVALID_ARGUMENT, f"input {position} omitted")
            if value.shape != self.shapes[position]:
                interpreter.resize_tensor_input(self.inputs[position], value.shape,
                                                strict=self.strict)
                self.shapes[position] = value.shape
                resized = True
        if resized or not self.allocated:
            interpreter.allocate_tensors()
            self.allocated = True
        for index, value in zip(self.inputs, values):
            interpreter.set_tensor(index, value)

    def results(self) -> list:
        """Views of the output tensors (drop them before the next invoke)."""
        return [self.interpreter.tensor(index)() for index in self.outputs]


_announced = threading.Event()  # LiteRT has said "Created TensorFlow Lite XNNPACK delegate" here


@contextlib.contextmanager
def _first_xnnpack_quietly(xnnpack: bool):
    """LiteRT prints one INFO line on the process's stderr when it first creates its XNNPACK
    delegate; a driver's stderr is the user's terminal, so that first creation writes to
    /dev/null (the driver's own warnings use the ``nn`` logger, not this window)."""
    if not xnnpack or _announced.is_set():
        yield
        return
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)
        _announced.set()
