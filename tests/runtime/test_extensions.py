"""Vendor extensions in the Model API: the 32-bit encoding, per-model prefixes, extension data,
the runtime's checks (encoding and registered prefix only), and the allowlist gate."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nnscope.runtime import Model, NnError, ResultCode
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.fibonacci import FibonacciDriver
from nnscope.runtime.hal import fibonacci_extension as fx
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.extensions import ExtensionTypeEncoding, is_extension, prefix_of, type_within
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from nnscope.runtime.hal.validate import validate_model
from tests.runtime.extension_helpers import allowed, devices_claiming, refused

NAME = fx.EXAMPLE_FIBONACCI_EXTENSION_NAME
#: The vendor extensions these tests name (a device claims them: see ``devices_claiming``).
VENDOR_NAMES = ("com.vendor.a", "com.vendor.b", "com.a", "com.b", "com.blob")


@pytest.fixture(autouse=True)
def claimed_extensions():
    with devices_claiming(*VENDOR_NAMES):
        yield


def test_an_extension_no_device_supports_is_bad_data():
    """AOSP's TypeManager: no type for an extension name that no device supports."""
    with allowed():
        model = Model("unknown-extension")
        for call in (model.get_extension_operand_type, model.get_extension_operation_type):
            with pytest.raises(NnError, match="not supported by any device") as error:
                call("com.nobody.supports", 0)
            assert error.value.code == ResultCode.BAD_DATA
        assert model.get_extension_operand_type("com.a", 0) >> 16 == 1  # the first known one


def _fib_model(model: Model, scale=0.5, zero_point=10):
    i64 = model.get_extension_operand_type(NAME, fx.EXAMPLE_INT64)
    q64 = model.get_extension_operand_type(NAME, fx.EXAMPLE_TENSOR_QUANT64_ASYMM)
    n, out = model.add_operand(i64), model.add_operand(q64, (0,))
    model.set_operand_extension_data(out, fx.ExampleQuant64AsymmParams(scale, zero_point).pack())
    model.add_operation(model.get_extension_operation_type(NAME, fx.FIBONACCI), [n], [out])
    model.identify_inputs_and_outputs([n], [out])
    return n, out


def test_encoding_puts_the_prefix_in_the_high_16_bits():
    assert ExtensionTypeEncoding.HIGH_BITS_PREFIX == 16 and ExtensionTypeEncoding.LOW_BITS_TYPE == 16
    with allowed():
        model = Model()
        first = model.get_extension_operand_type("com.vendor.a", 7)
        second = model.get_extension_operand_type("com.vendor.b", 0xFFFF)
        again = model.get_extension_operation_type("com.vendor.a", 3)
    assert first == (1 << 16) | 7 and second == (2 << 16) | 0xFFFF and again == (1 << 16) | 3
    assert [prefix_of(t) for t in (first, second, again)] == [1, 2, 1]
    assert [type_within(t) for t in (first, second, again)] == [7, 0xFFFF, 3]
    assert all(is_extension(t) for t in (first, second, again))
    assert not any(is_extension(int(t)) for t in T) and not any(is_extension(int(t)) for t in Op)


def test_prefixes_are_a_bijection_per_model_and_may_differ_between_models():
    with allowed():
        one, two = Model(), Model()
        a1, b1 = one.get_extension_operand_type("com.a", 0), one.get_extension_operand_type("com.b", 0)
        b2, a2 = two.get_extension_operand_type("com.b", 0), two.get_extension_operand_type("com.a", 0)
        for model in (one, two):
            x = model.add_operand(model.get_extension_operand_type("com.a", 0))
            y = model.add_operand(model.get_extension_operand_type("com.b", 0))
            model.add_operation(model.get_extension_operation_type("com.a", 0), [x], [y])
            model.identify_inputs_and_outputs([x], [y])
            model.finish()
    assert prefix_of(a1) != prefix_of(b1) and prefix_of(a1) != prefix_of(a2)
    assert dict(one.to_hal().extension_name_to_prefix) == {"com.a": 1, "com.b": 2}
    assert dict(two.to_hal().extension_name_to_prefix) == {"com.b": 1, "com.a": 2}
    assert prefix_of(b2) == 1


def test_fibonacci_model_finishes_with_names_and_extension_data():
    with allowed():
        model = Model("fib")
        n, out = _fib_model(model)
        model.finish()
    hal = model.to_hal()
    assert hal.extension_name_to_prefix == ((NAME, 1),)
    assert hal.main.operations[0].type.name == "com.example.fibonacci:FIBONACCI"
    assert hal.main.operands[n].type.name == "com.example.fibonacci:EXAMPLE_INT64"
    assert fx.ExampleQuant64AsymmParams.unpack(hal.main.operands[out].extension_data) == \
        fx.ExampleQuant64AsymmParams(0.5, 10)


def test_extension_data_may_have_any_size_and_only_on_extension_operands():
    with allowed():
        model = Model()
        ext = model.add_operand(model.get_extension_operand_type("com.blob", 1), (3,))
        plain = model.add_operand(T.TENSOR_FLOAT32, (3,))
        for size in (0, 1, 1000, 70000):
            model.set_operand_extension_data(ext, bytes(range(256)) * (size // 256) + bytes(size % 256))
            assert len(model.operands[ext].extension_data) == size
        with pytest.raises(NnError, match="not an extension type") as info:
            model.set_operand_extension_data(plain, b"x")
        assert info.value.code == ResultCode.BAD_DATA
        with pytest.raises(NnError, match="bytes-like"):
            model.set_operand_extension_data(ext, 12)
        model.set_operand_extension_data(ext, None)
        assert model.operands[ext].extension_data is None


def test_runtime_checks_only_encoding_and_registered_prefix():
    with allowed():
        model = Model()
        model.get_extension_operand_type("com.a", 0)
        with pytest.raises(NnError, match="prefix 2 is not registered") as info:
            model.add_operand((2 << 16) | 1)
        assert info.value.code == ResultCode.BAD_DATA
        x = model.add_operand((1 << 16) | 0, (2, 0, 5))  # any shape: the driver decides
        with pytest.raises(NnError, match="prefix 3 is not registered"):
            model.add_operation((3 << 16) | 0, [x], [x])
        for bad in (-1, 1 << 16, "x"):
            with pytest.raises(NnError) as info:
                model.get_extension_operand_type("com.a", bad)
            assert info.value.code == ResultCode.BAD_DATA
        with pytest.raises(NnError) as info:
            model.get_extension_operand_type(None, 0)
        assert info.value.code == ResultCode.UNEXPECTED_NULL
        with pytest.raises(NnError, match="non-empty"):
            model.get_extension_operand_type("", 0)


def test_unknown_non_extension_types_keep_their_codes():
    model = Model()
    with pytest.raises(NnError, match="unknown operand type") as info:
        model.add_operand(1234)
    assert info.value.code == ResultCode.BAD_DATA
    with pytest.raises(NnError, match="unknown operation type"):
        model.add_operation(5000, [], [])


def test_hal_validation_rejects_a_broken_prefix_map_and_unregistered_prefixes():
    with allowed():
        model = Model()
        _fib_model(model)
        model.finish()
    hal = model.to_hal()
    validate_model(hal)
    for pairs, message in ((((NAME, 1), ("com.other", 1)), "two extensions"),
                           (((NAME, 1), (NAME, 2)), "two prefixes"),
                           (((NAME, 0),), "outside"), ((("", 1),), "empty")):
        with pytest.raises(HalError, match=message):
            validate_model(dataclasses.replace(hal, extension_name_to_prefix=pairs))
    with pytest.raises(HalError, match="not registered"):
        validate_model(dataclasses.replace(hal, extension_name_to_prefix=(("com.other", 2),)))


def test_refused_program_gets_bad_data_naming_the_allowlist_and_no_support():
    with refused():
        model = Model()
        for call in (model.get_extension_operand_type, model.get_extension_operation_type):
            with pytest.raises(NnError, match="nnapi_extensions_app_allowlist") as info:
                call(NAME, 0)
            assert info.value.code == ResultCode.BAD_DATA
        assert FibonacciDriver().get_extension_support(NAME) is False
    with allowed():
        assert FibonacciDriver().get_extension_support(NAME) is True
        assert FibonacciDriver().get_extension_support("com.example.other") is False
        assert CpuDevice().get_extension_support(NAME) is False


def test_extension_constant_takes_bytes():
    with allowed():
        model = Model()
        i64 = model.get_extension_operand_type(NAME, fx.EXAMPLE_INT64)
        operand = model.add_operand(i64)
        model.set_operand_value(operand, np.int64(5).tobytes())
        with pytest.raises(NnError, match="give its bytes"):
            model.set_operand_value(operand, 5)


@pytest.mark.parametrize("dims", [None, (), (0,), (3, 0)])
def test_value_of_an_extension_tensor_with_unspecified_dimensions_is_bad_data(dims):
    """As AOSP's setOperandValue for every tensor type: the Fibonacci driver describes
    EXAMPLE_TENSOR_QUANT64_ASYMM as a tensor, so an unknown rank or dimension is BAD_DATA."""
    with allowed():
        model = Model()
        q64 = model.add_operand(model.get_extension_operand_type(NAME, fx.EXAMPLE_TENSOR_QUANT64_ASYMM),
                                dims)
        with pytest.raises(NnError, match="unspecified dimensions") as info:
            model.set_operand_value(q64, bytes(24))
        assert info.value.code == ResultCode.BAD_DATA
        known = model.add_operand(model.get_extension_operand_type(NAME, fx.EXAMPLE_TENSOR_QUANT64_ASYMM), (3,))
        model.set_operand_value(known, bytes(24))  # fully specified: accepted
        scalar = model.add_operand(model.get_extension_operand_type(NAME, fx.EXAMPLE_INT64))
        model.set_operand_value(scalar, bytes(8))  # a scalar has no dimensions to specify
        vendor = model.add_operand(model.get_extension_operand_type("com.blob", 1), (2, 0))
        with pytest.raises(NnError, match="unspecified dimensions"):  # undescribed, yet rank 2
            model.set_operand_value(vendor, bytes(4))
