"""Issue 16, bug 8 against a real ``sample-all`` process: tiny valid requests that used to cost
a gigabyte (PAD by 2^28 into a 16-byte output; ADD of [16384, 1] and [1, 16384]) or never
finish (MAX_POOL_2D with a 1 x 2^26 window). The attacker prepares and executes over the socket
protocol; after each attack the driver keeps the five promises (alive, answers within 5 s, peak
RSS under 500 MB, no more fds, no traceback)."""
from __future__ import annotations

import struct

from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.drivers._hal import make_request
from tests.support import cost_models as cm
from tests.support.driver_attack import AttackedDriver, exchange, prepare_payload, result_of


def prepare(sock, model) -> int:
    payload, fds, keep = prepare_payload(model)
    try:
        reply = exchange(sock, MsgType.PREPARE_MODEL, payload, fds, timeout=30.0)
    finally:
        for pool in keep:
            pool.close()
    assert reply.status == 0, reply
    return struct.unpack_from("<I", reply.body)[0]


def execute(sock, model_id: int, request, timeout: float = 30.0):
    """EXECUTE_SYNC of ``request`` (large pools staged through shared memory, as the runtime
    does); returns (ExecutionResult, inline outputs)."""
    staging: list = []
    try:
        payload, fds, _, staged = encode_execute(model_id, request, False, None, PoolCache(), staging)
        for position in staged:
            source = memoryview(request.pools[position]).cast("B")
            staging[position].view[:len(source)] = source
        return result_of(exchange(sock, MsgType.EXECUTE_SYNC, payload, fds, timeout=timeout))
    finally:
        for pool in staging:
            if pool is not None:
                pool.close()


def attack(model, request, extra_args=(), timeout: float = 30.0):
    """Prepare ``model`` and execute ``request`` on a fresh driver; the promises are checked."""
    with AttackedDriver(extra_args=extra_args) as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            result = execute(sock, prepare(sock, model), request, timeout)
        return result


def test_pad_by_2_pow_28_into_16_bytes_is_insufficient_without_allocating_a_gigabyte():
    request, _, _ = cm.small_output_request(cm.pad_model(), cm.pad_inputs())
    result, _ = attack(cm.pad_model(), request)
    assert result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert [(tuple(s.dimensions), s.is_sufficient) for s in result.output_shapes] == \
        [((1, 4 + cm.HUGE_PAD), False)]


def test_broadcasting_add_into_16_bytes_is_insufficient_without_allocating_a_gigabyte():
    model = cm.broadcast_add_model()
    request, _, _ = cm.small_output_request(model, cm.broadcast_inputs())
    result, _ = attack(model, request)
    assert result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert tuple(result.output_shapes[0].dimensions) == (cm.BROADCAST, cm.BROADCAST)


def test_a_gigabyte_intermediate_is_resource_exhausted_persistent():
    model = cm.pad_model(chained=True)
    request, _, _ = cm.small_output_request(model, cm.pad_inputs(), output_bytes=4096)
    result, _ = attack(model, request)
    assert result.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT


def test_max_pool_with_a_2_pow_26_window_is_answered_at_once_and_right():
    model = cm.max_pool_model()
    request, pool, outs = make_request(model, cm.pool_inputs())
    result, inline = attack(model, request, timeout=20.0)
    assert result.status == ErrorStatus.NONE
    (position, data), = inline
    assert position == 0 and list(struct.unpack("<8f", bytes(data))) == [7.0] * 8


def test_the_drivers_memory_budget_is_configurable():
    model = cm.pad_model(pad=1 << 18, chained=True)  # 1 MiB intermediate and output
    request, _, _ = cm.small_output_request(model, cm.pad_inputs(), output_bytes=4 * (4 + (1 << 18)))
    small, _ = attack(model, request, extra_args=["--memory-budget", str(2 << 20)])
    assert small.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
    default, _ = attack(model, request)
    assert default.status == ErrorStatus.NONE
