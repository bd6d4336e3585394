"""Fixtures of the CTS tests."""
from __future__ import annotations

import pytest

from tests.support.device_sets import cpu_and_driver


@pytest.fixture(scope="module")
def sample_all():
    """A real sample-all driver process (with the CPU) as the devices, for the module."""
    yield from cpu_and_driver("sample-all", timeout_s=60.0)
