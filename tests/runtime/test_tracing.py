"""The runtime's NNTRACE spans: names, layers and phases per the contract's phase table."""
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, Memory
from tests.runtime.helpers import add_model, ones_add_execution

#: The CPU device's spans (driver processes' spans: tests/runtime/drivers/test_ipc_tracing.py).
pytestmark = pytest.mark.usefixtures("cpu_only")


def _names():
    with tracing.TraceSession() as session:
        model = add_model()
        compilation = Compilation(model)
        compilation.finish()
        execution = ones_add_execution(compilation)
        execution.set_reusable(True)
        execution.compute()
        execution.start_compute().wait()
        execution.free()
        Memory.create_shared(16).free()
        compilation.free()
        model.free()
    return [span.name for span in session.collect().spans()]


def test_public_calls_are_spans_in_their_contract_phase():
    names = set(_names())
    for expected in ("[NN_LR_PP]ANeuralNetworksModel_create", "[NN_LR_PP]ANeuralNetworksModel_addOperand",
                     "[NN_LR_PP]ANeuralNetworksModel_setOperandValue", "[NN_LR_PP]ANeuralNetworksModel_addOperation",
                     "[NN_LR_PP]ANeuralNetworksModel_identifyInputsAndOutputs", "[NN_LR_PP]ANeuralNetworksModel_finish",
                     "[NN_LR_PC]ANeuralNetworksCompilation_create", "[NN_LR_PC]ANeuralNetworksCompilation_finish",
                     "[NN_LR_PC]CpuDevice::prepareModel", "[NN_LR_PC]ExecutionPlan::SimpleBody::finish",
                     "[NN_LR_PE]ANeuralNetworksExecution_create", "[NN_LR_PIO]ANeuralNetworksExecution_setInput",
                     "[NN_LR_PIO]ANeuralNetworksExecution_setOutput", "[NN_LR_PE]ANeuralNetworksExecution_compute",
                     "[NN_LR_PE]ANeuralNetworksExecution_startCompute", "[NN_LR_PE]ANeuralNetworksEvent_wait",
                     "[NN_LR_PE]ANeuralNetworksExecution_setReusable",
                     "[NN_LC_PE]CpuExecutor::run",
                     "[NN_LR_PE]ANeuralNetworksExecution_free", "[NN_LR_PP]ANeuralNetworksMemory_createFromFd",
                     "[NN_LR_PT]ANeuralNetworksMemory_free", "[NN_LR_PT]ANeuralNetworksCompilation_free",
                     "[NN_LR_PT]ANeuralNetworksModel_free"):
        assert expected in names, expected


def test_cpu_spans_nest_inside_the_compute_span():
    with tracing.TraceSession() as session:
        compilation = Compilation(add_model())
        compilation.finish()
        execution = ones_add_execution(compilation)
        execution.compute()
    spans = list(session.collect().spans())
    by_index = {span.index: span for span in spans}
    cpu = next(s for s in spans if s.name == "[NN_LC_PE]CpuExecutor::run")
    chain = []
    while cpu.parent is not None:
        cpu = by_index[cpu.parent]
        chain.append(cpu.name)
    assert chain == ["[NN_LR_PE]ANeuralNetworksExecution_compute"]  # a simple plan: no step span
