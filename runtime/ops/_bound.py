"""Internal: a :class:`~runtime.ops.executor.CpuExecutor` run bound to fixed arrays.

A burst's listener runs the same request again and again: the same input views on the same
mapped pools, the same output regions. :func:`bind` returns a callable that runs the executor's
steps on those views and copies each result into its output view, without what
:meth:`CpuExecutor.run` derives again on every call (binding and converting the inputs, the plan
signature, collecting the outputs): for the same arrays none of it can change. The checks the
executor skips for an input signature whose plans passed (``_checked_key``) are skipped the
same way, and only while that signature is still the one that passed.

The callable returns False when it cannot finish the run that way (the plans were checked for
another signature since, a test step hook is set, a kernel raised, or a result does not have
the shape of its output view); nothing is reported then: the caller runs the ordinary path,
which does (kernels are pure functions of their inputs, so running again is harmless).

Example:
    >>> run = bind(executor, input_views, capacities, output_views)   # doctest: +SKIP
    >>> run() or prepared.execute(request)                             # doctest: +SKIP
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from runtime.ops import registry
from runtime.ops.registry import OpContext

_new_context = tuple.__new__  # OpContext(...) without the NamedTuple's Python-level __new__
_ndarray = np.ndarray


def bind(executor, inputs: Sequence[np.ndarray | None], capacities: Sequence[int],
         out_views: Sequence[np.ndarray]) -> Callable[[], bool] | None:
    """A run of ``executor`` on ``inputs`` (arrays, None for an omitted input) writing
    ``out_views`` (one per model output); None when the executor's plans may depend on computed
    values or control flow, or when an input would be converted (a copy, or a scalar read out
    of its pool: later runs must see the pool's new bytes)."""
    if executor.has_control_flow or len(out_views) != len(executor._outputs):
        return None
    template = executor._bind_inputs(inputs)
    if any(template[index] is not value for index, value in zip(executor._inputs, inputs)):
        return None
    key = executor._signature(template, capacities)
    if key is None:
        return None
    if key == executor._checked_key:
        key = executor._checked_key  # the same object: the usual check is one identity test
    computed = {index for step in executor.steps for index in step.outputs}
    steps = tuple(_bound_step(step, template, computed) for step in executor.steps)
    outputs = tuple(zip(executor._outputs, out_views))

    def current() -> bool:
        """Whether the checks this run skips still hold (see the module docstring)."""
        checked = executor._checked_key
        return (checked is key or checked == key) and executor.forTest_step_hook is None

    if len(steps) == 1 and not steps[0][2] and steps[0][3] == tuple(index for index, _ in outputs):
        into = _into(executor.steps[0], steps[0][1], out_views)
        if into is not None:
            return _into_run(executor, key, into)
        return _one_step_run(executor, key, steps[0], outputs)
    return _steps_run(current, steps, outputs)


def _steps_run(current, steps: tuple, outputs: tuple) -> Callable[[], bool]:
    def run() -> bool:
        if not current():
            return False
        values = {}  # the operands computed by this run
        try:
            for execute, context, fills, outs, frees in steps:
                if fills:
                    context = _filled(context, fills, values)
                for index, value in zip(outs, execute(context)):
                    values[index] = value
                for index in frees:
                    values[index] = None
        except Exception:  # noqa: BLE001 - the ordinary path runs again and reports it
            return False
        return _write(values, outputs)

    return run


def _into(step, context, out_views):
    """The operation's in-place form for these fixed arguments (``registry.BindInto``), if any."""
    record = registry.get(step.operation.type)
    if record is None or record.bind_into is None or record.execute is not step.execute:
        return None
    return record.bind_into(context, out_views)


def _into_run(executor, key, into) -> Callable[[], bool]:
    """A model of one operation that writes the model's outputs in place: one kernel call."""
    def run() -> bool:
        checked = executor._checked_key
        if (checked is not key and checked != key) or executor.forTest_step_hook is not None:
            return False
        try:
            into()
        except Exception:  # noqa: BLE001 - the ordinary path runs again and reports it
            return False
        return True

    return run


def _one_step_run(executor, key, step: tuple, outputs: tuple) -> Callable[[], bool]:
    """A model of one operation computing exactly the model's outputs (a burst's typical
    per-frame kernel): its results go straight to the views, with no table of values."""
    execute, context = step[0], step[1]
    views = tuple(view for _, view in outputs)

    def run() -> bool:
        checked = executor._checked_key  # current(), inline: one call less per frame
        if (checked is not key and checked != key) or executor.forTest_step_hook is not None:
            return False
        try:
            results = execute(context)
        except Exception:  # noqa: BLE001 - the ordinary path runs again and reports it
            return False
        if len(results) != len(views):
            return False
        for value, view in zip(results, views):
            if type(value) is not _ndarray or value.shape != view.shape:
                return False
        for value, view in zip(results, views):
            view[...] = value
        return True

    return run


def _write(values: dict, outputs: tuple) -> bool:
    """Copy each computed output into its view; False (nothing written) unless all fit."""
    for index, view in outputs:
        value = values.get(index)
        if type(value) is not _ndarray or value.shape != view.shape:
            return False
    for index, view in outputs:
        view[...] = values[index]  # as np.copyto(casting="unsafe"): same shape, any dtype
    return True


def _filled(context, fills: tuple, values: dict):
    """``context`` with the arguments computed by earlier steps of this run filled in."""
    args = context[1].copy()
    for position, index in fills:
        args[position] = values[index]
    return _new_context(OpContext, (context[0], args, context[2], context[3]))


def _bound_step(step, template: list, computed: set) -> tuple:
    """A step's kernel, its context with the arguments from ``template`` (inputs, constants)
    but for those ``computed`` by earlier steps (``fills``: (position, operand) to fill per
    run), its outputs and frees. Kernels never change their arguments, so a context without
    fills serves every run."""
    args = [None if index in computed else template[index] for index in step.inputs]
    fills = tuple((position, index) for position, index in enumerate(step.inputs) if index in computed)
    context = _new_context(OpContext, (step.operation, args, step.input_operands, step.output_operands))
    return step.execute, context, fills, step.outputs, step.frees
