"""The driver's side of bursts under attack: configureExecutionBurst, freeMemory and the request
ring receive malformed input from a real runtime-side peer; the driver answers each with
INVALID_ARGUMENT (or a well-formed result), never crashes, and serves correctly afterwards."""
from __future__ import annotations

import os
import random
import struct
import time

import numpy as np
import pytest

from nnscope.runtime import Burst, Compilation, Execution
from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel
from nnscope.runtime.drivers.ipc.client._reply import check_status
from nnscope.runtime.drivers.ipc.wire.codec import CodecError
from nnscope.runtime.drivers.ipc.wire.fmq_datum import (DATUM_SIZE, ECHO, MAX_ECHO_DATUMS, decode_memory_request,
                                                decode_result, encode_echo)
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.shared_memory import SharedPool
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.helpers import add_model

SEEDS = 300


@pytest.fixture
def burst_setup(fresh_device):
    device = fresh_device("sample-float-fast", timeout_s=30.0)
    compilation = Compilation.for_devices(add_model(), [device])
    compilation.finish()
    burst = Burst(compilation)
    yield device, compilation, burst
    burst.free()
    compilation.free()


def _run(compilation, burst, a: float) -> np.ndarray:
    out = np.zeros((1, 4), np.float32)
    execution = Execution(compilation)
    execution.set_input(0, np.full((1, 4), a, np.float32))
    execution.set_input(1, np.arange(4, dtype=np.float32).reshape(1, 4))
    execution.set_output(0, out)
    execution.burst_compute(burst)
    return out


def _status(controller, message: bytes) -> ErrorStatus:
    """Write ``message`` into the driver's request ring; answer getMemories as the runtime does
    (no pools for unknown slots); the result's status."""
    controller.requests.write(message, timeout=10)
    while True:
        reply = controller.results.read(timeout=10)
        slots = decode_memory_request(reply)
        if slots is None:
            return decode_result(reply).status
        controller._send_memories(slots)


def _mutations(valid: bytes, seed: int) -> bytes:
    rng = random.Random(seed)
    kind = seed % 3
    if kind == 0:  # bit flips in a valid request
        data = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 1:  # whole datums of random bytes
        return rng.randbytes(DATUM_SIZE * rng.randint(1, 12))
    return rng.randbytes(rng.randint(0, 200))  # any length


def test_random_and_bit_flipped_datums_never_break_the_driver(burst_setup):
    device, compilation, burst = burst_setup
    np.testing.assert_array_equal(_run(compilation, burst, 1.0)[0], 1.0 + np.arange(4))
    controller = burst.controllers[0]
    valid = controller._encoded.message
    statuses = {_status(controller, _mutations(valid, seed)) for seed in range(SEEDS)}
    assert ErrorStatus.INVALID_ARGUMENT in statuses
    assert statuses <= {ErrorStatus.NONE, ErrorStatus.INVALID_ARGUMENT}
    controller._encoded = None  # the staging pool may hold a flipped request's output
    for a in (2.0, -3.5):
        np.testing.assert_array_equal(_run(compilation, burst, a)[0], a + np.arange(4))
    assert device.process.alive()


def test_an_echo_comes_back_unchanged_and_a_malformed_one_is_refused(burst_setup):
    device, compilation, burst = burst_setup
    _run(compilation, burst, 0.0)
    controller = burst.controllers[0]
    for datums in (1, 3, MAX_ECHO_DATUMS):
        controller.echo(encode_echo(datums))  # raises unless the very bytes came back
    assert _status(controller, ECHO + bytes(7)) == ErrorStatus.INVALID_ARGUMENT  # not whole datums
    assert _status(controller, ECHO * (MAX_ECHO_DATUMS + 1)) == ErrorStatus.INVALID_ARGUMENT
    with pytest.raises(CodecError):
        encode_echo(0)
    np.testing.assert_array_equal(_run(compilation, burst, 7.0)[0], 7.0 + np.arange(4))


def test_configure_rejects_bad_fds_and_unknown_models(burst_setup):
    device, compilation, burst = burst_setup
    model_id = compilation.plan.steps[0].prepared.model_id
    rings = [FmqChannel.create(4096), FmqChannel.create(4096)]
    pool = SharedPool(4096)
    cases = [(model_id, [*rings[0].fds], 50),                              # three fds, not six
             (model_id + 1000, [*rings[0].fds, *rings[1].fds], 50),        # no such model
             (model_id, [pool.fd, *rings[0].fds[1:], *rings[1].fds], 50),  # a memfd that is no FMQ
             (model_id, [*rings[0].fds, *rings[1].fds], 5000)]             # a 5 ms polling window
    try:
        for target, fds, poll_us in cases:
            with pytest.raises(HalError) as error:
                _configure(device, target, fds, poll_us)
            assert error.value.status == ErrorStatus.INVALID_ARGUMENT
    finally:
        pool.close()
        for ring in rings:
            ring.close()
    np.testing.assert_array_equal(_run(compilation, burst, 4.0)[0], 4.0 + np.arange(4))


def _configure(device, model_id: int, fds: list, poll_us: int) -> None:
    message = device.transact(MsgType.CONFIGURE_BURST, struct.pack("<II", model_id, poll_us), fds)
    check_status(bytes(message.payload), "configureExecutionBurst")


def test_free_memory_and_memories_for_unknown_bursts_or_slots(burst_setup):
    device, compilation, burst = burst_setup
    _run(compilation, burst, 0.0)
    burst_id = burst.controllers[0].burst_id
    for msg_type, payload in ((MsgType.BURST_FREE_MEMORY, struct.pack("<II", burst_id, 77)),
                              (MsgType.BURST_FREE_MEMORY, struct.pack("<II", burst_id + 9, 0)),
                              (MsgType.BURST_MEMORIES, struct.pack("<II", burst_id, 0)),  # nothing asked
                              (MsgType.BURST_RELEASE, struct.pack("<I", burst_id + 9))):
        with pytest.raises(HalError) as error:
            check_status(bytes(device.transact(msg_type, payload).payload), msg_type.name)
        assert error.value.status == ErrorStatus.INVALID_ARGUMENT
    np.testing.assert_array_equal(_run(compilation, burst, 5.0)[0], 5.0 + np.arange(4))


def test_a_scribbled_ring_ends_only_that_burst(burst_setup):
    device, compilation, burst = burst_setup
    _run(compilation, burst, 0.0)
    threads = len(os.listdir(f"/proc/{device.pid}/task"))
    controller = burst.controllers[0]
    controller.requests._index[8] = 1 << 40  # a write index far past the read index
    os.eventfd_write(controller.requests.fds[1], 1)
    give_up = time.monotonic() + 60.0  # a bound on the wait, not a speed: the listener ends
    while len(os.listdir(f"/proc/{device.pid}/task")) != threads - 1 and time.monotonic() < give_up:
        time.sleep(0.01)
    assert len(os.listdir(f"/proc/{device.pid}/task")) == threads - 1  # its listener ended
    with Burst(compilation) as fresh:
        np.testing.assert_array_equal(_run(compilation, fresh, 6.0)[0], 6.0 + np.arange(4))
