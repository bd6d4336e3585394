"""A real driver process queues long executions (runtime.drivers.ipc.service.execute): the
connection is parked while its execution waits or runs, so what the client sends meanwhile
(here FREE_POOLS of the very pool the execution reads) is answered only after the execution,
and the outputs stay right. Oracle: the in-process reference CPU device."""
from __future__ import annotations

import struct

import numpy as np

from nnscope.runtime.builtin_models import mobilenet, sample_input
from nnscope.runtime.drivers.ipc.client.encoder import encode_execute
from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType
from nnscope.runtime.manager import cpu_device
from tests.runtime.drivers._hal import make_request


def test_free_pools_behind_a_queued_execution_waits_for_it(fresh_device):
    device = fresh_device("sample-all", timeout_s=60.0)
    model = mobilenet().to_hal()
    inputs = sample_input(mobilenet())
    expected_request, _, expected = make_request(model, inputs)
    cpu_device().prepare_model(model).execute(expected_request)
    prepared = device.prepare_model(model)
    request, pool, outputs = make_request(model, inputs, shared=True)
    prepared.execute(request)  # measured once: the driver now expects a long run and queues it
    outputs[0][...] = 0
    payload, fds, inline, staged = encode_execute(prepared.model_id, request, False, None, device.pools, [])
    pool_id, is_new = device.pools.lookup(pool)
    assert not is_new
    channel = device.channel
    channel.send(MsgType.EXECUTE_SYNC, 9001, payload, fds)
    channel.send(MsgType.FREE_POOLS, 9002, struct.pack("<II", 1, pool_id))
    first, second = channel.recv(60.0), channel.recv(60.0)
    assert (first.request_id, first.type) == (9001, REPLY | MsgType.EXECUTE_SYNC)
    result = prepared._finish(bytes(first.payload), request, inline, staged)
    assert (second.request_id, second.type) == (9002, REPLY | MsgType.FREE_POOLS)
    assert struct.unpack_from("<I", second.payload)[0] == 0
    assert result.status == 0
    np.testing.assert_allclose(outputs[0], expected[0], rtol=1e-5, atol=1e-6)
    assert device.process.alive()
