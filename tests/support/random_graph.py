"""Seeded random NNAPI graphs, in the spirit of AOSP's TestRandomGraph (``nn/runtime/test/fuzzing``).

:func:`generate` grows a graph of 2-40 operations from a seed. Each step draws an operation type
from the generator table (``tests.support.random_graph_ops.GENERATORS``, one function per type),
which picks inputs from the tensors made so far (or new model inputs / constants) and random
parameters. The step is kept only when the reference kernel runs it, ``validate`` accepts the
inferred output shapes and every float output is finite; so output shapes and the graph's
reference values come from the numpy kernels, and the graph is valid by construction.
Tensors no operation consumes become the model's outputs.

Example:
    >>> graph = generate(1234)                         # doctest: +SKIP
    >>> model = graph.to_model(); inputs = graph.inputs()
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from nnscope.runtime import Model
from nnscope.runtime.hal.types import Operand, Operation, OperandType as T, OperationType as Op, numpy_dtype
from nnscope.runtime.ops import registry

MIN_OPERATIONS, MAX_OPERATIONS = 2, 40
FLOAT, QUANT, INT, BOOL = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32, T.TENSOR_BOOL8
#: Flavours of a graph: which data types its new inputs may take. In a "pure" graph every
#: operation's first input has that type and no INT32/BOOL8 tensor is made from scratch, so a
#: single-type driver (sample-float-*, sample-quant) supports the whole graph.
FLAVOURS = {"float": (FLOAT,), "quant": (QUANT,), "mixed": (FLOAT, QUANT),
            "float-pure": (FLOAT,), "quant-pure": (QUANT,)}
_ATTEMPTS_PER_OPERATION = 12


class Reject(Exception):
    """A generator cannot make its operation from what the graph offers (the step is redrawn)."""


@dataclass(eq=False)
class Tensor:
    """A tensor of the graph: a model input, a constant or an operation's output."""

    type: T
    value: np.ndarray
    scale: float = 0.0
    zero_point: int = 0
    kind: str = "temp"          # "input", "const" or "temp"
    index: int | None = None    # operand index in the built model
    consumed: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    def operand(self, dims=None) -> Operand:
        return Operand(self.type, self.shape if dims is None else dims, self.scale, self.zero_point)


@dataclass(frozen=True)
class Scalar:
    type: T
    value: Any

    def operand(self) -> Operand:
        return Operand(self.type)


@dataclass(frozen=True)
class OutSpec:
    """The type and quantisation of an output; its shape comes from the kernel."""

    type: T
    scale: float = 0.0
    zero_point: int = 0


@dataclass
class Step:
    type: Op
    inputs: list
    outputs: list


@dataclass
class Graph:
    seed: int
    flavour: str
    steps: list[Step] = field(default_factory=list)
    model_inputs: list[Tensor] = field(default_factory=list)
    rejected: collections.Counter = field(default_factory=collections.Counter)

    @property
    def operation_types(self) -> list[Op]:
        return [step.type for step in self.steps]

    def outputs(self) -> list[Tensor]:
        """Unconsumed operation outputs (all outputs of the last step are among them)."""
        return [t for step in self.steps for t in step.outputs if not t.consumed]

    def inputs(self) -> list[np.ndarray]:
        return [t.value for t in self.model_inputs]

    def reference_outputs(self) -> list[np.ndarray]:
        """The numpy kernels' values, computed while the graph grew."""
        return [t.value for t in self.outputs()]

    def to_model(self) -> Model:
        """A finished public-API :class:`~runtime.Model` of this graph."""
        model = Model(f"random_graph_{self.seed}")
        for tensor in self.model_inputs:
            tensor.index = model.add_operand(tensor.type, tensor.shape, tensor.scale, tensor.zero_point)
        for step in self.steps:
            ins = [_add_input(model, item) for item in step.inputs]
            outs = []
            for tensor in step.outputs:
                dims = tensor.shape if tensor.value.ndim else None
                tensor.index = model.add_operand(tensor.type, dims, tensor.scale, tensor.zero_point)
                outs.append(tensor.index)
            model.add_operation(step.type, ins, outs)
        model.identify_inputs_and_outputs([t.index for t in self.model_inputs],
                                          [t.index for t in self.outputs()])
        model.finish()
        return model

    def describe(self) -> str:
        return f"seed {self.seed} ({self.flavour}): " + " ".join(t.name for t in self.operation_types)


def _add_input(model: Model, item) -> int:
    if isinstance(item, Scalar):
        index = model.add_operand(item.type)
        model.set_operand_value(index, item.value)
        return index
    if item.kind == "const":
        item.index = model.add_operand(item.type, item.shape, item.scale, item.zero_point)
        model.set_operand_value(item.index, item.value)
    return item.index


Generator = Callable[["Builder"], None]


class Builder:
    """What a generator works with: the random source, the tensors so far, and :meth:`emit`."""

    def __init__(self, graph: Graph, rng: np.random.Generator):
        self.graph = graph
        self.rng = rng
        self.types = FLAVOURS[graph.flavour]
        self.pure = graph.flavour.endswith("-pure")
        self.pool: list[Tensor] = []
        self.pending: list[Tensor] = []   # new model inputs of the step being made

    # -- random helpers ------------------------------------------------------------------
    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def int(self, low: int, high: int) -> int:
        """Uniform in [low, high]."""
        return int(self.rng.integers(low, high + 1))

    def data_type(self, allowed=(FLOAT, QUANT)) -> T:
        usable = [t for t in self.types if t in allowed]
        if not usable:
            raise Reject("no data type of this flavour")
        return self.choice(usable)

    def quant_params(self) -> tuple[float, int]:
        return float(self.choice((0.02, 0.05, 0.1, 0.25))), self.int(0, 255)

    def random_shape(self, rank: int) -> tuple[int, ...]:
        return tuple(self.int(1, 4) for _ in range(rank))

    # -- tensors ---------------------------------------------------------------------------
    def tensor(self, types=(FLOAT, QUANT), ranks=(1, 2, 3, 4), fresh: float = 0.25, low=-2.0,
               high=2.0, shape=None) -> Tensor:
        """An existing tensor of one of ``types``/``ranks`` (or ``shape``), else a new input."""
        fits = [t for t in self.pool if t.type in types and t.value.ndim in ranks
                and (shape is None or t.shape == tuple(shape)) and t.value.size]
        if fits and self.rng.random() >= fresh:
            return self.choice(fits)
        creatable = [t for t in types if t in self.types or (t in (INT, BOOL) and not self.pure)]
        if not creatable:
            raise Reject("no tensor of a type this flavour may create")
        return self.new_input(self.choice(creatable),
                              shape or self.random_shape(self.choice(ranks)), low, high)

    def new_input(self, data_type: T, shape, low=-2.0, high=2.0) -> Tensor:
        tensor = self._random_tensor(data_type, shape, low, high, kind="input")
        self.pending.append(tensor)
        return tensor

    def const(self, data_type: T, shape=None, low=-1.0, high=1.0, value=None, scale=0.0,
              zero_point=0) -> Tensor:
        if value is not None:
            return Tensor(data_type, np.asarray(value, numpy_dtype(data_type)), scale, zero_point, "const")
        tensor = self._random_tensor(data_type, shape, low, high, kind="const")
        if scale:
            tensor.scale, tensor.zero_point = scale, zero_point
        return tensor

    def _random_tensor(self, data_type, shape, low, high, kind) -> Tensor:
        shape = tuple(int(d) for d in shape)
        if data_type == FLOAT:
            return Tensor(FLOAT, self.rng.uniform(low, high, shape).astype(np.float32), kind=kind)
        if data_type == QUANT:
            scale, zero_point = self.quant_params()
            return Tensor(QUANT, self.rng.integers(0, 256, shape).astype(np.uint8), scale,
                          zero_point, kind)
        if data_type == INT:
            return Tensor(INT, self.rng.integers(int(low), int(high) + 1, shape).astype(np.int32),
                          kind=kind)
        if data_type == BOOL:
            return Tensor(BOOL, self.rng.integers(0, 2, shape).astype(np.bool_), kind=kind)
        raise ValueError(f"no random values for {data_type!r}")

    def i32(self, value) -> Scalar:
        return Scalar(T.INT32, int(value))

    def f32(self, value) -> Scalar:
        return Scalar(T.FLOAT32, float(value))

    def flag(self, value) -> Scalar:
        return Scalar(T.BOOL, bool(value))

    def ints(self, values) -> Tensor:
        return self.const(INT, value=np.asarray(values, np.int32))

    def same(self, tensor: Tensor) -> OutSpec:
        """An output with ``tensor``'s type and quantisation."""
        return OutSpec(tensor.type, tensor.scale, tensor.zero_point)

    def out(self, data_type: T) -> OutSpec:
        """An output of ``data_type`` with random quantisation where it has one."""
        if data_type == QUANT:
            return OutSpec(QUANT, *self.quant_params())
        return OutSpec(data_type)

    # -- operations ------------------------------------------------------------------------
    def emit(self, op_type: Op, inputs: list, outputs: list[OutSpec]) -> list[Tensor]:
        """Run ``op_type`` on ``inputs`` with the reference kernel and keep it in the graph.

        Raises:
            Reject: the kernel or ``validate`` refused it, or a float output is not finite.
        """
        record = registry.get(op_type)
        if self.pure and (not isinstance(inputs[0], Tensor) or inputs[0].type not in self.types):
            raise Reject("first input not of the pure graph's type")
        if self.pure and any(item.type in (FLOAT, QUANT) and item.type not in self.types
                             for item in (*inputs, *outputs)):
            raise Reject("a data type other than the pure graph's")
        in_ops = [item.operand() for item in inputs]
        values = [item.value for item in inputs]
        operation = Operation(op_type, tuple(range(len(inputs))),
                              tuple(range(len(inputs), len(inputs) + len(outputs))))
        out_ops = [Operand(spec.type, (), spec.scale, spec.zero_point) for spec in outputs]
        try:
            results = record.execute(registry.OpContext(operation, values, in_ops, out_ops))
            made = [Tensor(spec.type, np.asarray(result, numpy_dtype(spec.type)), spec.scale,
                           spec.zero_point) for spec, result in zip(outputs, results)]
            record.validate(in_ops, [t.operand() for t in made])
        except Reject:
            raise
        except Exception as error:  # noqa: BLE001 - any refusal means "draw another step"
            raise Reject(f"{type(error).__name__}: {error}") from None
        if any(t.type == FLOAT and not np.isfinite(t.value).all() for t in made):
            raise Reject("non-finite output")
        if any(t.value.ndim and not t.value.size for t in made):
            raise Reject("empty output")
        self._keep(Step(op_type, list(inputs), made))
        return made

    def _keep(self, step: Step) -> None:
        for item in step.inputs:
            if isinstance(item, Tensor):
                item.consumed = True
        self.graph.model_inputs += [t for t in self.pending if t in step.inputs]
        self.pending.clear()
        self.graph.steps.append(step)
        self.pool += [t for t in step.outputs if t.value.ndim]


def generate(seed: int, generators: dict[Op, Generator] | None = None,
             operations: int | None = None) -> Graph:
    """The random graph of ``seed`` (same seed, same graph)."""
    from tests.support.random_graph_ops import GENERATORS  # noqa: PLC0415 - the table imports us
    table = GENERATORS if generators is None else generators
    table = {op: make for op, make in table.items() if registry.get(op) is not None}
    rng = np.random.default_rng(seed)
    graph = Graph(seed, str(rng.choice(sorted(FLAVOURS))))
    builder = Builder(graph, rng)
    types = sorted(table, key=lambda op: op.value)
    wanted = operations or int(rng.integers(MIN_OPERATIONS, MAX_OPERATIONS + 1))
    for _ in range(wanted * _ATTEMPTS_PER_OPERATION):
        if len(graph.steps) >= wanted:
            break
        op_type = types[int(rng.integers(len(types)))]
        builder.pending.clear()
        try:
            table[op_type](builder)
        except Reject as reason:
            graph.rejected[(op_type.name, str(reason)[:80])] += 1
    return graph
