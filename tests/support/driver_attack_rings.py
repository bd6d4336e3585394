"""Attack helpers for the surfaces added after the first hardening (issue 24): raw bursts
(configureExecutionBurst with fds the attacker chooses), fenced launches, cache fds and IBuffer
allocations, plus what the promises add for them (inotify watches, threads, CPU time).

Example::

    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            model_id = prepare_add(sock)
            reply = configure_burst(sock, ring_fds(attacker) + ring_fds(attacker), model_id)
"""
from __future__ import annotations

import os
import struct

from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from tests.support.driver_attack import Attacker, Reply, exchange, inotify_watches  # noqa: F401

#: Ring size of the attacker's FMQs (small: the attacks are about fds and lengths, not data).
RING_BYTES = 4096


def ring(attacker: Attacker, capacity: int = RING_BYTES) -> FmqChannel:
    """A real FMQ whose fds the attack closes when it ends."""
    channel = FmqChannel.create(capacity)
    for fd in channel.fds:
        attacker.own(fd)
    return channel


def ring_fds(attacker: Attacker, capacity: int = RING_BYTES) -> list:
    """The three fds of a fresh ring (memfd, data eventfd, space eventfd)."""
    return list(ring(attacker, capacity).fds)


def configure_burst(sock, fds, model_id: int, poll_us: int = 0) -> Reply:
    """CONFIGURE_BURST(model, polling window) with the six given fds."""
    return exchange(sock, MsgType.CONFIGURE_BURST, struct.pack("<II", model_id, poll_us), fds)


def burst_id(reply: Reply) -> int:
    assert reply.status == 0, reply
    return struct.unpack_from("<I", reply.body)[0]


def announce_length(channel: FmqChannel, length: int) -> None:
    """Write only a message's u32 length prefix into ``channel`` and wake the reader."""
    struct.pack_into("<I", channel._ring, 0, length)
    channel._index[8] = 4  # the write index (byte 64 of the header): 4 bytes published
    os.eventfd_write(channel.fds[1], 1)


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def cpu_ticks(pid: int) -> int:
    """utime + stime of the process, in clock ticks."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def fenced_payload(model_id: int, waits: int, value: float = 2.0) -> bytes:
    """An EXECUTE_FENCED payload: ``waits`` fences (sent as the first fds), no timeout after
    them, then an inline-pool ADD of a :func:`prepare_add` model."""
    from nnscope.runtime.drivers.ipc.wire.layouts import FENCED_LAUNCH as LAUNCH  # noqa: PLC0415
    from tests.support.driver_attack import execute_add_payload  # noqa: PLC0415

    return LAUNCH.pack(waits, -1) + execute_add_payload(model_id, value)


def unsignalled_fences(attacker: Attacker, count: int) -> list:
    """``count`` sync fences (eventfds) that are never signalled."""
    return [attacker.own(os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)) for _ in range(count)]


# Another client process (the repository's Python): prepares ADD and launches one executeFenced
# without fences; prints the launch status.
_FENCED_CHILD = r"""
import sys
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from tests.support.driver_attack import exchange, prepare_add
from tests.support.driver_attack_rings import fenced_payload
sock = __import__("socket").socket(1, 5)
sock.settimeout(5.0)
sock.connect(sys.argv[1])
print(exchange(sock, MsgType.EXECUTE_FENCED, fenced_payload(prepare_add(sock), 0)).status)
"""


def fenced_from_other_process(socket_path: str) -> int:
    """The status another client process gets for an executeFenced (with no fences)."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run([sys.executable, "-c", _FENCED_CHILD, socket_path], capture_output=True,
                          text=True, timeout=60, cwd=root)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)
