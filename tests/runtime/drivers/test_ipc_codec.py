"""Codec and framing units, plus a real socket pair for the transport (fds, bulk payloads)."""
import os
import socket

import numpy as np
import pytest

from nnscope.runtime.drivers.ipc.wire.codec import (CodecError, Reader, decode_capabilities, decode_model,
                                            encode_capabilities, encode_model)
from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute
from nnscope.runtime.drivers.ipc.service.execute import DecodeState, decode_execute
from nnscope.runtime.drivers.ipc.wire.execution_codec import decode_result, encode_result
from nnscope.runtime.drivers.ipc.wire.protocol import MAX_INLINE_PAYLOAD, MsgType, ProtocolError, pack_header, unpack_header
from nnscope.runtime.hal.shared_memory import SharedPool
from nnscope.runtime.drivers.ipc.wire.transport import PeerClosed, socket_pair
from nnscope.runtime.drivers.registry import create_driver
from nnscope.runtime.hal.device_types import ExecutionResult, OutputShape
from nnscope.runtime.hal.types import ChannelQuant, ErrorStatus
from nnscope.timing import Timing
from tests.runtime.drivers._hal import add_model, conv_model, make_request


def test_capabilities_and_model_round_trip():
    caps = create_driver("sample-quant").capabilities()
    assert decode_capabilities(Reader(encode_capabilities(caps))) == caps
    model = conv_model(np.ones((2, 3, 3, 1)), np.zeros(2))
    operand = model.main.operands[1]
    quant = type(operand)(operand.type, operand.dimensions, 0.25, 0, operand.lifetime, operand.location,
                          ChannelQuant((0.5, 0.25), 0))
    model = type(model)(model.main.__class__((model.main.operands[0], quant, *model.main.operands[2:]),
                                             model.main.operations, model.main.input_indexes,
                                             model.main.output_indexes), (), model.operand_values)
    decoded, external = decode_model(Reader(encode_model(model, True)))
    assert decoded == model and external is None
    decoded, external = decode_model(Reader(encode_model(model, False)))
    assert decoded.main == model.main and external == len(model.operand_values)


def test_a_step_model_carries_its_step_and_operation_origins_checked():
    """The kernel spans' model operation index crosses the wire with the step model."""
    import dataclasses  # noqa: PLC0415

    step = dataclasses.replace(add_model(), step_index=3, operation_origins=(12,))
    decoded, _ = decode_model(Reader(encode_model(step, True)))
    assert (decoded.step_index, decoded.operation_origins) == (3, (12,)) and decoded == step
    for bad in (dict(step_index=-2), dict(operation_origins=(1, 2)), dict(operation_origins=(1 << 30,))):
        with pytest.raises(CodecError, match="step index|operation origins"):
            decode_model(Reader(encode_model(dataclasses.replace(step, **bad), True)))


def test_every_truncation_of_a_model_is_a_codec_error():
    data = encode_model(add_model(), True)
    for cut in range(len(data)):
        with pytest.raises(CodecError):
            reader = Reader(data[:cut])
            decode_model(reader)
            reader.end()


def test_execute_and_result_round_trip():
    model = add_model((2,))
    request, pool, _ = make_request(model, [np.float32([1, 2]), np.float32([3, 4])])
    payload, fds, inline, staged = encode_execute(3, request, True, 123, PoolCache(), [])
    decoded = decode_execute(Reader(payload), DecodeState(), fds)
    assert (decoded.model_id, decoded.measure, decoded.deadline_ns) == (3, True, 123)
    assert decoded.request.inputs == request.inputs and decoded.request.outputs == request.outputs
    assert bytes(decoded.request.pools[0]) == bytes(pool) and decoded.inline_outputs == [0]
    result = ExecutionResult(ErrorStatus.NONE, (OutputShape((2,)),), Timing(5, 9))
    back, outputs = decode_result(Reader(encode_result(result, decoded.request, [0])))
    assert back == result and outputs == [(0, bytes(pool[16:24]))]


def test_header_checks():
    assert unpack_header(pack_header(MsgType.PING, 9, 4)).request_id == 9
    with pytest.raises(ProtocolError):
        unpack_header(b"\0" * 16)
    with pytest.raises(ProtocolError):
        unpack_header(b"abc")


def test_transport_passes_fds_and_bulk_payloads():
    a, b = socket_pair()
    with SharedPool(16) as pool:
        pool.view[:4] = b"data"
        a.send(MsgType.PING, 1, b"x", [pool.fd])
        message = b.recv(2.0)
        assert bytes(message.payload) == b"x" and len(message.fds) == 1
        assert os.pread(message.fds[0], 4, 0) == b"data"
        os.close(message.fds[0])
    big = os.urandom(MAX_INLINE_PAYLOAD * 3)
    a.send(MsgType.PING, 2, big)
    assert bytes(b.recv(2.0).payload) == big
    with pytest.raises(socket.timeout):
        b.recv(0.05)
    a.close()
    with pytest.raises(PeerClosed):
        b.recv(2.0)
    b.close()
