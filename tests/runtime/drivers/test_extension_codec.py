"""The IPC codec carries extensionNameToPrefix, extension types and extension data, validates
them on decode (CodecError, i.e. INVALID_ARGUMENT), and encodes getSupportedExtensions."""
from __future__ import annotations

import pytest

from nnscope.runtime.drivers.fibonacci import FibonacciDriver
from nnscope.runtime.drivers.ipc.wire.codec import (CodecError, Reader, decode_extensions, decode_model,
                                            encode_extensions, encode_model)
from nnscope.runtime.hal.extensions import Extension, ExtensionType
from tests.runtime.drivers._hal import add_model
from tests.runtime.drivers.fib_hal import FIBONACCI, NAME, PREFIX, fib_model


def _round_trip(model):
    reader = Reader(encode_model(model, values_inline=True))
    decoded, external = decode_model(reader)
    reader.end()
    assert external is None
    return decoded


def test_model_round_trip_keeps_prefixes_types_names_and_data():
    model = fib_model(extension_data=bytes(range(200)) * 3, pairs=((NAME, PREFIX), ("com.x", 9)))
    decoded = _round_trip(model)
    assert decoded == model
    assert decoded.extension_name_to_prefix == ((NAME, PREFIX), ("com.x", 9))
    op_type = decoded.main.operations[0].type
    assert isinstance(op_type, ExtensionType) and op_type == FIBONACCI
    assert op_type.name == "com.example.fibonacci:FIBONACCI"
    assert decoded.main.operands[1].type.name == "com.example.fibonacci:EXAMPLE_TENSOR_QUANT64_ASYMM"
    assert decoded.main.operands[1].extension_data == bytes(range(200)) * 3
    unknown = _round_trip(fib_model(op_type=(9 << 16) | 42, pairs=((NAME, PREFIX), ("com.x", 9))))
    assert unknown.main.operations[0].type.name == "com.x:42"


def test_empty_extension_data_differs_from_none():
    model = fib_model(extension_data=b"")
    assert _round_trip(model).main.operands[1].extension_data == b""
    assert _round_trip(fib_model(out_type=3, out_dims=(0,))).main.operands[1].extension_data is None


@pytest.mark.parametrize("pairs,message", [
    ((), "not in extensionNameToPrefix"), ((("com.other", PREFIX + 1),), "not in extensionNameToPrefix"),
    (((NAME, PREFIX), (NAME, PREFIX + 1)), "two prefixes"),
    (((NAME, PREFIX), ("com.other", PREFIX)), "two extensions"), (((NAME, 0),), "outside"),
    ((("", PREFIX),), "empty")])
def test_decode_rejects_bad_prefix_tables(pairs, message):
    payload = encode_model(fib_model(pairs=pairs), values_inline=True)
    with pytest.raises(CodecError, match=message):
        decode_model(Reader(payload))


def test_truncated_extension_section_is_rejected():
    payload = encode_model(fib_model(), values_inline=True)
    for cut in range(1, 30):
        with pytest.raises(CodecError):
            reader = Reader(payload[:-cut])
            decode_model(reader)
            reader.end()


def test_supported_extensions_round_trip():
    extensions = FibonacciDriver().supported_extensions() + (Extension("com.empty"),)
    assert decode_extensions(Reader(encode_extensions(extensions))) == extensions
    assert decode_extensions(Reader(encode_extensions(()))) == ()
    with pytest.raises(CodecError):
        decode_extensions(Reader(encode_extensions(extensions)[:-3]))


def test_non_extension_models_end_with_an_empty_table():
    payload = encode_model(add_model((4,)), values_inline=True)
    assert payload.endswith(b"\x00\x00\x00\x00")
    assert decode_model(Reader(payload))[0].extension_name_to_prefix == ()
