"""Raw transport round trip: a small record to a second Python process and back.

:func:`raw_round_trip` starts an echo process (``python -m runtime.drivers.ipc.bench --echo
PATH``) that answers each record with the same payload over the same ``Channel`` the drivers
use, and times ``send`` + ``recv`` pairs. This is the floor for any driver call; the runtime
benchmark compares ``compute()`` through a driver against it.

Example:
    >>> stats = raw_round_trip(iterations=200)     # doctest: +SKIP
    >>> stats.median_us < 1000                     # doctest: +SKIP
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

from runtime.drivers.ipc.protocol import REPLY, MsgType
from runtime.drivers.ipc.service import listen
from runtime.drivers.ipc.transport import Channel, PeerClosed


class RoundTrip(NamedTuple):
    """Round-trip latency in microseconds over ``iterations`` messages."""

    median_us: float
    p10_us: float
    p90_us: float
    iterations: int


def raw_round_trip(iterations: int = 1000, payload_size: int = 64, warmup: int = 100,
                   timeout_s: float = 30.0) -> RoundTrip:
    """Median/p10/p90 of send+receive of a ``payload_size``-byte record to an echo process."""
    directory = tempfile.mkdtemp(prefix="nnscope-bench-")
    path = os.path.join(directory, "echo.sock")
    proc = subprocess.Popen([sys.executable, "-m", "runtime.drivers.ipc.bench", "--echo", path],
                            stdin=subprocess.DEVNULL)
    try:
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
        try:
            proc.wait(5.0)  # the echo side exits when the connection closes
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(directory, ignore_errors=True)
    return summarize(samples)


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
    parser = argparse.ArgumentParser(prog="python -m runtime.drivers.ipc.bench")
    parser.add_argument("--echo", metavar="PATH", help="run the echo side on PATH")
    parser.add_argument("-n", type=int, default=1000, help="iterations")
    args = parser.parse_args(argv)
    if args.echo:
        echo(args.echo)
        return 0
    print(raw_round_trip(args.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
