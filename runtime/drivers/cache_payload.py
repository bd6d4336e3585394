"""What a sample driver caches for a prepared model, and how it comes back without preparing.

The *model cache* payload (struct records, no pickle)::

    payload version u32 | model structure (``codec.encode_model``, values out of line) as a blob
    | segments: u32 count, then (offset u64, length u64) into the data payload, the operand
      values first, then each pool | u8 plans-follow-input-shapes | steps: u32 count, then per
      step the operand indexes freed after it (u32 list)

The *data cache* payload is the segments (operand values and model pools), each at a 64-byte
aligned offset. Both headers carry one model digest: SHA-256 of the model payload and the data
payload checksum, so a model cache only loads with the data cache written with it.

:func:`save` writes both after a successful ``prepareModel_1_3``; :func:`load` rebuilds the
prepared model (``prepareModelFromCache_1_3``): the model structure is decoded, constants become
read-only numpy views of the data payload, and the executor's plan is restored from the cached
records instead of validating every operation and planning again (:func:`restore_executor`).
A model with control flow (IF/WHILE) is planned as usual. Any inconsistency raises
:class:`~runtime.drivers.cache_files.CacheError`.

Example:
    >>> save(driver, prepared, [model_fd], [data_fd], token)        # doctest: +SKIP
    >>> prepared = load(driver, [model_fd], [data_fd], token)       # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import struct

import numpy as np

from runtime.drivers import cache_files as files
from runtime.drivers.cache_files import KIND_DATA, KIND_MODEL, CacheError
from runtime.drivers.ipc.codec import CodecError, Reader, Writer, decode_model, encode_model
from runtime.hal.types import HalModel
from runtime.hal.validate import pool_buffer
from runtime.ops import control_flow, registry
from runtime.ops.executor import CpuExecutor, plans_follow_input_shapes

PAYLOAD_VERSION = 1
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
    w.blob(encode_model(model, values_inline=False))
    w.u32(len(table))
    for offset, length in table:
        w.u64(offset)
        w.u64(length)
    w.u8(1 if executor._static_plans else 0)
    w.u32(len(executor.steps))
    for step in executor.steps:
        w.u32s(step.frees)
    return w.getvalue()


def digest(model_payload, data_sums) -> bytes:
    return hashlib.sha256(bytes(model_payload) + _SUMS.pack(*data_sums)).digest()


def save(driver, prepared, model_fds, data_fds, token: bytes) -> None:
    """Write ``prepared`` (a CPU prepared model) to one model-cache and one data-cache fd."""
    if len(model_fds) != 1 or len(data_fds) != 1:
        raise CacheError(f"expected 1 model and 1 data cache file, got {len(model_fds)} and {len(data_fds)}")
    model = prepared.model
    sealed_data, table = _data_payload(_segments(model))
    model_payload = _model_payload(model, table, prepared.executor)
    model_digest = digest(model_payload, sealed_data.sums)
    files.write(data_fds[0], KIND_DATA, driver.name, driver.version, token, model_digest, sealed_data)
    files.write(model_fds[0], KIND_MODEL, driver.name, driver.version, token, model_digest,
                model_payload)


def load(driver, model_fds, data_fds, token: bytes):
    """``(model, executor)`` restored from the cache files.

    Raises:
        CacheError: a file that does not check out, or files that do not belong together.
    """
    if len(model_fds) != 1 or len(data_fds) != 1:
        raise CacheError(f"expected 1 model and 1 data cache file, got {len(model_fds)} and {len(data_fds)}")
    model_record = files.read(model_fds[0], KIND_MODEL, driver.name, driver.version, token)
    data_record = files.read(data_fds[0], KIND_DATA, driver.name, driver.version, token)
    if not model_record.model_digest == data_record.model_digest == \
            digest(model_record.payload, data_record.sums):
        raise CacheError("model and data cache files do not belong together")
    try:
        return _decode(model_record.payload, data_record.payload, driver.budget_bytes)
    except (CodecError, ValueError, TypeError, IndexError, KeyError) as error:
        raise CacheError(f"cached model does not decode: {error}") from None


def _decode(payload, data, budget_bytes):
    r = Reader(payload)
    if r.u32() != PAYLOAD_VERSION:
        raise CacheError("unknown model payload version")
    structure = Reader(r.blob())
    model, external = decode_model(structure)
    structure.end()
    segments = []
    for _ in range(r.count(16)):
        offset, length = r.u64(), r.u64()
        if offset + length > len(data):
            raise CacheError(f"segment [{offset}, {offset + length}) outside the data cache")
        segments.append(data[offset:offset + length])
    if not segments or external is None or len(segments[0]) != external:
        raise CacheError("operand values do not match the model")
    model = HalModel(model.main, model.referenced, segments[0], tuple(segments[1:]),
                     model.relax_float32_to_float16)
    static_plans = bool(r.u8())
    frees = [r.u32s() for _ in range(r.count(4))]
    r.end()
    return model, restore_executor(model, frees, static_plans, budget_bytes)


def restore_executor(model: HalModel, frees, static_plans: bool, budget_bytes) -> CpuExecutor:
    """A :class:`CpuExecutor` for ``model`` from its cached plan records
    (``CpuExecutor.restored``: no validation again; the driver validated the model before
    caching it). Control flow or a mismatching plan: a full construction."""
    graph = model.main
    if model.referenced or len(frees) != len(graph.operations) \
            or static_plans != plans_follow_input_shapes(graph):
        return CpuExecutor(model, budget_bytes)
    _check_records(graph, frees)
    return CpuExecutor.restored(model, frees, budget_bytes)


def _check_records(graph, frees) -> None:
    """CacheError unless every operation has a kernel (and no control flow) and every operand
    index of the operations and the plan records is in range."""
    registry.load_all()
    operands = graph.operands
    for index, (operation, freed) in enumerate(zip(graph.operations, frees)):
        if registry.get(operation.type) is None or operation.type in control_flow.TYPES:
            raise CacheError(f"operation {index} ({operation.type.name}) cannot be restored")
        if any(i >= len(operands) for i in (*operation.inputs, *operation.outputs, *freed)):
            raise CacheError(f"operation {index} refers to a missing operand")
