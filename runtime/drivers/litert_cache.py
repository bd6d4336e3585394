"""What ``sample-litert`` caches for a prepared model: the flatbuffer is the payload.

The *data cache* record holds the TFLite flatbuffer the model translated to; the *model cache*
record holds ``payload version u32 | quantized u8 (1: LiteRT's builtin kernels, not XNNPACK)
| the step's inputs and outputs as graph tables`` (``cache_tables``: the operands a request is
validated against, no operations). Both are
``cache_files`` records (versioned, checksummed, bound to driver, version and token) and
carry one digest over the model payload and the flatbuffer's checksum, so neither loads with
a file written for another model. Loading rebuilds the interpreter from the flatbuffer (LiteRT
verifies it) and checks that its inputs and outputs match the cached operands; anything else
raises :class:`~runtime.hal.errors.HalError` GENERAL_FAILURE (the runtime then prepares
from the model). Nothing is unpickled or executed.

Example:
    >>> import tempfile
    >>> from nnscope.runtime.builtin_models import tiny_add
    >>> token = bytes(32)  # the runtime's per-step cache token
    >>> from nnscope.runtime.drivers.litert import LiteRtDriver
    >>> driver = LiteRtDriver()
    >>> prepared = driver.prepare_model(tiny_add().to_hal())
    >>> with tempfile.TemporaryFile() as model_file, tempfile.TemporaryFile() as data_file:
    ...     model_fd, data_fd = model_file.fileno(), data_file.fileno()
    ...     save(driver, prepared, [model_fd], [data_fd], token)
    ...     loaded = load(driver, [model_fd], [data_fd], token)
    >>> type(loaded).__name__
    'LiteRtPreparedModel'
    >>> loaded.release(); prepared.release()
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.drivers import cache_files as files, cache_payload, cache_tables as tables
from nnscope.runtime.drivers.cache_files import KIND_DATA, KIND_MODEL, CacheError
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader, Writer
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import (ErrorStatus, HalModel, OperandLifetime as L, Subgraph, numpy_dtype)
from nnscope.runtime.tflite._writer import Translation

PAYLOAD_VERSION = 1


def _interface(model: HalModel) -> Subgraph:
    """The step's inputs then outputs, as a subgraph without operations."""
    graph = model.main
    operands = tuple(graph.operands[i] for i in (*graph.input_indexes, *graph.output_indexes))
    count = len(graph.input_indexes)
    return Subgraph(operands, (), tuple(range(count)), tuple(range(count, len(operands))))


def save(driver, prepared, model_fds, data_fds, token: bytes) -> None:
    """Write ``prepared``'s flatbuffer and interface (raises CacheError/OSError)."""
    if len(model_fds) != 1 or len(data_fds) != 1:
        raise CacheError("expected 1 model and 1 data cache file")
    w = Writer()
    w.u32(PAYLOAD_VERSION)
    w.u8(1 if prepared.executor.translation.quantized else 0)
    w.blob(tables.encode_subgraph(_interface(prepared.model)))
    model_payload = w.getvalue()
    sealed = files.seal(prepared.executor.translation.flatbuffer)
    digest = cache_payload.digest(model_payload, sealed.sums)
    files.write(data_fds[0], KIND_DATA, driver.name, driver.version, token, digest, sealed)
    files.write(model_fds[0], KIND_MODEL, driver.name, driver.version, token, digest, model_payload)


def load(driver, model_fds, data_fds, token: bytes):
    """The prepared model the cache files hold. Raises HalError GENERAL_FAILURE."""
    try:
        if len(model_fds) != 1 or len(data_fds) != 1:
            raise CacheError("expected 1 model and 1 data cache file")
        model_record = files.read(model_fds[0], KIND_MODEL, driver.name, driver.version, token)
        data_record = files.read(data_fds[0], KIND_DATA, driver.name, driver.version, token)
        if not model_record.model_digest == data_record.model_digest == \
                cache_payload.digest(model_record.payload, data_record.sums):
            raise CacheError("model and data cache files do not belong together")
        graph, quantized = _decoded(model_record.payload)
    except CacheError as error:
        raise HalError(ErrorStatus.GENERAL_FAILURE, f"cache not usable: {error}") from None
    flatbuffer = bytes(data_record.payload)
    model = HalModel(graph)
    count = len(graph.input_indexes)
    prepared = driver.prepared(model, Translation(flatbuffer, tuple(range(count)), (), quantized))
    try:
        _check_matches(graph, prepared.executor)
    except HalError:
        prepared.release()
        raise
    return prepared


def _decoded(payload) -> tuple[Subgraph, bool]:
    try:
        r = Reader(bytes(payload))
        if r.u32() != PAYLOAD_VERSION:
            raise CacheError("another payload version")
        quantized = r.u8()
        if quantized not in (0, 1):
            raise CacheError(f"quantized flag {quantized}")
        graph = tables.decode_subgraph(Reader(r.blob()))
    except (CodecError, ValueError, TypeError, IndexError, KeyError) as error:
        raise CacheError(f"cached interface does not decode: {error}") from None
    lifetimes = [graph.operands[i].lifetime for i in graph.input_indexes] + \
        [graph.operands[i].lifetime for i in graph.output_indexes]
    if graph.operations or any(lt not in (L.SUBGRAPH_INPUT, L.SUBGRAPH_OUTPUT, L.TEMPORARY_VARIABLE)
                               for lt in lifetimes):
        raise CacheError("cached interface is not inputs and outputs only")
    return graph, bool(quantized)


def _check_matches(graph: Subgraph, engine) -> None:
    """The interpreter's inputs/outputs have the cached operands' element types and ranks."""
    interpreter = engine.interpreter
    details = interpreter.get_input_details() + interpreter.get_output_details()
    operands = [graph.operands[i] for i in (*graph.input_indexes, *graph.output_indexes)]
    if len(details) != len(operands) or any(
            np.dtype(d["dtype"]) != numpy_dtype(o.type) or len(d["shape"]) != len(o.dimensions)
            for d, o in zip(details, operands)):
        raise HalError(ErrorStatus.GENERAL_FAILURE, "cache not usable: the flatbuffer does not "
                                                    "match the cached inputs and outputs")
