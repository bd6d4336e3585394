"""Run a compiled model on numpy arrays through the public Execution API.

Output buffers are sized from the model's output operands; outputs of unknown shape get a
guess, and on OUTPUT_INSUFFICIENT_SIZE the execution is redone with the shapes reported by
``get_output_operand_dimensions`` (the NNAPI dynamic-output protocol). ``read_inputs`` /
``write_outputs`` are ``nnscope run``'s ``--inputs`` / ``--outputs`` files.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime import get_device
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> compilation = Compilation.for_devices(tiny_add(), [get_device("nnapi-reference")])
    >>> compilation.finish()
    >>> x = np.ones((1, 4), np.float32)
    >>> [array.tolist() for array in compute_arrays(compilation, [x, x])]
    [[[2.0, 2.0, 2.0, 2.0]]]
    >>> compilation.free()
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.compilation import Compilation
from nnscope.runtime.execution import Execution
from nnscope.runtime.hal.types import is_scalar, numpy_dtype

_GUESS_ELEMENTS = 1024


def output_buffers(compilation: Compilation, shapes=None) -> list[np.ndarray]:
    """Zeroed buffers for the outputs: of ``shapes`` (one per output) if given, else of the
    output operands' shapes (``_GUESS_ELEMENTS`` elements for an unknown one)."""
    graph = compilation.model.to_hal().main
    buffers = []
    for position, index in enumerate(graph.output_indexes):
        operand = graph.operands[index]
        dims = shapes[position] if shapes else operand.dimensions
        dtype = numpy_dtype(operand.type)
        if is_scalar(operand.type):
            buffers.append(np.zeros(1, dtype))  # e.g. RANK: one element (a 0-d array reads as an int)
        elif dims and 0 not in dims:
            buffers.append(np.zeros(dims, dtype))
        else:
            buffers.append(np.zeros(_GUESS_ELEMENTS, dtype))
    return buffers


def compute_arrays(compilation: Compilation, inputs: Sequence) -> list[np.ndarray]:
    """Run ``compilation`` on ``inputs`` (arrays or None for omitted); return the outputs."""
    outputs = output_buffers(compilation)
    for attempt in range(2):
        execution = _bound(compilation, inputs, outputs)  # executions are single-use
        try:
            execution.compute()
            break
        except NnError as error:
            if error.code != ResultCode.OUTPUT_INSUFFICIENT_SIZE or attempt:
                raise
            shapes = [_dims(execution, i) for i in range(len(outputs))]
            outputs = output_buffers(compilation, shapes)
    return [_shaped(execution, i, buffer) for i, buffer in enumerate(outputs)]


def _bound(compilation: Compilation, inputs: Sequence, outputs: Sequence[np.ndarray]) -> Execution:
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    for index, buffer in enumerate(outputs):
        execution.set_output(index, buffer)
    return execution


def _dims(execution: Execution, index: int) -> tuple[int, ...]:
    """The output's actual shape; () for a scalar (NNAPI has no dimensions to report)."""
    if execution.get_output_operand_rank(index) == 0:
        return ()
    return execution.get_output_operand_dimensions(index)


def _shaped(execution: Execution, index: int, buffer: np.ndarray) -> np.ndarray:
    dims = _dims(execution, index)
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    return buffer.reshape(-1)[:count].reshape(dims)


# --------------------------------------------------------------------------- .npz files
def input_keys(position: int, name: str | None) -> list[str]:
    """The keys an input may have in an ``--inputs`` file: ``input<i>`` or its tensor name."""
    return [f"input{position}"] + ([name] if name and name != f"input{position}" else [])


def read_inputs(path: str, operands: Sequence, names: Sequence[str | None]) -> list[np.ndarray]:
    """The arrays of an .npz (keys ``input0``.. or the model's input names) or, for a model with
    one input, an .npy; checked against the input operands' shapes and types (float arrays are
    converted to the input's float type, integers to its integer type when they fit).

    Raises:
        ValueError: a missing, unknown or ambiguous key, or a wrong shape or type.
    """
    arrays = _load_arrays(path)
    values, used = [], set()
    for position, (operand, name) in enumerate(zip(operands, names)):
        present = [key for key in input_keys(position, name) if key in arrays]
        if len(present) != 1:
            keys = " or ".join(repr(k) for k in input_keys(position, name))
            problem = "has both" if present else "has no"
            raise ValueError(f"{path}: {problem} {keys} for model input {position}")
        used.add(present[0])
        values.append(_checked(arrays[present[0]], operand, f"{path}: {present[0]!r}"))
    unknown = sorted(set(arrays) - used)
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; the model has {len(values)} inputs")
    return values


def _load_arrays(path: str) -> dict[str, np.ndarray]:
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return {"input0": loaded}
        with loaded:
            return {key: loaded[key] for key in loaded.files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not an .npz or .npy file of arrays ({error})") from None


def _checked(array: np.ndarray, operand, label: str) -> np.ndarray:
    dtype, dims = numpy_dtype(operand.type), tuple(operand.dimensions)
    if array.dtype != dtype and not (array.dtype.kind == "f" and dtype.kind == "f") and \
            not _integers_fit(array, dtype):
        raise ValueError(f"{label}: {array.dtype} values, the model input is {dtype}")
    shape_ok = len(array.shape) == len(dims) and all(d in (0, s) for d, s in zip(dims, array.shape))
    if dims and not shape_ok:
        raise ValueError(f"{label}: shape {list(array.shape)}, the model input is {list(dims)}")
    return np.ascontiguousarray(array, dtype)


def _integers_fit(array: np.ndarray, dtype: np.dtype) -> bool:
    """Integers that ``dtype`` holds exactly (int64 token ids for an INT32 input)."""
    if array.dtype.kind not in "iu" or dtype.kind not in "iu":
        return False
    info = np.iinfo(dtype)
    return array.size == 0 or (int(array.min()) >= info.min and int(array.max()) <= info.max)


def write_outputs(path: str, arrays: Sequence[np.ndarray]) -> None:
    """Save the outputs as ``output0``, ``output1``, ... in an .npz."""
    np.savez(path, **{f"output{i}": array for i, array in enumerate(arrays)})
