"""Round trip of one small message between two processes: over two FMQs, and over a socket.

The floor of a burst execution (issue 11): this process writes a ``--size``-byte message into
one :class:`~runtime.drivers.ipc.wire.fmq.FmqChannel`, an echo process (this script with ``--echo``)
blocks in ``read`` (asleep on the eventfd wake-up), writes the message back into a second
channel, and this process blocks reading it. For comparison the same two processes exchange the
same message over a Unix ``SOCK_SEQPACKET`` socket pair, in interleaved rounds of the same run
so machine noise hits both alike. CPU placement is left to the scheduler unless ``--pin``.

Usage:
    python benchmarks/fmq_roundtrip.py [--rounds N] [--per-round N] [--size BYTES] [--pin]

Prints median and p99 of each, writes ``benchmarks/results/fmq_roundtrip.json`` and prints the
same JSON object as the last line (keys ``fmq_roundtrip_us``, ``fmq_roundtrip_p99_us``,
``socket_roundtrip_us``, ``socket_roundtrip_p99_us``).
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel

from _common import write_results

TIMEOUT_S = 10.0
RING_BYTES = 4096


def _echo(fds: list[int], rounds: int, per_round: int, size: int) -> None:
    """The second process: echo ``per_round`` messages over the FMQs, then as many over the
    socket, ``rounds`` times (the first round is the warm-up)."""
    inbox, outbox = FmqChannel.attach(*fds[:3]), FmqChannel.attach(*fds[3:6])
    sock = socket.socket(fileno=fds[6])
    for _ in range(rounds + 1):
        for _ in range(per_round):
            outbox.write(inbox.read(timeout=TIMEOUT_S), timeout=TIMEOUT_S)
        for _ in range(per_round):
            sock.sendall(sock.recv(size + 1))


def _time_round(send, receive, message: bytes, per_round: int) -> list[int]:
    clock, samples = time.perf_counter_ns, []
    for _ in range(per_round):
        start = clock()
        send(message)
        receive()
        samples.append(clock() - start)
    return samples


def measure(rounds: int, per_round: int, size: int, pin: bool) -> dict:
    to_peer, from_peer = FmqChannel.create(RING_BYTES), FmqChannel.create(RING_BYTES)
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fds = [*to_peer.fds, *from_peer.fds, theirs.fileno()]
    args = [sys.executable, os.path.abspath(__file__), "--echo", ",".join(map(str, fds)),
            "--rounds", str(rounds), "--per-round", str(per_round), "--size", str(size)]
    proc = subprocess.Popen(args, pass_fds=fds, stdin=subprocess.DEVNULL)
    theirs.close()
    if pin:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[0]})
        os.sched_setaffinity(proc.pid, {cpus[-1]})
    message = bytes(range(256)) * (size // 256) + bytes(size % 256)
    fmq_send = lambda m: to_peer.write(m, timeout=TIMEOUT_S)  # noqa: E731
    fmq_receive = lambda: from_peer.read(timeout=TIMEOUT_S)  # noqa: E731
    fmq, sock = [], []
    try:
        for round_ in range(rounds + 1):
            fmq_samples = _time_round(fmq_send, fmq_receive, message, per_round)
            sock_samples = _time_round(mine.sendall, lambda: mine.recv(size + 1), message, per_round)
            if round_:  # round 0 warms both paths up
                fmq += fmq_samples
                sock += sock_samples
        assert from_peer.read(block=False) is None
        proc.wait(TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        to_peer.close(), from_peer.close(), mine.close()
    return _summary(fmq, sock, size, pin)


def _summary(fmq: list[int], sock: list[int], size: int, pin: bool) -> dict:
    def stats(samples):
        ordered = sorted(samples)
        return (round(statistics.median(ordered) / 1000, 2),
                round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1000, 2))
    fmq_median, fmq_p99 = stats(fmq)
    sock_median, sock_p99 = stats(sock)
    return {"fmq_roundtrip_us": fmq_median, "fmq_roundtrip_p99_us": fmq_p99,
            "socket_roundtrip_us": sock_median, "socket_roundtrip_p99_us": sock_p99,
            "message_bytes": size, "samples": len(fmq), "pinned": pin}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--per-round", type=int, default=250)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--pin", action="store_true", help="the two processes on different CPUs")
    parser.add_argument("--echo", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.rounds, args.per_round) < 1 or not 1 <= args.size <= 1024:
        parser.error("--rounds and --per-round must be >= 1 and --size within [1, 1024]")
    if args.echo:
        _echo([int(fd) for fd in args.echo.split(",")], args.rounds, args.per_round, args.size)
        return
    results = measure(args.rounds, args.per_round, args.size, args.pin)
    print(f"FMQ round trip ({args.size} B, eventfd wake-up): median {results['fmq_roundtrip_us']} us, "
          f"p99 {results['fmq_roundtrip_p99_us']} us over {results['samples']} messages")
    print(f"socket round trip (SOCK_SEQPACKET):       median {results['socket_roundtrip_us']} us, "
          f"p99 {results['socket_roundtrip_p99_us']} us")
    write_results("fmq_roundtrip", results)


if __name__ == "__main__":
    main()
