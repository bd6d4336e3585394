"""The trace context on the wire: an optional 26-byte field after the frame header
(FLAG_TRACE) and two TRACE datums before a burst request, both strictly validated: a real driver
answers a malformed one INVALID_ARGUMENT (with the request's id) and keeps serving."""
from __future__ import annotations

import struct

import pytest

from nnscope.runtime.drivers.ipc.wire.codec import CodecError
from nnscope.runtime.drivers.ipc.wire.fmq_datum import (BurstRequest, RequestArgument, TRACE_SIZE,
                                                decode_request, encode_request, encode_trace,
                                                split_trace)
from nnscope.runtime.drivers.ipc.wire.protocol import FLAG_BULK, FLAG_TRACE, REPLY, MsgType, pack_header
from nnscope.runtime.drivers.ipc.wire.transport import socket_pair
from tests.runtime.drivers.test_ipc_malformed import (INVALID, driver, exchange, good_execute,  # noqa: F401
                                                      ping_ok, raw)
from tests.runtime.drivers.test_ipc_burst import burst_setup  # noqa: F401
from nnscope.tracing import propagation

GOOD = propagation.pack(b"\x11" * 16, b"\x22" * 8)
BAD_CONTEXTS = {
    "short": GOOD[:10],
    "version": b"\x01" + GOOD[1:],
    "zero trace id": GOOD[:1] + bytes(16) + GOOD[17:],
    "zero span id": GOOD[:17] + bytes(8) + GOOD[25:],
    "flag bits": GOOD[:25] + b"\x81",
}


def test_channel_carries_the_context_inline_and_bulk():
    a, b = socket_pair()
    try:
        a.send(MsgType.PING, 1, b"hi", context=GOOD)
        message = b.recv(timeout=5.0)
        assert (bytes(message.payload), message.context) == (b"hi", GOOD)
        big = bytes(range(256)) * 200  # over the inline limit: the payload goes through a memfd
        a.send(MsgType.PING, 2, big, context=GOOD)
        message = b.recv(timeout=5.0)
        assert (bytes(message.payload), message.context) == (big, GOOD)
        a.send(MsgType.PING, 3, b"plain")
        assert b.recv(timeout=5.0).context is None
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("context", BAD_CONTEXTS.values(), ids=BAD_CONTEXTS.keys())
def test_a_malformed_context_is_invalid_argument(raw, driver, context):  # noqa: F811
    msg_type, request_id, status, _ = exchange(raw, pack_header(MsgType.PING, 77, 3, FLAG_TRACE)
                                               + context + b"abc")
    assert (msg_type & 0x7FFF, request_id, status) == (MsgType.PING, 77, INVALID)  # the refusal answers that request
    ping_ok(raw)
    good_execute(raw, driver[1])


def test_a_bulk_record_with_a_context_but_no_fd_is_invalid_argument(raw):  # noqa: F811
    record = pack_header(MsgType.PING, 78, 4, FLAG_BULK | FLAG_TRACE) + GOOD
    assert exchange(raw, record)[1:3] == (78, INVALID)
    ping_ok(raw)


def test_a_request_with_a_valid_context_is_served(raw):  # noqa: F811
    record = pack_header(MsgType.PING, 79, 3, FLAG_TRACE) + GOOD + b"abc"
    assert exchange(raw, record) == (REPLY | MsgType.PING, 79, 0, b"abc")


def _request() -> bytes:
    return encode_request(BurstRequest((RequestArgument(False, 0, 0, 16, (1, 4)),),
                                       (RequestArgument(False, 1, 0, 16, (1, 4)),), (3, 7), True))


def test_burst_trace_datums_round_trip():
    request = _request()
    context, rest = split_trace(encode_trace(GOOD) + request)
    assert context == GOOD and bytes(rest) == request
    assert decode_request(rest).slots == (3, 7)
    assert split_trace(request) == (None, request)


@pytest.mark.parametrize("damage", [
    lambda d: d[:TRACE_SIZE - 1],                                   # cut short
    lambda d: d[:20] + b"\x32" + d[21:],                            # second tag
    lambda d: d[:2] + b"\x01" + d[3:],                              # padding
    lambda d: d[:-1] + b"\x01",                                     # spare bytes
    lambda d: d[:1] + b"\x05" + d[2:],                              # context version
    lambda d: d[:4] + bytes(16) + d[20:],                           # zero trace id
], ids=["short", "tag", "padding", "spare", "version", "zero-id"])
def test_malformed_burst_trace_datums_are_refused(damage):
    with pytest.raises(CodecError):  # by the split, or (misaligned) by the request's decoder
        decode_request(split_trace(damage(encode_trace(GOOD)) + _request())[1])


def test_trace_datums_keep_the_datum_layout():
    datums = encode_trace(GOOD)
    assert len(datums) == 40 and struct.unpack_from("<B", datums, 20) == (0x31,)


@pytest.mark.parametrize("damage", [
    lambda d: d[:2] + b"\x01" + d[3:],                              # padding
    lambda d: d[:1] + b"\x05" + d[2:],                              # context version
    lambda d: d[:4] + bytes(16) + d[20:],                           # zero trace id
], ids=["padding", "version", "zero-id"])
def test_a_driver_refuses_a_burst_request_with_malformed_trace_datums(burst_setup, damage):
    from nnscope.runtime.hal.types import ErrorStatus
    from tests.runtime.drivers.test_ipc_burst import _run, _status

    device, compilation, burst = burst_setup
    _run(compilation, burst, 1.0)
    controller = burst.controllers[0]
    request = controller._encoded.message
    assert _status(controller, damage(encode_trace(GOOD)) + request) == ErrorStatus.INVALID_ARGUMENT
    assert _status(controller, encode_trace(GOOD) + request) == ErrorStatus.NONE
    assert (_run(compilation, burst, 2.0)[0] == [2.0, 3.0, 4.0, 5.0]).all()
    assert device.process.alive()
