"""What a sample driver caches for a prepared model, and how it comes back without preparing.

The *model cache* payload (struct records and fixed-size arrays, no pickle)::

    payload version u32 | model structure blob: the graph tables (``cache_tables``): relax u8,
      operand-values length u64, referenced subgraph count u32, then each subgraph's tables
      (a model with extension types is not cached) | segments: u32 count, then (offset u64, length u64) pairs into
      the data payload, the operand values first, then each pool | plan records: the number of
      operands freed after each step (u32 list), then those operand indexes (u32 list)

The *data cache* payload is the segments (operand values and model pools), each at a 64-byte
aligned offset. Both headers carry one model digest: SHA-256 of the model payload and the data
payload checksum, so a model cache only loads with the data cache written with it.

:func:`save` writes both after a successful ``prepareModel_1_3``; :func:`load` rebuilds the
prepared model (``prepareModelFromCache_1_3``): the graph tables are read whole with numpy and
range-checked, constants become read-only numpy views of the data payload (one read, one
checksum pass), and the executor's plan is restored from the cached records instead of
validating every operation and planning again (:func:`restore_executor`). A model with control
flow (IF/WHILE) is planned as usual. Files the driver verified before and that did not change
since (``cache_files.MEMO``) give the same record objects again, and then a copy of the executor
restored from them then, without decoding anything. Any inconsistency raises
:class:`~runtime.drivers.cache_files.CacheError`.

Example:
    >>> import tempfile
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> token = bytes(32)  # the runtime's per-step cache token
    >>> from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
    >>> driver = SampleDriver(SAMPLES["sample-all"])
    >>> prepared = driver.prepare_model(tiny_add().to_hal())
    >>> with tempfile.TemporaryFile() as model_file, tempfile.TemporaryFile() as data_file:
    ...     model_fd, data_fd = model_file.fileno(), data_file.fileno()
    ...     save(driver, prepared, [model_fd], [data_fd], token)
    ...     model, executor, footprint = load(driver, [model_fd], [data_fd], token)
    >>> [operation.type.name for operation in model.main.operations], type(executor).__name__
    (['ADD'], 'CpuExecutor')
    >>> prepared.release()
"""
from __future__ import annotations

import collections
import copy
import dataclasses
import hashlib
import struct
from typing import NamedTuple

import numpy as np

from nnscope.runtime.drivers import cache_files as files, cache_tables as tables, memory_budget
from nnscope.runtime.drivers.cache_files import KIND_DATA, KIND_MODEL, CacheError
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader, Writer, read_origins, write_origins
from nnscope.runtime.hal.types import HalModel
from nnscope.runtime.hal.validate import pool_buffer
from nnscope.runtime.ops import control_flow, registry
from nnscope.runtime.ops.executor import CpuExecutor

PAYLOAD_VERSION = 3
#: id(model record) -> (model record, data record, budget, model, executor never run): the restored
#: model of cache files ``cache_files.MEMO`` still vouches for (it returns the same record objects);
#: entries whose records the memo let go of are dropped, so both hold the same files' memory.
_RESTORED: collections.OrderedDict = collections.OrderedDict()
_ALIGN = 64
_SUMS = struct.Struct("<3Q")


def _segments(model: HalModel) -> list:
    return [memoryview(model.operand_values).cast("B"),
            *(memoryview(pool_buffer(pool)).cast("B") for pool in model.pools)]


def _data_payload(segments: list) -> tuple[files.Sealed, list[tuple[int, int]]]:
    """The segments laid out once, straight into the padded payload buffer."""
    table, end = [], 0
    for segment in segments:
        start = end + (-end % _ALIGN)
        table.append((start, len(segment)))
        end = start + len(segment)
    padded = np.zeros(files.padded_size(end), np.uint8)
    for (start, length), segment in zip(table, segments):
        padded[start:start + length] = np.frombuffer(segment, np.uint8)
    return files.seal_padded(padded, end), table


def _model_payload(model: HalModel, table, executor: CpuExecutor) -> bytes:
    w = Writer()
    w.u32(PAYLOAD_VERSION)
    w.blob(_structure(model))
    w.u32(len(table))
    w.parts.append(np.array(table, "<u8").tobytes())
    frees = [call.frees for call in executor.calls]
    w.u32s([len(freed) for freed in frees])
    w.u32s([index for freed in frees for index in freed])
    return w.getvalue()


def _structure(model: HalModel) -> bytes:
    """The model's structure as graph tables (``cache_tables``), operand values out of line."""
    if model.extension_name_to_prefix:
        raise CacheError("a model with extension types is not cached")
    w = Writer()
    w.u8(1 if model.relax_float32_to_float16 else 0)
    w.u64(len(model.operand_values))
    w.u32(len(model.referenced))
    w.parts += [tables.encode_subgraph(graph) for graph in (model.main, *model.referenced)]
    write_origins(w, model)
    return w.getvalue()


def _read_structure(r: Reader) -> tuple[HalModel, int]:
    relax, external, count = bool(r.u8()), r.u64(), r.count(4)
    main = tables.decode_subgraph(r)
    referenced = tuple(tables.decode_subgraph(r) for _ in range(count))
    step, origins = read_origins(r, main)
    return HalModel(main, referenced, b"", (), relax, (), step, origins), external


def digest(model_payload, data_sums) -> bytes:
    return hashlib.sha256(bytes(model_payload) + _SUMS.pack(*data_sums)).digest()


def save(driver, prepared, model_fds, data_fds, token: bytes) -> None:
    """Write ``prepared`` (a CPU prepared model) to one model-cache and one data-cache fd."""
    _check_counts(model_fds, data_fds)
    model = prepared.model
    sealed_data, table = _data_payload(_segments(model))
    model_payload = _model_payload(model, table, prepared.executor)
    model_digest = digest(model_payload, sealed_data.sums)
    files.write(data_fds[0], KIND_DATA, driver.name, driver.version, token, model_digest, sealed_data)
    files.write(model_fds[0], KIND_MODEL, driver.name, driver.version, token, model_digest,
                model_payload)


def load(driver, model_fds, data_fds, token: bytes):
    """``(model, executor, footprint)`` restored from the cache files (``footprint``: the
    model's ``memory_budget.model_footprint``, remembered with a restored executor).

    Raises:
        CacheError: a file that does not check out, or files that do not belong together.
    """
    _check_counts(model_fds, data_fds)
    model_record = files.read(model_fds[0], KIND_MODEL, driver.name, driver.version, token)
    memory = driver.memory  # constants beyond what the budget has free could not be held
    data_record = files.read(data_fds[0], KIND_DATA, driver.name, driver.version, token,
                             max(memory.total_bytes - memory.held_bytes, 0))
    restored = _RESTORED.get(id(model_record))
    if restored is not None and restored[0] is model_record and restored[1] is data_record \
            and restored[2] == driver.budget_bytes:
        return restored[3], copy.copy(restored[4]), restored[5]  # the template never runs: a copy
    layout = _decoded(_read_layout, model_record.payload)
    if not model_record.model_digest == data_record.model_digest == \
            digest(model_record.payload, data_record.sums):
        raise CacheError("model and data cache files do not belong together")
    model, executor = _decoded(_restore, layout, data_record.payload, driver.budget_bytes)
    footprint = memory_budget.model_footprint(model, executor)
    if not model.referenced and files.MEMO.holds(model_record) and files.MEMO.holds(data_record):
        for stale in [key for key, entry in _RESTORED.items()  # records the memo let go of
                      if not (files.MEMO.holds(entry[0]) and files.MEMO.holds(entry[1]))]:
            del _RESTORED[stale]
        _RESTORED[id(model_record)] = (model_record, data_record, driver.budget_bytes, model,
                                       copy.copy(executor), footprint)
    return model, executor, footprint


def _check_counts(model_fds, data_fds) -> None:
    if len(model_fds) != 1 or len(data_fds) != 1:
        raise CacheError(f"expected 1 model and 1 data cache file, got {len(model_fds)} and {len(data_fds)}")


def _decoded(function, *args):
    """``function(*args)``, any decoding error raised as CacheError."""
    try:
        return function(*args)
    except (CodecError, ValueError, TypeError, IndexError, KeyError) as error:
        raise CacheError(f"cached model does not decode: {error}") from None


class _Layout(NamedTuple):
    model: HalModel  # without operand values and pools
    external: int  # bytes of operand values
    segments: list  # (offset, length) in the data payload: operand values, then each pool
    frees: list  # per step, the operands freed after it


def _read_layout(payload) -> _Layout:
    r = Reader(payload)
    if r.u32() != PAYLOAD_VERSION:
        raise CacheError("unknown model payload version")
    structure = Reader(r.blob())
    model, external = _read_structure(structure)
    structure.end()
    segments = tables.array(r, np.dtype("<u8"), 2 * r.count(16)).reshape(-1, 2).tolist()
    counts = r.u32s()
    flat = r.u32s()
    r.end()
    if sum(counts) != len(flat):
        raise CacheError(f"plan records of {sum(counts)} operands, {len(flat)} given")
    frees, at = [], 0
    for count in counts:
        frees.append(flat[at:at + count])
        at += count
    _check_records(model, frees)
    return _Layout(model, external, segments, frees)


def _restore(layout: _Layout, data, budget_bytes):
    segments = []
    for offset, length in layout.segments:
        if offset + length > len(data):
            raise CacheError(f"segment [{offset}, {offset + length}) outside the data cache")
        segments.append(data[offset:offset + length])
    if not segments or len(segments[0]) != layout.external:
        raise CacheError("operand values do not match the model")
    model = dataclasses.replace(layout.model, operand_values=segments[0], pools=tuple(segments[1:]))
    return model, restore_executor(model, layout.frees, budget_bytes)


def restore_executor(model: HalModel, frees, budget_bytes) -> CpuExecutor:
    """A :class:`CpuExecutor` for ``model`` from its cached plan records
    (``CpuExecutor.restored``: no validation again; the driver validated the model before
    caching it). Control flow or a mismatching plan: a full construction."""
    if model.referenced or len(frees) != len(model.main.operations):
        return CpuExecutor(model, budget_bytes)
    return CpuExecutor.restored(model, frees, budget_bytes)


def _check_records(model: HalModel, frees) -> None:
    """CacheError unless every operation has a kernel (and no control flow) and every freed
    operand exists (the graph tables checked the other indexes); a model with referenced
    subgraphs or another number of records is planned in full (:func:`restore_executor`)."""
    graph = model.main
    if model.referenced or len(frees) != len(graph.operations):
        return
    registry.load_all()
    for index, operation in enumerate(graph.operations):
        if registry.get(operation.type) is None or operation.type in control_flow.TYPES:
            raise CacheError(f"operation {index} ({operation.type.name}) cannot be restored")
    if max(map(max, filter(None, frees)), default=-1) >= len(graph.operands):
        raise CacheError("a plan record refers to a missing operand")
