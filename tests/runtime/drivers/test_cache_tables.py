"""The model cache's graph tables (runtime.drivers.cache_tables) and payload v2
(runtime.drivers.cache_payload): CTS models with per-channel quantisation and control flow
survive a save and load in a sample driver, computing what the nnapi-reference CPU executor
computes (a model with an extension type is not cached); a table that lies about its sizes or
indexes is rejected."""
from __future__ import annotations

import struct
import tempfile

import numpy as np
import pytest

from nnscope.runtime.cts.loader import CTS_ROOT, load_file
from nnscope.runtime.drivers import cache_payload, cache_tables, memory_budget
from nnscope.runtime.drivers.cache_files import CacheError
from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
from nnscope.runtime.extension_models import fibonacci
from nnscope.runtime.ops.executor import CpuExecutor
from tests.runtime.extension_helpers import allowed

TOKEN = bytes(range(32))
VECTORS = ("V1_2/conv2d_per_channel.json.gz", "V1_2/depthwise_conv2d_per_channel.json.gz",
           "V1_3/if_simple.json.gz", "V1_3/while_fib.json.gz", "V1_2/add_v1_2.json.gz")


def _first_test(relative: str):
    return load_file(CTS_ROOT / relative)[0]


def _save_and_load(driver, model):
    prepared = driver.prepare_model(model)
    with tempfile.TemporaryFile() as model_file, tempfile.TemporaryFile() as data_file:
        fds = [model_file.fileno()], [data_file.fileno()]
        cache_payload.save(driver, prepared, *fds, TOKEN)
        model, executor, footprint = cache_payload.load(driver, *fds, TOKEN)
        assert footprint == memory_budget.model_footprint(model, executor)
        return model, executor


@pytest.mark.parametrize("relative", VECTORS)
def test_cts_models_round_trip_through_the_tables(relative):
    test = _first_test(relative)
    for graph in (test.model.main, *test.model.referenced):
        assert cache_tables.decode_subgraph(Reader(cache_tables.encode_subgraph(graph))) == graph
    model, executor = _save_and_load(SampleDriver(SAMPLES["sample-all"]), test.model)
    assert (model.main, model.referenced) == (test.model.main, test.model.referenced)
    inputs = list(test.inputs)
    for got, want in zip(executor.run(inputs), CpuExecutor(test.model).run(inputs)):
        np.testing.assert_array_equal(got, want)


def test_a_model_with_an_extension_type_is_not_cached():
    """(No sample driver prepares one; the cache write is refused, so a load never sees one.)"""
    with allowed():
        model = fibonacci().to_hal()
    assert model.extension_name_to_prefix
    with pytest.raises(CacheError, match="extension"):
        cache_payload._structure(model)


def _tables() -> bytes:
    return cache_tables.encode_subgraph(_first_test(VECTORS[0]).model.main)


def _with_count(data: bytes, position: int, value: int) -> bytes:
    counts = list(struct.unpack_from("<5I", data))
    counts[position] = value
    return struct.pack("<5I", *counts) + data[20:]


@pytest.mark.parametrize("position", range(5))
def test_counts_beyond_the_payload_are_rejected(position):
    with pytest.raises(CodecError):
        cache_tables.decode_subgraph(Reader(_with_count(_tables(), position, 1 << 24)))


def test_an_operation_index_beyond_the_operands_is_rejected():
    data = bytearray(_tables())
    n_operands, n_operations, n_dims = struct.unpack_from("<3I", data)
    at = 20 + n_operands * cache_tables._OPERAND.itemsize + 4 * n_dims \
        + n_operations * cache_tables._OPERATION.itemsize
    struct.pack_into("<I", data, at, n_operands)
    with pytest.raises(CodecError, match="missing operand"):
        cache_tables.decode_subgraph(Reader(bytes(data)))


def test_an_unknown_operand_type_is_rejected():
    data = bytearray(_tables())
    struct.pack_into("<I", data, 20, 0xFFFF)
    with pytest.raises(KeyError):
        cache_tables.decode_subgraph(Reader(bytes(data)))


def test_a_plan_record_beyond_the_operands_is_rejected():
    model = _first_test(VECTORS[4]).model
    frees = [(len(model.main.operands),)] + [()] * (len(model.main.operations) - 1)
    with pytest.raises(CacheError, match="missing operand"):
        cache_payload._check_records(model, frees)
