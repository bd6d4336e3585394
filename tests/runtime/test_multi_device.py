"""Compilations across real sample-driver processes: partition, CPU fallback, NN_PARTITION,
GraphDump of the real partition (rendered with ``dot``)."""
from __future__ import annotations

import html
import subprocess

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, NnError, Preference, ResultCode, graphdump, manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.helpers import add_model, mixed_expected, mixed_model, run
from tests.support.log_capture import captured_log
from tests.support.programs import require_program

X = np.float32([[0.0, 1.5, -2.0, 3.0]])
Y = np.float32([[2.0, -1.0, 0.5, 1.0]])
Q = np.uint8([[130, 120, 128, 140]])


def _mixed(compilation: Compilation) -> np.ndarray:
    from nnscope.runtime.cli._backend import compute_arrays  # noqa: PLC0415
    [out] = compute_arrays(compilation, [X, Y, Q])
    return out


@pytest.fixture(scope="module")
def drivers():
    """Real float-fast and quant driver processes, shared by the module."""
    made = {name: RemoteDevice(name, timeout_s=30.0) for name in ("sample-float-fast", "sample-quant")}
    yield made
    for device in made.values():
        device.shutdown()


@pytest.fixture
def float_and_quant(drivers):
    """``manager.devices()`` = the two drivers; the CPU is only the fallback."""
    manager.forTest_set_devices(list(drivers.values()))
    yield drivers
    manager.forTest_reset()


@pytest.fixture
def vlog_lines():
    with captured_log("nn", "compilation,execution", with_logger_name=True) as lines:
        yield lines


def test_mixed_model_partitions_across_drivers_with_cpu_fallback(float_and_quant):
    compilation = Compilation(mixed_model())
    compilation.finish()
    plan = compilation.plan
    assert [(s.device.name, s.operations) for s in plan.steps] == [
        ("sample-float-fast", (0,)), ("nnapi-reference", (1,)), ("sample-quant", (2,)),
        ("nnapi-reference", (3,)), ("sample-float-fast", (4,))]
    assert plan.crossing == {5, 6, 7, 8}
    np.testing.assert_allclose(_mixed(compilation), mixed_expected(X, Y, Q))
    compilation.free()


def test_graph_dump_shows_the_real_partition(float_and_quant, tmp_path):
    compilation = Compilation(mixed_model())
    compilation.finish()
    path = tmp_path / "mixed.dot"
    text = graphdump.graph_dump(compilation, str(path))
    dot = require_program("dot")
    done = subprocess.run([dot, "-Tsvg", str(path)], capture_output=True, text=True, check=True)
    svg = html.unescape(done.stdout)
    assert done.stderr == "" and "</svg>" in svg
    for title in ("step 0: sample-float-fast", "step 1: nnapi-reference", "step 2: sample-quant",
                  "step 3: nnapi-reference", "step 4: sample-float-fast"):
        assert title in svg
    assert svg.count("crosses devices") == 4 and text.count("subgraph cluster_step") == 5
    colours = {line.split("color=")[1].split(";")[0] for line in text.splitlines()
               if "style=\"rounded\"; color=" in line}
    assert len(colours) == 3  # one colour per device
    compilation.free()


def test_for_devices_uses_only_those_without_fallback(drivers):
    with pytest.raises(NnError) as info:
        Compilation.for_devices(mixed_model(), list(drivers.values())).finish()
    assert info.value.code == ResultCode.BAD_DATA and "QUANTIZE" in info.value.message
    compilation = Compilation.for_devices(add_model(), [drivers["sample-float-fast"]])
    compilation.finish()
    assert [s.device.name for s in compilation.plan.steps] == ["sample-float-fast"]
    assert compilation.plan.fallback is None
    x = np.float32([[1, 2, 3, 4]])
    assert run(compilation, x, x).tolist() == [[2, 4, 6, 8]]
    compilation.free()


def test_nn_partition_modes(float_and_quant):
    with manager.override_partitioning(manager.PARTITIONING_NO):
        compilation = Compilation(mixed_model())
        compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == ["nnapi-reference"]
        assert compilation.plan.simple
        np.testing.assert_allclose(_mixed(compilation), mixed_expected(X, Y, Q))
        float_only = Compilation(add_model())
        float_only.finish()
        assert [s.device.name for s in float_only.plan.steps] == ["sample-float-fast"]
    with manager.override_partitioning(manager.PARTITIONING_WITHOUT_FALLBACK):
        with pytest.raises(NnError) as info:
            Compilation(mixed_model()).finish()
        assert info.value.code == ResultCode.BAD_DATA
    assert manager.partitioning() is manager.PartitioningMode.WITH_FALLBACK
    assert (manager.PARTITIONING_NO, manager.PARTITIONING_WITH_FALLBACK,
            manager.PARTITIONING_WITHOUT_FALLBACK) == (0, 1, 2)
    with pytest.raises(ValueError):
        with manager.override_partitioning(3):
            pass


class PrepareFails(CpuDevice):
    """Claims every operation at half the CPU's cost, then fails every prepare."""

    name = "fake-prepare-fails"

    def capabilities(self):
        from nnscope.runtime.hal.device_types import Capabilities, PerformanceInfo  # noqa: PLC0415
        from nnscope.runtime.hal.types import OperandType  # noqa: PLC0415
        fast = PerformanceInfo(0.5, 0.5)
        return Capabilities(fast, fast, tuple((t, fast) for t in OperandType), fast, fast)

    def prepare_model(self, *args, **kwargs):
        raise HalError(ErrorStatus.GENERAL_FAILURE, "this driver cannot prepare anything")


def test_failed_prepare_falls_back_to_the_cpu_traced_and_logged(vlog_lines):
    manager.forTest_set_devices([CpuDevice(), PrepareFails()])
    try:
        with tracing.TraceSession() as session:
            compilation = Compilation(add_model())
            compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == ["nnapi-reference"]
        x = np.float32([[1, 2, 3, 4]])
        assert run(compilation, x, x).tolist() == [[2, 4, 6, 8]]
        names = [span.name for span in session.collect().spans()]
        assert "[NN_LR_PC]CompilationBuilder::cpuFallback" in names
        assert any("CompilationBuilder::finish with CPU fallback" in line and
                   "this driver cannot prepare anything" in line for line in vlog_lines)
        with pytest.raises(NnError) as info:  # an explicit device list never falls back
            Compilation.for_devices(add_model(), [PrepareFails()]).finish()
        assert info.value.code == ResultCode.OP_FAILED
    finally:
        manager.forTest_reset()


def test_dead_driver_takes_no_work():
    doomed = RemoteDevice("sample-minimal", timeout_s=30.0)
    try:
        doomed.capabilities()
        doomed.process.kill()
        manager.forTest_set_devices([CpuDevice(), doomed])
        compilation = Compilation(add_model())
        compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == ["nnapi-reference"]
    finally:
        manager.forTest_reset()
        doomed.shutdown()


def test_driver_timing_reaches_get_duration_in_nanoseconds(drivers):
    from nnscope.runtime import Duration, Execution  # noqa: PLC0415
    compilation = Compilation.for_devices(add_model(), [drivers["sample-float-fast"]])
    compilation.finish()
    execution = Execution(compilation)
    x, out = np.float32([[1, 2, 3, 4]]), np.zeros((1, 4), np.float32)
    execution.set_input(0, x)
    execution.set_input(1, x)
    execution.set_output(0, out)
    execution.set_measure_timing(True)
    execution.compute()
    on_hw, in_driver = execution.get_duration(Duration.ON_HARDWARE), execution.get_duration(Duration.IN_DRIVER)
    assert out.tolist() == [[2, 4, 6, 8]]
    assert 0 <= on_hw <= in_driver and in_driver > 0 and in_driver % 1000 == 0
    assert in_driver < 1_000_000_000  # nanoseconds of a tiny ADD, not a unit mix-up
    unmeasured = Execution(compilation)  # executions are single-use
    unmeasured.set_input(0, x)
    unmeasured.set_input(1, x)
    unmeasured.set_output(0, out)
    unmeasured.compute()
    with pytest.raises(NnError) as info:
        unmeasured.get_duration(Duration.IN_DRIVER)
    assert info.value.code == ResultCode.BAD_STATE
    compilation.free()


def test_unknown_durations_read_as_none(cpu_only):
    from nnscope.runtime import Duration, Execution  # noqa: PLC0415
    from nnscope.runtime.hal.device_types import ExecutionResult  # noqa: PLC0415
    from nnscope.timing import Timing  # noqa: PLC0415

    class Unmeasured(CpuDevice):
        name = "fake-unmeasured"

        def prepare_model(self, *args, **kwargs):
            inner = super().prepare_model(*args, **kwargs)
            outer = type(inner).__new__(type(inner))
            outer.__dict__.update(inner.__dict__)
            outer.execute = lambda request, measure=False, deadline=None: ExecutionResult(
                inner.execute(request, measure, deadline).status,
                inner.execute(request, measure, deadline).output_shapes, Timing())
            return outer

    compilation = Compilation.for_devices(add_model(), [Unmeasured()])
    compilation.finish()
    execution = Execution(compilation)
    x = np.float32([[1, 2, 3, 4]])
    execution.set_input(0, x)
    execution.set_input(1, x)
    execution.set_output(0, np.zeros((1, 4), np.float32))
    execution.set_measure_timing(True)
    execution.compute()
    assert execution.get_duration(Duration.ON_HARDWARE) is None
    assert execution.get_duration(Duration.IN_DRIVER) is None
