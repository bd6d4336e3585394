"""Every tracing test starts and ends with tracing off and no session active."""
import pytest

from nnscope.tracing import session as trace_session
from nnscope.tracing import override_environment


@pytest.fixture(autouse=True)
def tracing_off():
    with override_environment({}):
        yield
        leaked = list(trace_session._active)
        for session in leaked:
            session.stop()
    assert not leaked, "a test left a TraceSession running"
