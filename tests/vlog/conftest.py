"""Every vlog test starts with the mask off and nnscope's handler removed, and ends the same."""
import pytest

from nnscope import vlog


@pytest.fixture(autouse=True)
def clean_vlog():
    vlog.reset_logging()
    with vlog.override(""):
        yield
    vlog.reset_logging()
