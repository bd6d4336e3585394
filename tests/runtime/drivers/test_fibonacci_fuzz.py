"""300 seeded malformed extension models and requests sent to a real ``sample-fibonacci``
driver process over raw sockets: each gets INVALID_ARGUMENT (never a crash, a hang or another
status), and afterwards the driver keeps every promise of the attack harness and still computes
Fibonacci numbers correctly (checked against Python ints)."""
from __future__ import annotations

import random
import struct

import numpy as np

from nnscope.runtime.drivers.ipc.wire.codec import Reader
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.wire.execution_codec import decode_result
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.types import ErrorStatus, OperandType as T
from tests.runtime.drivers.fib_hal import INT64, NAME, PREFIX, QUANT64, fib_model, fib_request, int64
from tests.runtime.extension_helpers import fibonacci
from tests.support.driver_attack import AttackedDriver, exchange, prepare_payload

SEED, CASES = 1313, 300
INVALID = int(ErrorStatus.INVALID_ARGUMENT)


def _bad_model(rng: random.Random):
    """A HAL model with one seeded defect in its extension operands or parameters."""
    other = (rng.randrange(1, 0xFFFF) if rng.random() < 0.5 else PREFIX + 1)
    choices = [
        lambda: dict(extension_data=rng.randbytes(rng.choice([0, 1, 8, 15, 17, 32, 1000]))),
        lambda: dict(scale=rng.choice([0.0, -rng.random(), float("nan"), float("inf"), -0.0])),
        lambda: dict(zero_point=-rng.randrange(1, 1 << 62)),
        lambda: dict(out_dims=tuple(rng.randrange(1, 5) for _ in range(rng.randrange(2, 5)))),
        lambda: dict(n_dims=tuple(rng.randrange(1, 4) for _ in range(rng.randrange(1, 3)))),
        lambda: dict(out_type=(PREFIX << 16) | rng.randrange(2, 0x10000)),
        lambda: dict(n_type=(PREFIX << 16) | rng.randrange(1, 0x10000)),
        lambda: dict(op_type=(PREFIX << 16) | rng.randrange(1, 0x10000)),
        lambda: dict(out_type=(other << 16) | 1, pairs=((NAME, PREFIX), ("com.fuzz.other", other))),
        lambda: dict(op_type=(other << 16), pairs=((NAME, PREFIX), ("com.fuzz.other", other))),
        lambda: dict(pairs=()),
        lambda: dict(pairs=((NAME, PREFIX), (NAME, other))),
        lambda: dict(pairs=((NAME, PREFIX), ("com.fuzz.x", PREFIX))),
        lambda: dict(pairs=((NAME, 0),)),
        lambda: dict(pairs=(("", PREFIX),)),
        lambda: dict(n_type=rng.choice([T.TENSOR_INT32, T.INT32, T.FLOAT32, QUANT64])),
        lambda: dict(constant_n=rng.choice([0, -1, -(1 << 63), (1 << 63) - 1, 1 << 20])),
    ]
    return fib_model(**rng.choice(choices)())


def _bad_execute(rng: random.Random, model_id: int) -> bytes:
    """An execute of a valid prepared model whose n or regions are wrong."""
    kind = rng.randrange(4)
    if kind == 0:
        n_bytes, out = int64(rng.choice([0, -1, -(1 << 63), 94, 1 << 40, (1 << 63) - 1])), 8 * 4
    elif kind == 1:
        n_bytes, out = rng.randbytes(rng.choice([1, 4, 7, 9, 16])), 8 * 4
    else:
        n_bytes, out = int64(4), 32
    request, _ = fib_request(n_bytes, out)
    if kind >= 2:  # a region outside the pool
        args = request.outputs if kind == 2 else request.inputs
        moved = args[0].__class__(False, 0, rng.randrange(33, 1 << 20), rng.randrange(1, 64))
        request = request.__class__(request.inputs if kind == 2 else (moved,),
                                    (moved,) if kind == 2 else request.outputs, request.pools)
    payload, fds, _, _ = encode_execute(model_id, request, False, None, PoolCache(), [])
    assert not fds
    return payload


def _corrupt(rng: random.Random, payload: bytes) -> bytes:
    """A valid PREPARE_MODEL payload with its tail (the extension section) cut or changed."""
    data = bytearray(payload)
    if rng.random() < 0.5:
        return bytes(data[:rng.randrange(len(data) - 24, len(data))])
    for _ in range(rng.randrange(1, 4)):
        data[rng.randrange(len(data) - 30, len(data))] = rng.randrange(256)
    return bytes(data)


def _prepare(sock, model):
    payload, fds, keep = prepare_payload(model)
    try:
        return exchange(sock, MsgType.PREPARE_MODEL, payload, fds)
    finally:
        for pool in keep:
            pool.close()


def _execute(sock, model_id: int, n: int):
    request, pool = fib_request(int64(n), 8 * n)
    payload, _, inline, _ = encode_execute(model_id, request, False, None, PoolCache(), [])
    reply = exchange(sock, MsgType.EXECUTE_SYNC, payload)
    assert reply.status == 0, reply
    result, outputs = decode_result(Reader(reply.body))
    return result, [np.frombuffer(bytes(data), np.uint64).tolist() for _, data in outputs]


def test_300_seeded_malformed_models_and_requests():
    rng = random.Random(SEED)
    statuses = {"model": [], "execute": [], "corrupt": []}
    with AttackedDriver("sample-fibonacci") as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            good = _prepare(sock, fib_model())
            assert good.status == 0
            model_id = struct.unpack_from("<I", good.body)[0]
            valid_payload = prepare_payload(fib_model())[0]
            for case in range(CASES):
                kind = ("model", "execute", "corrupt")[case % 3]
                if kind == "model":
                    statuses[kind].append(_prepare(sock, _bad_model(rng)).status)
                elif kind == "execute":
                    reply = exchange(sock, MsgType.EXECUTE_SYNC, _bad_execute(rng, model_id))
                    status = reply.status or int(decode_result(Reader(reply.body))[0].status)
                    statuses[kind].append(status)
                else:
                    statuses[kind].append(exchange(sock, MsgType.PREPARE_MODEL,
                                                   _corrupt(rng, valid_payload)).status)
            result, outputs = _execute(sock, model_id, 15)
        figures = driver.check_promises()
    assert sum(len(s) for s in statuses.values()) == CASES
    assert set(statuses["model"]) == {INVALID}, statuses["model"]
    assert set(statuses["execute"]) == {INVALID}, statuses["execute"]
    # a corrupted payload may still decode to a valid model (a changed byte inside a name)
    assert set(statuses["corrupt"]) <= {0, INVALID} and statuses["corrupt"].count(INVALID) > 50
    assert result.status == ErrorStatus.NONE
    assert outputs == [[int(f / 0.5 + 10) for f in fibonacci(15)]]
    assert figures["peak_rss_kb"] > 0
    assert INT64 >> 16 == PREFIX
