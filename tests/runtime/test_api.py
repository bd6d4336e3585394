import pickle

import pytest

from nnscope.runtime.api import (BadDataError, BadStateError, MissedDeadlineError, NnError,
                         OutputInsufficientSizeError, from_hal_error)
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, ResultCode


def test_nnerror_returns_the_subclass_of_its_code():
    error = NnError(ResultCode.BAD_DATA, "operand 3: bad")
    assert type(error) is BadDataError
    assert error.code is ResultCode.BAD_DATA and error.message == "operand 3: bad"
    assert str(error) == "BAD_DATA: operand 3: bad"
    assert isinstance(NnError(ResultCode.BAD_STATE), BadStateError)
    assert isinstance(NnError(ResultCode.OUTPUT_INSUFFICIENT_SIZE, "x"), OutputInsufficientSizeError)
    assert isinstance(NnError(ResultCode.MISSED_DEADLINE_PERSISTENT, "x"), MissedDeadlineError)


def test_unknown_code_reads_as_op_failed_and_pickles():
    error = NnError(999, "weird")
    assert error.code is ResultCode.OP_FAILED
    again = pickle.loads(pickle.dumps(NnError(ResultCode.BAD_DATA, "m")))
    assert isinstance(again, BadDataError) and again.message == "m"


def test_hal_errors_convert_through_the_single_pair():
    error = from_hal_error(HalError(ErrorStatus.INVALID_ARGUMENT, "bad operand 2"), "finish")
    assert error.code is ResultCode.BAD_DATA
    assert error.message == "finish: bad operand 2"
    with pytest.raises(BadDataError):
        raise error
