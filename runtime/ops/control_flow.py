"""IF and WHILE (AOSP ``CpuExecutor::executeIfOperation`` / ``executeWhileOperation``).

IF: ``condition (TENSOR_BOOL8 [1]), then-subgraph, else-subgraph, inputs...`` -> the outputs of
the branch the condition picks, run on the inputs. WHILE: ``condition-subgraph, body-subgraph,
inputs...`` where the inputs are m input-output, k state-only and n input-only operands (the body
has m + k outputs, the WHILE m): the condition runs on all inputs; while it is true the body runs
and its outputs replace the first m + k inputs; the outputs are the final m input-outputs.
Subgraph operands may have unknown dimensions: values get their real shapes as they run.

A WHILE that runs longer than the execution's loop timeout (``Execution.set_loop_timeout``,
default 2 s, at most 15 s) raises :class:`LoopTimeout` (MISSED_DEADLINE_TRANSIENT). The timeout
and the observation of the current run live in a per-thread :class:`RunState` that the executor
sets (:func:`running`) around a model with control flow; nested subgraphs read it.

The kernels need the model's subgraphs, so the executor builds them with :func:`kernel` (the
registered ``execute`` only reports misuse). :func:`check_signature` checks an operation against
the subgraphs it references (AOSP ``validateIfOperation`` / ``validateWhileOperation``).

Example:
    >>> current().loop_timeout_ns  # the default: 2 s
    2000000000
    >>> with running(RunState(loop_timeout_ns=1_000_000)):  # as CpuExecutor.run does around a run
    ...     current().loop_timeout_ns                       # what nested IF/WHILE kernels read
    1000000
    >>> current().loop_timeout_ns
    2000000000
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, NamedTuple, Sequence

import numpy as np

from nnscope.runtime.hal.types import (HalModel, Operand, OperandLifetime as L, OperandType as T,
                               Operation, OperationType, Subgraph)
from nnscope.runtime.ops import preempt
from nnscope.runtime.ops._common import expect
from nnscope.runtime.ops.registry import OpContext, OpValidationError, register

#: Default and maximum loop timeout (ANeuralNetworks_getDefaultLoopTimeout / getMaximumLoopTimeout).
LOOP_TIMEOUT_DEFAULT_NS = 2_000_000_000
LOOP_TIMEOUT_MAXIMUM_NS = 15_000_000_000
TYPES = frozenset({OperationType.IF, OperationType.WHILE})

#: ``run_subgraph(referenced_index, input_values) -> output values``
SubgraphRunner = Callable[[int, list], list]


class LoopTimeout(Exception):
    """A WHILE loop ran past the loop timeout (reported as MISSED_DEADLINE_TRANSIENT)."""


class DeadlinePassed(Exception):
    """An execution's deadline passed between two operations (MISSED_DEADLINE_TRANSIENT)."""


def check_deadline(deadline_ns: int, step: int) -> None:
    """Raise DeadlinePassed before operation ``step`` once ``deadline_ns`` (monotonic) passed."""
    if time.monotonic_ns() > deadline_ns:
        raise DeadlinePassed(f"deadline passed before operation {step}")


def checkpoint(deadline_ns: int | None, yielding: preempt.YieldRequest | None, step: int) -> None:
    """An operation boundary: DeadlinePassed past the deadline, ``preempt.Preempted`` when
    higher-priority work asked the run to yield."""
    if deadline_ns is not None:
        check_deadline(deadline_ns, step)
    if yielding is not None and yielding.wanted:
        raise preempt.Preempted(step)


class RunState(NamedTuple):
    """What a run of a model with control flow passes down to its subgraphs."""

    loop_timeout_ns: int = LOOP_TIMEOUT_DEFAULT_NS
    recorder: tuple | None = None  # the run's recorder (a hot recorder, or the null recorder)
    logging: bool = False          # vlog ``cpuexe``


_local = threading.local()
_DEFAULT_STATE = RunState()


def current() -> RunState:
    """The run state of this thread (the default outside :func:`running`)."""
    return getattr(_local, "state", _DEFAULT_STATE)


@contextmanager
def running(state: RunState):
    """Make ``state`` this thread's run state for the duration of a run."""
    previous = current()
    _local.state = state
    try:
        yield
    finally:
        _local.state = previous


# --------------------------------------------------------------------------- kernels
def _truth(value) -> bool:
    return bool(np.asarray(value).reshape(-1)[0])


def _if_kernel(operation: Operation, graph: Subgraph, run: SubgraphRunner):
    then_index = graph.operands[operation.inputs[1]].location.offset
    else_index = graph.operands[operation.inputs[2]].location.offset

    def execute(ctx: OpContext) -> list:
        branch = then_index if _truth(ctx.inputs[0]) else else_index
        return run(branch, list(ctx.inputs[3:]))
    return execute


def _while_kernel(operation: Operation, graph: Subgraph, model: HalModel, run: SubgraphRunner):
    cond_index = graph.operands[operation.inputs[0]].location.offset
    body_index = graph.operands[operation.inputs[1]].location.offset
    state_count = len(model.referenced[body_index].output_indexes)  # m + k
    output_count = len(operation.outputs)                           # m

    def execute(ctx: OpContext) -> list:
        values = list(ctx.inputs[2:])
        timeout = current().loop_timeout_ns
        start = time.monotonic_ns()
        while True:
            if time.monotonic_ns() - start > timeout:
                raise LoopTimeout(f"WHILE loop timed out after {timeout / 1e9:g} s")
            if not _truth(run(cond_index, values)[0]):
                return values[:output_count]
            values[:state_count] = run(body_index, values)
    return execute


def kernel(operation: Operation, graph: Subgraph, model: HalModel, run: SubgraphRunner):
    """The executable kernel of an IF or WHILE ``operation`` of ``graph``."""
    if operation.type == OperationType.IF:
        return _if_kernel(operation, graph, run)
    return _while_kernel(operation, graph, model, run)


def _unbound(ctx: OpContext) -> list:
    raise OpValidationError(f"{ctx.operation.type.name} runs only inside CpuExecutor (it needs "
                            "the model's subgraphs)")


# --------------------------------------------------------------------------- validation
def _expect_subgraph(operand: Operand, what: str) -> None:
    expect(operand.type == T.SUBGRAPH and operand.lifetime == L.SUBGRAPH and operand.location
           is not None, f"{what} must be a SUBGRAPH operand referring to a model")


def _expect_condition(operand: Operand, what: str) -> None:
    expect(operand.lifetime != L.NO_VALUE, f"{what} has no value")
    expect(operand.type == T.TENSOR_BOOL8 and operand.dimensions in ((), (1,)),
           f"{what} must be a TENSOR_BOOL8 of shape [1], got {operand.type.name} "
           f"{list(operand.dimensions)}")


def _validate_if(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect(len(inputs) >= 3 and len(outputs) >= 1,
           f"IF needs at least 3 inputs and 1 output, got {len(inputs)} and {len(outputs)}")
    _expect_condition(inputs[0], "input 0 (condition)")
    _expect_subgraph(inputs[1], "input 1 (then branch)")
    _expect_subgraph(inputs[2], "input 2 (else branch)")


def _validate_while(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect(len(inputs) >= 3 and len(outputs) >= 1,
           f"WHILE needs at least 3 inputs and 1 output, got {len(inputs)} and {len(outputs)}")
    _expect_subgraph(inputs[0], "input 0 (condition)")
    _expect_subgraph(inputs[1], "input 1 (body)")


def _compatible(a: Operand, b: Operand) -> bool:
    """AOSP ``compatible``: same type and quantisation, dimensions that can be combined."""
    if (a.type, a.scale, a.zero_point, a.channel_quant) != (b.type, b.scale, b.zero_point, b.channel_quant):
        return False
    if not a.dimensions or not b.dimensions:
        return True
    return len(a.dimensions) == len(b.dimensions) and all(
        x == y or 0 in (x, y) for x, y in zip(a.dimensions, b.dimensions))


def _match(outer: Sequence[Operand], graph: Subgraph, indexes: Sequence[int], what: str) -> None:
    expect(len(outer) == len(indexes), f"{what}: {len(indexes)} operands, operation gives {len(outer)}")
    for position, (operand, index) in enumerate(zip(outer, indexes)):
        inner = graph.operands[index]
        expect(_compatible(operand, inner), f"{what} {position}: {inner.type.name} "
               f"{list(inner.dimensions)} does not match {operand.type.name} {list(operand.dimensions)}")


def check_signature(operation: Operation, graph: Subgraph, model: HalModel) -> None:
    """Check ``operation`` against the subgraphs it references.

    Raises:
        OpValidationError: a count or an operand type/shape does not match.
    """
    ins = [graph.operands[i] for i in operation.inputs]
    outs = [graph.operands[i] for i in operation.outputs]
    ref = [model.referenced[op.location.offset] if op.type == T.SUBGRAPH else None for op in ins]
    if operation.type == OperationType.IF:
        for branch, what in ((ref[1], "then branch"), (ref[2], "else branch")):
            _match(ins[3:], branch, branch.input_indexes, f"{what} input")
            _match(outs, branch, branch.output_indexes, f"{what} output")
        return
    cond, body = ref[0], ref[1]
    _match(ins[2:], cond, cond.input_indexes, "condition input")
    expect(len(cond.output_indexes) == 1, "the condition subgraph must have exactly one output")
    _expect_condition(cond.operands[cond.output_indexes[0]], "condition output")
    _match(ins[2:], body, body.input_indexes, "body input")
    state = len(body.output_indexes)
    expect(len(outs) <= state <= len(ins) - 2,
           f"body has {state} outputs: needs between {len(outs)} and {len(ins) - 2}")
    _match(ins[2:2 + state], body, body.output_indexes, "body output")
    _match(outs, body, body.output_indexes[:len(outs)], "output")


def check_acyclic(model: HalModel) -> None:
    """No subgraph may reference itself, directly or through others.

    Raises:
        OpValidationError: naming a subgraph on a reference cycle.
    """
    edges = [{op.location.offset for op in g.operands if op.lifetime == L.SUBGRAPH and op.location}
             for g in model.referenced]
    done: set[int] = set()
    for start in range(len(edges)):
        path, stack = set(), [(start, iter(edges[start]))]
        path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.discard(node)
                done.add(node)
            elif child in path:
                raise OpValidationError(f"referenced subgraph {child} references itself")
            elif child not in done and 0 <= child < len(edges):
                path.add(child)
                stack.append((child, iter(edges[child])))


register(OperationType.IF, "control_flow", _validate_if, _unbound)
register(OperationType.WHILE, "control_flow", _validate_while, _unbound)


def referenced_operations(model: HalModel, operation: Operation, graph: Subgraph):
    """Yield ``(subgraph, operation)`` for every operation of the subgraphs an IF/WHILE
    ``operation`` of ``graph`` references, transitively (each subgraph once)."""
    seen: set[int] = set()
    pending = [graph.operands[i].location.offset for i in operation.inputs
               if graph.operands[i].lifetime == L.SUBGRAPH and graph.operands[i].location]
    while pending:
        index = pending.pop()
        if index in seen or not 0 <= index < len(model.referenced):
            continue
        seen.add(index)
        sub = model.referenced[index]
        for inner in sub.operations:
            yield sub, inner
            pending += [sub.operands[i].location.offset for i in inner.inputs
                        if sub.operands[i].lifetime == L.SUBGRAPH and sub.operands[i].location]


def check_loop_timeout(loop_timeout_ns: int | None) -> None:
    """A driver's check of a request's loop timeout (None: the default).

    Raises:
        ValueError: negative, or above :data:`LOOP_TIMEOUT_MAXIMUM_NS`.
    """
    if loop_timeout_ns is not None and not (
            type(loop_timeout_ns) is int and 0 <= loop_timeout_ns <= LOOP_TIMEOUT_MAXIMUM_NS):
        raise ValueError(f"loop timeout {loop_timeout_ns!r} ns outside [0, {LOOP_TIMEOUT_MAXIMUM_NS}]")
