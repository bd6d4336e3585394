"""``nnscope bench``'s models, their inputs and reference outputs, and the accuracy figures.

A model spec is a built-in name (``mobilenet``, ``tiny_add``; see
:data:`runtime.builtin_models.BUILTIN`) or a ``.tflite`` path. The reference outputs come from
the ``nnapi-reference`` CPU device, or, for a .tflite when ``ai-edge-litert`` is installed,
from LiteRT itself (one thread, TFLite's built-in kernels). Accuracy uses the CTS runner's
tolerance (:mod:`runtime.cts.accuracy`).

Example:
    >>> bench_model = load_model("tiny_add")                        # doctest: +SKIP
    >>> kind, expected = reference_outputs(bench_model)             # doctest: +SKIP
    >>> accuracy(bench_model, expected, expected)["max_abs_error"]  # doctest: +SKIP
    0.0
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from runtime import builtin_models
from runtime.cli._backend import compute_arrays
from runtime.compilation import Compilation
from runtime.hal.types import OperandType
from runtime.manager import cpu_device
from runtime.model import Model

REFERENCE_NNAPI, REFERENCE_LITERT = "nnapi-reference", "litert"
_FLOAT16 = (OperandType.TENSOR_FLOAT16, OperandType.FLOAT16)


@dataclass
class BenchModel:
    """A finished model with its sample inputs; ``path`` is the .tflite file (None: built-in)."""

    name: str
    model: Model
    inputs: list[np.ndarray]
    output_names: list[str]
    path: str | None = None


def load_model(spec: str) -> BenchModel:
    """The model named by ``spec`` (built-in name or .tflite path).

    Raises:
        FileNotFoundError: no such built-in and no such file.
        ValueError: the file is not a model the loader can convert.
    """
    if spec in builtin_models.BUILTIN:
        model = builtin_models.BUILTIN[spec]()
        return BenchModel(model.name, model, builtin_models.sample_input(model), [])
    if not Path(spec).is_file():
        names = ", ".join(builtin_models.BUILTIN)
        raise FileNotFoundError(f"no such model file {spec!r} (built-in models: {names})")
    from runtime.tflite import load_tflite  # noqa: PLC0415 - flatbuffer reader on demand
    hal, _, output_names = load_tflite(spec)
    model = Model.from_hal(hal, name=Path(spec).stem)
    return BenchModel(model.name, model, builtin_models.sample_input(model), output_names, spec)


def model_specs(given: Sequence[str]) -> list[str]:
    """The built-in models (all, unless some are named) followed by the .tflite files given."""
    named = [spec for spec in given if spec in builtin_models.BUILTIN]
    files = [spec for spec in given if spec not in builtin_models.BUILTIN]
    return list(dict.fromkeys(named or list(builtin_models.BUILTIN))) + list(dict.fromkeys(files))


def litert_available() -> bool:
    try:
        import ai_edge_litert.interpreter  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


def reference_outputs(bench_model: BenchModel, litert: bool = True) -> tuple[str, list[np.ndarray]]:
    """``(reference kind, outputs)`` for the model's sample inputs; LiteRT's for a .tflite when
    installed and ``litert``, else the ``nnapi-reference`` device's."""
    if litert and bench_model.path is not None and litert_available():
        return REFERENCE_LITERT, _litert_outputs(bench_model)
    compilation = Compilation.for_devices(bench_model.model, [cpu_device()])
    compilation.finish()
    try:
        return REFERENCE_NNAPI, compute_arrays(compilation, bench_model.inputs)
    finally:
        compilation.free()


def _litert_outputs(bench_model: BenchModel) -> list[np.ndarray]:
    """LiteRT's outputs, in the model's output order (matched by tensor name)."""
    from ai_edge_litert import interpreter as litert  # noqa: PLC0415
    interpreter = litert.Interpreter(
        model_path=bench_model.path, num_threads=1,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter.allocate_tensors()
    for detail, value in zip(interpreter.get_input_details(), bench_model.inputs):
        interpreter.set_tensor(detail["index"], value.reshape(detail["shape"]))
    interpreter.invoke()
    by_name = {d["name"]: interpreter.get_tensor(d["index"]).copy()
               for d in interpreter.get_output_details()}
    ordered = list(by_name.values())
    return [by_name.get(name, ordered[i]) for i, name in enumerate(bench_model.output_names)] \
        if bench_model.output_names else ordered


def tolerance_of(model: Model, position: int, relaxed: bool = False) -> tuple[float, float]:
    """(atol, rtol) of output ``position``: the CTS runner's criterion for its type (the
    relaxed-float one when ``relaxed``, the model is relaxed or has float16 operands)."""
    from runtime.cts.accuracy import tolerance  # noqa: PLC0415
    relaxed = relaxed or model.relaxed or any(op.type in _FLOAT16 for op in model.operands)
    return tolerance(model.operands[model.outputs[position]].type, relaxed, model.name)


def accuracy(bench_model: BenchModel, expected: Sequence[np.ndarray],
             actual: Sequence[np.ndarray], relaxed: bool = False) -> dict:
    """max abs error and MSE over every output element, and whether all are within the CTS
    tolerance (``relaxed``: the relaxed-float one, 5 * 2**-10, for float32 outputs too)."""
    from runtime.cts.accuracy import compare  # noqa: PLC0415
    within, diffs = len(expected) == len(actual), []
    for position, (want, got) in enumerate(zip(expected, actual)):
        want64, got64 = np.asarray(want, np.float64), np.asarray(got, np.float64)
        if want64.size != got64.size:
            within = False
            continue
        diffs.append(np.abs(want64.reshape(-1) - got64.reshape(-1)))
        atol, rtol = tolerance_of(bench_model.model, position, relaxed)
        within = within and not compare(want64.reshape(-1), got64.reshape(-1), atol, rtol)
    every = np.concatenate(diffs) if diffs else np.zeros(0)
    max_abs = float(every.max()) if every.size else 0.0
    mse = float(np.mean(every * every)) if every.size else 0.0
    return {"max_abs_error": max_abs, "mse": mse, "within_tolerance": bool(within)}
