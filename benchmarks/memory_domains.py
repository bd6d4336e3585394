"""Two executions chained through a tensor, on a real ``sample-float-fast`` driver process:
``m = x + k`` then ``y = m * w`` with ``m`` of ``--floats`` float32.

Host mode binds ``m`` to a numpy array (the runtime stages it through shared memory and copies
it in and out of the driver's view at every execution); device mode binds it to a memory made
from a ``MemoryDesc`` (a driver-side IBuffer: executions carry its token, the tensor never
leaves the driver). Rounds alternate the two modes so machine noise hits both alike; the
execute records the client sends are measured in both.

Usage:
    python benchmarks/memory_domains.py [--floats N] [--rounds N] [--per-round N]

Prints the medians, writes ``benchmarks/results/memory_domains.json`` and prints the same JSON
object as the last line (keys ``chain_host_ms``, ``chain_device_ms``, ``device_speedup``,
``execute_record_bytes_host``, ``execute_record_bytes_device``, ``tensor_bytes``).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from nnscope.runtime import Compilation, Execution, Memory, MemoryDesc
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from nnscope.runtime.model import Model

from _common import write_results


def _model(op: Op, floats: int) -> Model:
    model = Model(op.name.lower())
    a = model.add_operand(T.TENSOR_FLOAT32, (floats,))
    b = model.add_operand(T.TENSOR_FLOAT32, (1,))
    act = model.add_operand(T.INT32)
    out = model.add_operand(T.TENSOR_FLOAT32, (floats,))
    model.set_operand_value(act, 0)
    model.add_operation(op, [a, b, act], [out])
    model.identify_inputs_and_outputs([a, b], [out])
    model.finish()
    return model


def _chain(first: Compilation, second: Compilation, middle, x, y):
    """Two reusable executions: ``first`` writes ``middle`` (an array or a Memory), ``second``
    reads it."""
    make, use = Execution(first), Execution(second)
    make.set_input(0, x)
    make.set_input(1, np.float32([0.5]))
    use.set_input(1, np.float32([2.0]))
    use.set_output(0, y)
    if isinstance(middle, Memory):
        make.set_output_from_memory(0, middle, 0, 0)
        use.set_input_from_memory(0, middle, 0, 0)
    else:
        make.set_output(0, middle)
        use.set_input(0, middle)
    for execution in (make, use):
        execution.set_reusable(True)
    return make, use


def _time(chain, count: int) -> list[float]:
    clock, samples = time.perf_counter_ns, []
    for _ in range(count):
        start = clock()
        chain[0].compute()
        chain[1].compute()
        samples.append((clock() - start) / 1e6)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floats", type=int, default=1 << 18)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=20)
    options = parser.parse_args()
    device = RemoteDevice("sample-float-fast", timeout_s=60.0)
    try:
        first, second = (Compilation.for_devices(_model(op, options.floats), [device])
                         for op in (Op.ADD, Op.MUL))
        first.finish()
        second.finish()
        desc = MemoryDesc()
        desc.add_output_role(first, 0, 1.0)
        desc.add_input_role(second, 0, 1.0)
        desc.finish()
        memory = Memory.from_desc(desc)
        x = np.random.default_rng(1).standard_normal(options.floats).astype(np.float32)
        y_host, y_device = np.empty_like(x), np.empty_like(x)
        chains = {"host": _chain(first, second, np.empty_like(x), x, y_host),
                  "device": _chain(first, second, memory, x, y_device)}
        records = _record_sizes(device)
        samples = {mode: [] for mode in chains}
        sizes = {}
        for round_index in range(options.rounds + 1):  # round 0 warms up
            for mode, chain in chains.items():
                records.clear()
                timed = _time(chain, options.per_round)
                if round_index:
                    samples[mode] += timed
                sizes[mode] = max(records)
        assert np.array_equal(y_host, y_device), "the two modes disagree"
        memory.free()
    finally:
        device.shutdown()
    host, on_device = statistics.median(samples["host"]), statistics.median(samples["device"])
    print(f"chain of 2 executions over {4 * options.floats} bytes: host {host:.3f} ms, "
          f"device memory {on_device:.3f} ms; execute records {sizes['host']} / {sizes['device']} bytes")
    write_results("memory_domains", {
        "chain_host_ms": round(host, 4), "chain_device_ms": round(on_device, 4),
        "device_speedup": round(host / on_device, 3),
        "execute_record_bytes_host": sizes["host"], "execute_record_bytes_device": sizes["device"],
        "tensor_bytes": 4 * options.floats})


def _record_sizes(device) -> list:
    """The payload sizes of the execute records ``device`` sends from now on."""
    sizes, send = [], device.transact

    def recording(msg_type, payload, *args, **kwargs):
        if msg_type in (MsgType.EXECUTE_SYNC, MsgType.EXECUTE_SYNC_MEMO):
            sizes.append(len(payload))
        return send(msg_type, payload, *args, **kwargs)

    device.transact = recording
    return sizes


if __name__ == "__main__":
    main()
