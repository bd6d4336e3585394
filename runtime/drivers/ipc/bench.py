"""Raw transport round trip: a small record to a second Python process and back.

:func:`raw_round_trip` starts an echo process (``python -m nnscope.runtime.drivers.ipc.bench --echo
PATH``) that answers each record with the same payload over the same ``Channel`` the drivers
use, and times ``send`` + ``recv`` pairs. This is the floor for any driver call; the runtime
benchmark compares ``compute()`` through a driver against it.

:func:`execute_latency` times ``executeSynchronously`` of a tiny ADD model through a real
driver process the same way. ``python -m nnscope.runtime.drivers.ipc.bench`` prints both.

Example:
    >>> stats = raw_round_trip(iterations=200)  # a timing run against a child process  # doctest: +SKIP
    >>> stats.median_us < 1000  # needs the stats above; depends on the machine  # doctest: +SKIP
    True
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

from nnscope.runtime.drivers.ipc.wire.protocol import REPLY, MsgType

#: Ring size of the FMQ floor (that of a burst's rings).
FMQ_RING_BYTES = 64 * 1024
from nnscope.runtime.drivers.ipc.service.driver_service import listen
from nnscope.runtime.drivers.ipc.wire.transport import Channel, PeerClosed


class RoundTrip(NamedTuple):
    """Round-trip latency in microseconds over ``iterations`` messages."""

    median_us: float
    p10_us: float
    p90_us: float
    iterations: int


def raw_round_trip(iterations: int = 1000, payload_size: int = 64, warmup: int = 100,
                   timeout_s: float = 30.0, peer_cpus: set[int] | None = None) -> RoundTrip:
    """Median/p10/p90 of send+receive of a ``payload_size``-byte record to an echo process
    (pinned to ``peer_cpus`` when given; it otherwise inherits this process's CPU affinity)."""
    directory = tempfile.mkdtemp(prefix="nnscope-bench-")
    path = os.path.join(directory, "echo.sock")
    proc = subprocess.Popen([sys.executable, "-m", "nnscope.runtime.drivers.ipc.bench", "--echo", path],
                            stdin=subprocess.DEVNULL)
    try:
        if peer_cpus:
            os.sched_setaffinity(proc.pid, peer_cpus)
        channel = _connect(path, proc, timeout_s)
        payload = bytes(payload_size)
        samples = []
        clock = time.perf_counter_ns
        for i in range(warmup + iterations):
            start = clock()
            channel.send(MsgType.PING, i, payload)
            channel.recv(timeout_s)
            if i >= warmup:
                samples.append(clock() - start)
        channel.close()
    finally:
        _stop(proc)  # the echo side exits when the connection closes
        shutil.rmtree(directory, ignore_errors=True)
    return summarize(samples)


def fmq_round_trip(iterations: int = 1000, payload_size: int = 64, warmup: int = 100,
                   timeout_s: float = 30.0, peer_cpus: set[int] | None = None,
                   poll_s: float = 0.0) -> RoundTrip:
    """The same over two FMQs with eventfd wake-ups (the channels of a burst): the floor of a
    burst execution. Both sides poll their ring for ``poll_s`` before sleeping, as a burst's
    controller and driver listener do. An empty message stops the echo."""
    from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel  # noqa: PLC0415

    out, back = FmqChannel.create(FMQ_RING_BYTES), FmqChannel.create(FMQ_RING_BYTES)
    fds = [*out.fds, *back.fds]
    proc = subprocess.Popen([sys.executable, "-m", "nnscope.runtime.drivers.ipc.bench", "--fmq-echo",
                             ",".join(map(str, fds)), "--poll-us", str(round(poll_s * 1e6))],
                            pass_fds=fds, stdin=subprocess.DEVNULL)
    try:
        if peer_cpus:
            os.sched_setaffinity(proc.pid, peer_cpus)
        payload, samples, clock = bytes(payload_size), [], time.perf_counter_ns
        for i in range(warmup + iterations):
            start = clock()
            out.write(payload, timeout=timeout_s)
            back.read(timeout=timeout_s, poll_s=poll_s)
            if i >= warmup:
                samples.append(clock() - start)
        out.write(b"", timeout=timeout_s)
    finally:
        _stop(proc)
        out.close()
        back.close()
    return summarize(samples)


def fmq_echo(fds: list[int], poll_s: float = 0.0) -> None:
    """The echo side of :func:`fmq_round_trip` (until an empty message)."""
    from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel  # noqa: PLC0415

    inbox, outbox = FmqChannel.attach(*fds[:3]), FmqChannel.attach(*fds[3:6])
    while message := inbox.read(timeout=60.0, poll_s=poll_s):
        outbox.write(message, timeout=60.0)


def _stop(proc) -> None:
    try:
        proc.wait(5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def execute_latency(driver: str = "sample-all", iterations: int = 1000, warmup: int = 100,
                    shared: bool = False) -> RoundTrip:
    """executeSynchronously of a tiny ADD model (two 1x4 float32 tensors) through a driver
    process; ``shared`` puts the request pool in shared memory instead of sending it inline."""
    import numpy as np  # noqa: PLC0415 - only this benchmark needs numpy

    from nnscope.runtime.drivers.ipc.client.device import RemoteDevice  # noqa: PLC0415
    from nnscope.runtime.hal.shared_memory import SharedPool  # noqa: PLC0415
    from nnscope.runtime.hal.device_types import Request, RequestArgument  # noqa: PLC0415

    model = tiny_add_model()
    device = RemoteDevice(driver)
    try:
        prepared = device.prepare_model(model)
        pool = SharedPool(48) if shared else bytearray(48)
        view = pool.view if shared else memoryview(pool)
        view[:32] = np.arange(8, dtype=np.float32).tobytes()
        request = Request(tuple(RequestArgument(pool_index=0, offset=o, length=16) for o in (0, 16)),
                          (RequestArgument(pool_index=0, offset=32, length=16),), (pool,))
        samples = []
        clock = time.perf_counter_ns
        for i in range(warmup + iterations):
            start = clock()
            prepared.execute(request)
            if i >= warmup:
                samples.append(clock() - start)
        if shared:
            device.pools.forget(pool)
    finally:
        device.shutdown()
    return summarize(samples)


def tiny_add_model():
    """``out = a + b`` on 1x4 float32 tensors, as a HAL model."""
    from nnscope.runtime.hal.types import (DataLocation, HalModel, Operand, OperandLifetime as L,  # noqa: PLC0415
                                   OperandType as T, Operation, OperationType, Subgraph)

    a = Operand(T.TENSOR_FLOAT32, (1, 4), lifetime=L.SUBGRAPH_INPUT)
    act = Operand(T.INT32, lifetime=L.CONSTANT_COPY, location=DataLocation(-1, 0, 4))
    out = Operand(T.TENSOR_FLOAT32, (1, 4), lifetime=L.SUBGRAPH_OUTPUT)
    graph = Subgraph((a, a, act, out), (Operation(OperationType.ADD, (0, 1, 2), (3,)),), (0, 1), (3,))
    return HalModel(graph, operand_values=bytes(4))


def summarize(samples_ns: list) -> RoundTrip:
    """RoundTrip statistics (µs) of nanosecond samples."""
    ordered = sorted(samples_ns)
    n = len(ordered)
    return RoundTrip(statistics.median(ordered) / 1000, ordered[n // 10] / 1000,
                     ordered[(9 * n) // 10] / 1000, n)


def _connect(path: str, proc, timeout_s: float) -> Channel:
    give_up = time.monotonic() + timeout_s
    while True:
        try:
            return Channel.connect(path, timeout_s)
        except OSError:
            if proc.poll() is not None or time.monotonic() > give_up:
                raise
            time.sleep(0.005)


def echo(path: str) -> None:
    """Serve one connection: answer every record with the same payload."""
    listener = listen(path)
    sock, _ = listener.accept()
    channel = Channel(sock)
    try:
        while True:
            message = channel.recv(None)
            channel.send(REPLY | message.type, message.request_id, message.payload)
    except PeerClosed:
        pass
    finally:
        channel.close()
        listener.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnscope.runtime.drivers.ipc.bench")
    parser.add_argument("--echo", metavar="PATH", help="run the echo side on PATH")
    parser.add_argument("--fmq-echo", metavar="FDS", help="run the FMQ echo side on six fds")
    parser.add_argument("--poll-us", type=int, default=0, help="the FMQ echo's polling window")
    parser.add_argument("-n", type=int, default=1000, help="iterations")
    parser.add_argument("--driver", default="sample-all", help="driver for the execute latency")
    args = parser.parse_args(argv)
    if args.echo:
        echo(args.echo)
        return 0
    if args.fmq_echo:
        fmq_echo([int(fd) for fd in args.fmq_echo.split(",")], args.poll_us / 1e6)
        return 0
    raw = raw_round_trip(args.n)
    inline = execute_latency(args.driver, args.n)
    shared = execute_latency(args.driver, args.n, shared=True)
    print(f"raw round trip: median {raw.median_us:.1f} us (p10 {raw.p10_us:.1f}, p90 {raw.p90_us:.1f})")
    for label, stats in (("inline", inline), ("shared", shared)):
        print(f"tiny ADD execute via {args.driver} ({label} pool): median {stats.median_us:.1f} us "
              f"(p10 {stats.p10_us:.1f}, p90 {stats.p90_us:.1f}) = {stats.median_us / raw.median_us:.2f}x raw")
    return 0


if __name__ == "__main__":
    sys.exit(main())
