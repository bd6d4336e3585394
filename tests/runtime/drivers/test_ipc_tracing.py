"""Both halves of each IPC call land in the test process's TraceSession (driver spans joined
through ``tracing.session_env()`` and flushed by the driver after each request)."""
import numpy as np

from nnscope import tracing
from nnscope.runtime.drivers.ipc import RemoteDevice
from tests.runtime.drivers._hal import add_model, make_request
from tests.support.stopped import stop_process


def test_driver_spans_join_the_session_with_hidl_marks():
    with tracing.TraceSession() as session:
        device = RemoteDevice("sample-all")
        try:
            device.capabilities()
            model = add_model((4,))
            prepared = device.prepare_model(model)
            request, _, (out,) = make_request(model, [np.ones(4, np.float32)] * 2)
            prepared.execute(request)
            prepared.execute_async(request).wait()
            device.capabilities()  # its reply comes after the driver flushed the async spans
            data = session.collect()
            driver_pid = device.pid
        finally:
            device.shutdown()
    assert out.tolist() == [2.0] * 4
    by_pid = {}
    for span in data.spans():
        by_pid.setdefault(span.pid, []).append(span)
    client = [s.name for s in by_pid[next(p for p in by_pid if p != driver_pid)]]
    server = [s.name for s in by_pid[driver_pid]]
    for phase, method in (("PI", "getCapabilities"), ("PC", "prepareModel"),
                          ("PE", "executeSynchronously"), ("PE", "execute")):
        iface = "IDevice" if phase != "PE" else "IPreparedModel"
        assert f"[NN_LI_{phase}]{method}" in client
        assert f"HIDL::{iface}::{method}::client" in client
        assert f"HIDL::{iface}::{method}::server" in server
    assert "[NN_LD_PE]SampleDriver::executeSynchronously" in server
    assert "[NN_LD_PC]SampleDriver::prepareModel" in server
    assert "[NN_LC_PE]CpuExecutor::run" in server
    assert "HIDL::IExecutionCallback::notify::client" in server
    assert "HIDL::IExecutionCallback::notify::server" in client
    _assert_nesting(data, driver_pid)


def _assert_nesting(data, driver_pid):
    """The LD scope sits inside the server mark; the HIDL client mark inside the LI scope."""
    spans = list(data.spans())
    by_index = {(s.pid, s.tid, s.index): s for s in spans}
    for span in spans:
        parent = by_index.get((span.pid, span.tid, span.parent)) if span.parent is not None else None
        if span.name == "[NN_LD_PE]SampleDriver::executeSynchronously":
            assert parent.name == "HIDL::IPreparedModel::executeSynchronously::server"
        if span.name == "HIDL::IPreparedModel::executeSynchronously::client":
            assert parent.name == "[NN_LI_PE]executeSynchronously"
        if span.name == "[NN_LC_PE]CpuExecutor::run" and span.pid == driver_pid:
            assert parent.name.startswith("[NN_LD_PE]SampleDriver::")


def test_a_driver_started_before_the_session_joins_it_at_the_next_compilation():
    from nnscope.runtime import Compilation, Execution  # noqa: PLC0415
    from tests.runtime.helpers import add_model as public_add_model  # noqa: PLC0415

    device = RemoteDevice("sample-float-fast")
    try:
        device.capabilities()  # started outside any session
        for _ in range(2):  # a second session too: the driver follows the current one
            with tracing.TraceSession() as session:
                compilation = Compilation.for_devices(public_add_model(), [device])
                compilation.finish()
                execution = Execution(compilation)
                x = np.ones((1, 4), np.float32)
                execution.set_input(0, x)
                execution.set_input(1, x)
                execution.set_output(0, np.zeros((1, 4), np.float32))
                execution.compute()
                device.capabilities()  # a later request: the driver has flushed the execution
                names = {s.name for s in session.collect().spans() if s.pid == device.pid}
            assert "HIDL::IPreparedModel::executeSynchronously::server" in names
            assert "HIDL::IDevice::prepareModel::server" in names
    finally:
        device.shutdown()


def test_a_driver_spawned_but_not_yet_connected_joins_a_session_started_meanwhile():
    """Spawned outside any session, connected inside one: the connection joins it."""
    from nnscope.runtime import Compilation  # noqa: PLC0415
    from tests.runtime.helpers import add_model as public_add_model  # noqa: PLC0415

    device = RemoteDevice("sample-float-fast")
    try:
        device.launch()  # spawned, not waited for: no connection yet
        with tracing.TraceSession() as session:
            Compilation.for_devices(public_add_model(), [device]).finish()
            device.capabilities()  # a later request: the driver has flushed the preparation
            names = {s.name for s in session.collect().spans() if s.pid == device.pid}
    finally:
        device.shutdown()
    assert "HIDL::IDevice::prepareModel::server" in names, sorted(names)


def test_a_driver_that_does_not_answer_the_session_join_is_reported(caplog):
    """No silent give-up: a stopped driver is killed after its timeout, the failed join is
    logged under VersionedInterfaces and the next call says DEAD_OBJECT."""

    import pytest  # noqa: PLC0415

    from nnscope.runtime.hal.errors import HalError  # noqa: PLC0415
    from nnscope.runtime.hal.types import ErrorStatus  # noqa: PLC0415

    device = RemoteDevice("sample-float-fast", timeout_s=0.5)
    try:
        device.capabilities()  # running, outside any session
        stop_process(device.pid)
        with tracing.TraceSession(), caplog.at_level("WARNING", logger="nn.VersionedInterfaces"):
            device.launch()  # joins the session: no answer
        assert any("cannot join the trace session" in r.getMessage() for r in caplog.records)
        with pytest.raises(HalError) as error:
            device.capabilities()
        assert error.value.status == ErrorStatus.DEAD_OBJECT
    finally:
        device.shutdown()


def test_every_repeated_execute_is_traced_down_to_the_cpu_executor():
    from nnscope.runtime import Compilation, Execution  # noqa: PLC0415
    from tests.runtime.helpers import add_model as public_add_model  # noqa: PLC0415

    device = RemoteDevice("sample-all")
    try:
        with tracing.TraceSession() as session:
            compilation = Compilation.for_devices(public_add_model(), [device])
            compilation.finish()
            execution = Execution(compilation)
            x, out = np.ones((1, 4), np.float32), np.zeros((1, 4), np.float32)
            execution.set_input(0, x)
            execution.set_input(1, x)
            execution.set_output(0, out)
            execution.set_reusable(True)  # the same request computed four times
            for value in (1, 2, 3, 4):  # the same request: repeats take the driver's memo path
                x[:] = value
                execution.compute()
                assert out.tolist() == [[2.0 * value] * 4]
            device.capabilities()  # a later request: the driver has flushed the executions
            runs = [s for s in session.collect().spans()
                    if s.pid == device.pid and s.name == "[NN_LC_PE]CpuExecutor::run"]
    finally:
        device.shutdown()
    assert len(runs) == 4
