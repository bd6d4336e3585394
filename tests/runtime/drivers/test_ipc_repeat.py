"""Repeated executeSynchronously of one Request: the EXECUTE_SYNC_MEMO fast path (only inline input
bytes out, a compact reply back) against a real driver process, and its fallbacks."""
import struct

import numpy as np
import pytest

from nnscope.runtime.drivers.ipc.wire.execution_codec import MEMO_HEAD, FORM_UNKNOWN
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.drivers._hal import add_model, make_request

RNG = np.random.default_rng(11)


def _spy(device):
    """Record the message type of every transact on ``device``."""
    sent = []
    real = device.transact

    def transact(msg_type, *args, **kwargs):
        sent.append(msg_type)
        return real(msg_type, *args, **kwargs)

    device.transact = transact
    return sent


def _refill(pool, arrays):
    offset = 0
    for x in arrays:
        pool[offset:offset + x.nbytes] = x.tobytes()
        offset += x.nbytes


def _executed_ones(fresh_device):
    """A fresh driver, a prepared 1x4 ADD and a request of ones it has executed once."""
    device = fresh_device()
    model = add_model((1, 4))
    prepared = device.prepare_model(model)
    request, pool, (out,) = make_request(model, [np.ones((1, 4), np.float32)] * 2)
    prepared.execute(request)
    return device, prepared, request, pool, out


@pytest.mark.parametrize("shape", [(1, 4), (40, 40)])  # inline pool; staged through shared memory
def test_repeats_use_the_memo_and_see_fresh_inputs(fresh_device, shape):
    device = fresh_device()
    model = add_model(shape)
    prepared = device.prepare_model(model)
    a, b = RNG.standard_normal((2, *shape)).astype(np.float32)
    request, pool, (out,) = make_request(model, [a, b])
    sent = _spy(device)
    for i in range(5):
        a, b = RNG.standard_normal((2, *shape)).astype(np.float32)
        _refill(pool, [a, b])
        result = prepared.execute(request)
        assert result.status == ErrorStatus.NONE
        assert result.output_shapes[0].dimensions == shape and result.output_shapes[0].is_sufficient
        np.testing.assert_array_equal(out, a + b)
    full = 1 if shape == (1, 4) else 2  # the first execute with a staging pool sends its fd
    assert sent == [MsgType.EXECUTE_SYNC] * full + [MsgType.EXECUTE_SYNC_MEMO] * (5 - full)
    timed = prepared.execute(request, measure_timing=True)
    assert timed.status == ErrorStatus.NONE and timed.timing is not None
    assert sent[-1] == MsgType.EXECUTE_SYNC_MEMO


def test_a_lost_memo_falls_back_to_a_full_execute(fresh_device):
    device, prepared, request, pool, out = _executed_ones(fresh_device)
    prepared.execute(request)
    device.transact(MsgType.FREE_POOLS, struct.pack("<I", 0))  # the driver drops its memos
    sent = _spy(device)
    _refill(pool, [np.full((1, 4), 3, np.float32)] * 2)
    assert prepared.execute(request).status == ErrorStatus.NONE
    assert out.tolist() == [[6.0] * 4]
    assert sent == [MsgType.EXECUTE_SYNC_MEMO, MsgType.EXECUTE_SYNC]
    _refill(pool, [np.full((1, 4), 4, np.float32)] * 2)
    assert prepared.execute(request).status == ErrorStatus.NONE
    assert out.tolist() == [[8.0] * 4]
    assert sent[2:] == [MsgType.EXECUTE_SYNC_MEMO]


def test_malformed_repeats_are_rejected(fresh_device):
    device, prepared, request, _, _ = _executed_ones(fresh_device)
    memo = prepared._memo
    head = MEMO_HEAD.pack(prepared.model_id, memo.memo_id, 0, -1)
    inline = bytes(sum(size for _, _, size in memo.slots))
    for payload in (b"", head[:-1], head, head + inline[:-1], head + inline + b"x"):
        reply = bytes(device.transact(MsgType.EXECUTE_SYNC_MEMO, payload).payload)
        assert struct.unpack_from("<I", reply)[0] == ErrorStatus.INVALID_ARGUMENT, payload
    for model_id, memo_id in ((prepared.model_id, memo.memo_id + 99), (prepared.model_id + 99, memo.memo_id)):
        reply = bytes(device.transact(MsgType.EXECUTE_SYNC_MEMO,
                                      MEMO_HEAD.pack(model_id, memo_id, 0, -1) + inline).payload)
        assert struct.unpack("<IB", reply) == (0, FORM_UNKNOWN)
    ok = bytes(device.transact(MsgType.EXECUTE_SYNC_MEMO, head + inline).payload)
    assert struct.unpack_from("<I", ok)[0] == 0
    assert prepared.execute(request).status == ErrorStatus.NONE  # the connection still works


def test_a_failing_repeat_reports_its_status(fresh_device):
    device, prepared, request, _, _ = _executed_ones(fresh_device)
    device.transact(MsgType.RELEASE_MODEL, struct.pack("<I", prepared.model_id))
    with pytest.raises(HalError) as error:
        prepared.execute(request)
    assert error.value.status == ErrorStatus.INVALID_ARGUMENT
