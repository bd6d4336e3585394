"""LSH_PROJECTION against every runnable NNAPI CTS vector (also with output shapes left unknown),
and FarmHash Fingerprint64 against published values of farmhashna::Hash64."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import OperationType
from nnscope.runtime.ops._farmhash import fingerprint64
from nnscope.runtime.ops.lookup import lsh_projection
from tests.support.cts_vectors import cts_vector_tests

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(frozenset({OperationType.LSH_PROJECTION}), {"LSH_PROJECTION": 27})

_GO_HELP = ("Go is a tool for managing Go source code.Usage:\tgo command [arguments]The commands "
            "are:    build       compile packages and dependencies    clean       remove object "
            "files    env         print Go environment information")


@pytest.mark.parametrize("text,expected", [
    ("", 0x9AE16A3B2F90404F), ("a", 0xB3454265B6DF75E3), ("hi", 0x6A5D2FBA44F012F8),
    ("hello world", 0x588FB7478BD6B01B), ("lee@lmmrtech.com", 0x61BEC68DB00FA2FF),
    ("docklandsman@gmail.com", 0xB678CF3842309F40),
    ("Lorem ipsum dolor sit amet", 0xE0B3271B22C026EF)])
def test_fingerprint64_matches_published_values(text, expected):
    assert fingerprint64(text.encode()) == expected


def test_fingerprint64_covers_every_length_branch_deterministically():
    data = bytes(range(256)) * 2
    hashes = {fingerprint64(data[:n]) for n in (3, 7, 15, 31, 63, 64, 65, 128, 129, 300)}
    assert len(hashes) == 10 and all(0 <= h < 1 << 64 for h in hashes)


def test_sparse_projection_offsets_each_hash_function_by_its_bucket_range():
    hashes = np.float32([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    values = np.int32([[1, 2], [3, 4]])
    dense = lsh_projection(hashes, values, None, 2).reshape(3, 2)
    sparse = lsh_projection(hashes, values, None, 3)
    deprecated = lsh_projection(hashes, values, None, 1)
    assert (deprecated == dense[:, 0] * 2 + dense[:, 1]).all()
    assert (sparse == deprecated + np.arange(3) * 4).all()
