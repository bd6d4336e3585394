"""Attack harness for driver processes: a real ``python -m nnscope.runtime.drivers`` process, raw socket
clients that speak the wire protocol directly, and the five promises checked after each attack.

After every attack the driver must: be alive; answer a correct request (PING) within
:data:`ANSWER_S`; keep its peak RSS (``VmHWM``) under :data:`RSS_LIMIT_KB`; hold no more fds than
before the attack (nor more inotify watches than the cache memo's bound); and have printed no
traceback on its stderr.

Example::

    with AttackedDriver() as driver:
        with driver.attack() as attacker:      # promises are checked when the block ends
            sock = attacker.connect()
            send(sock, record(MsgType.PING, 1, b"x" * 3))
            assert read_reply(sock).status == 0
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from typing import Iterator, NamedTuple

from nnscope.runtime.drivers.cache_files import MEMO_MAX_ENTRIES
from nnscope.runtime.drivers.ipc.wire.protocol import (HEADER, MAGIC, MAX_INLINE_PAYLOAD, REPLY, VERSION, MsgType,
                                               pack_header)
from nnscope.runtime.drivers.ipc.wire.transport import Channel

#: Seconds within which the driver must answer a correct request.
ANSWER_S = 5.0
#: Peak resident set size (``VmHWM``) the driver must stay under, in kB.
RSS_LIMIT_KB = 500 * 1024
_STARTUP_S = 30.0
_SETTLE_S = 30.0


class Reply(NamedTuple):
    type: int
    request_id: int
    status: int
    body: bytes


def record(msg_type: int, request_id: int, payload=b"", flags: int = 0) -> bytes:
    """One framed record (header + inline payload)."""
    return pack_header(msg_type, request_id, len(payload), flags) + bytes(payload)


def send(sock: socket.socket, data: bytes, fds=()) -> None:
    """Send one record; one longer than the inline limit goes as a bulk record (sealed memfd)."""
    if len(data) > HEADER.size + MAX_INLINE_PAYLOAD:
        msg_type, request_id = HEADER.unpack_from(data)[3:5]
        head, bulk = Channel.pending(msg_type, request_id, data[HEADER.size:])
        try:
            socket.send_fds(sock, [head], [*bulk, *fds])
        finally:
            os.close(bulk[0])
    elif fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def read_reply(sock: socket.socket, timeout: float = ANSWER_S) -> Reply:
    """The next record from the driver; raises TimeoutError, or EOFError when it closed."""
    sock.settimeout(timeout)
    try:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 17, 8)
    except socket.timeout:
        raise TimeoutError(f"no reply within {timeout}s") from None
    for fd in fds:  # a bulk reply: these tests look at the status only
        os.close(fd)
    if not data:
        raise EOFError("driver closed the connection")
    magic, version, _, msg_type, request_id, _ = HEADER.unpack_from(data)
    assert (magic, version) == (MAGIC, VERSION), data[:16]
    status = struct.unpack_from("<I", data, HEADER.size)[0] if len(data) >= HEADER.size + 4 else -1
    return Reply(msg_type, request_id, status, bytes(data[HEADER.size + 4:]))


def exchange(sock: socket.socket, msg_type: int, payload=b"", fds=(), request_id: int = 1,
             timeout: float = ANSWER_S) -> Reply:
    send(sock, record(msg_type, request_id, payload), fds)
    return read_reply(sock, timeout)


def ping(sock: socket.socket, timeout: float = ANSWER_S) -> float:
    """PING and check the echo; returns the seconds it took."""
    start = time.monotonic()
    reply = exchange(sock, MsgType.PING, b"are you there", request_id=4242, timeout=timeout)
    assert reply == (REPLY | MsgType.PING, 4242, 0, b"are you there"), reply
    return time.monotonic() - start


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def inotify_watches(pid: int) -> int:
    """inotify watches the process holds (``/proc/<pid>/fdinfo`` lines of its inotify fds)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as info:
            count += sum(line.startswith("inotify wd:") for line in info)
    return count


def peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


class Attacker:
    """The sockets and fds of one attack; all closed when the attack ends."""

    def __init__(self, driver: AttackedDriver):
        self.driver = driver
        self.sockets: list[socket.socket] = []
        self.fds: list[int] = []

    def connect(self, timeout: float = ANSWER_S) -> socket.socket:
        sock = self.driver.connect(timeout)
        self.sockets.append(sock)
        return sock

    def own(self, fd: int) -> int:
        """Close ``fd`` when the attack ends."""
        self.fds.append(fd)
        return fd

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.sockets, self.fds = [], []


class AttackedDriver:
    """A driver process started for attacks (stderr captured), with the promise checks.

    Args:
        name: The sample driver to run.
        extra_args: More command-line arguments for ``python -m nnscope.runtime.drivers``.
        max_fds: A lower fd limit (RLIMIT_NOFILE, soft and hard) for the driver, so fd
            exhaustion attacks stay quick.
    """

    def __init__(self, name: str = "sample-all", extra_args=(), max_fds: int | None = None):
        self.name = name
        self.extra_args = list(extra_args)
        self.max_fds = max_fds
        self.dir = tempfile.mkdtemp(prefix="nnscope-attack-")
        self.socket_path = os.path.join(self.dir, "driver.sock")
        self._stderr_path = os.path.join(self.dir, "stderr.txt")
        self.popen: subprocess.Popen | None = None
        self.baseline_fds = 0

    @property
    def pid(self) -> int:
        return self.popen.pid

    def start(self) -> AttackedDriver:
        env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **os.environ}
        env.pop("NNSCOPE_TRACE", None)
        env.pop("NNSCOPE_TRACE_DIR", None)
        command = [sys.executable, "-m", "nnscope.runtime.drivers", self.name, "--socket", self.socket_path,
                   "--parent-pid", str(os.getpid()), *self.extra_args]
        with open(self._stderr_path, "wb") as stderr:
            self.popen = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                          stdout=stderr, stderr=stderr, preexec_fn=self._limit_fds)
        give_up = time.monotonic() + _STARTUP_S
        while True:
            try:
                with self.connect(1.0) as sock:
                    ping(sock)
                break
            except OSError:
                if self.popen.poll() is not None or time.monotonic() > give_up:
                    raise AssertionError(f"driver did not start: {self.stderr()}") from None
                time.sleep(0.05)
        self.baseline_fds = self._settled_fds(None)
        return self

    def _limit_fds(self) -> None:
        if self.max_fds is not None:
            import resource  # noqa: PLC0415

            resource.setrlimit(resource.RLIMIT_NOFILE, (self.max_fds, self.max_fds))

    def connect(self, timeout: float = ANSWER_S) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        return sock

    def stderr(self) -> str:
        with open(self._stderr_path, encoding="utf-8", errors="replace") as stderr:
            return stderr.read()

    @contextlib.contextmanager
    def attack(self) -> Iterator[Attacker]:
        """Yields an :class:`Attacker`; afterwards checks that the driver answers a fresh client
        while the attacker's connections are still open, closes them, then checks all promises."""
        attacker = Attacker(self)
        try:
            yield attacker
            self.check_answers()
        finally:
            attacker.close()
        self.check_promises()

    def check_answers(self) -> float:
        """Alive, and a PING from a new client (another process: the attacker is this one) is
        answered within ANSWER_S; returns the seconds it took."""
        self.check_alive()
        replies = from_other_process(self.socket_path, [(MsgType.PING, 4242, b"are you there")])
        assert not isinstance(replies, dict), f"a new client was not answered: {replies}"
        (msg_type, request_id, status, seconds), = replies
        assert (msg_type, request_id, status) == (REPLY | MsgType.PING, 4242, 0), replies
        assert seconds < ANSWER_S, f"PING answered after {seconds:.1f}s"
        return seconds

    def check_alive(self) -> None:
        assert self.popen.poll() is None, \
            f"driver died (exit {self.popen.returncode}); stderr:\n{self.stderr()}"

    def check_promises(self) -> dict:
        """All five promises; returns the measured figures."""
        answer_s = self.check_answers()
        fds = self._settled_fds(self.baseline_fds)
        rss = peak_rss_kb(self.pid)
        assert rss < RSS_LIMIT_KB, f"driver peak RSS {rss} kB"
        assert fds <= self.baseline_fds, f"driver holds {fds} fds, {self.baseline_fds} before"
        assert "Traceback" not in self.stderr(), self.stderr()
        watches = inotify_watches(self.pid)  # one per remembered cache file, at most
        assert watches <= MEMO_MAX_ENTRIES, f"driver holds {watches} inotify watches"
        self.check_alive()
        return {"answer_s": answer_s, "fds": fds, "baseline_fds": self.baseline_fds, "peak_rss_kb": rss,
                "inotify_watches": watches}

    def _settled_fds(self, target: int | None) -> int:
        """The driver's fd count once closed connections are noticed (waits up to _SETTLE_S:
        a bound on the wait, generous for a loaded machine, never a speed asserted)."""
        give_up = time.monotonic() + _SETTLE_S
        last = fd_count(self.pid)
        while time.monotonic() < give_up:
            time.sleep(0.05)
            now = fd_count(self.pid)
            if (target is not None and now <= target) or (target is None and now == last):
                return now
            last = now
        return last

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(OSError, TimeoutError, EOFError):
                with self.connect(2.0) as sock:
                    exchange(sock, MsgType.SHUTDOWN, timeout=2.0)
            try:
                self.popen.wait(5.0)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5.0)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> AttackedDriver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# A client in another process (stdlib only, so it also runs as another user): sends the records
# given on stdin as JSON [[type, request id, payload hex], ...] and prints one JSON line with the
# replies [[type, request id, status, seconds], ...], or {"error": ...} when it cannot connect or the
# driver closes the connection.
_CHILD = r"""
import json, socket, struct, sys, time
path, records = sys.argv[1], json.load(sys.stdin)
out = []
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5.0)
    s.connect(path)
    for msg_type, request_id, payload in records:
        body, start = bytes.fromhex(payload), time.monotonic()
        s.send(struct.pack("<IBBHII", 0x50494E4E, 1, 0, msg_type, request_id, len(body)) + body)
        data = s.recv(1 << 17)
        if not data:
            raise EOFError("driver closed the connection")
        head = struct.unpack_from("<IBBHII", data)
        out.append([head[3], head[4], struct.unpack_from("<I", data, 16)[0], time.monotonic() - start])
    print(json.dumps(out))
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}", "replies": out}))
"""


def other_user_python() -> str | None:
    """A Python interpreter another user may run (the venv's may live under /root), or None."""
    for candidate in (sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3"):
        path = os.path.realpath(candidate)
        if os.path.exists(path) and os.stat(path).st_mode & 0o001 and \
                all(os.stat(parent).st_mode & 0o001 for parent in _parents(path)):
            return path
    return None


def _parents(path: str):
    while path != os.path.dirname(path):
        path = os.path.dirname(path)
        yield path


def from_other_process(socket_path: str, records, user: int | None = None):
    """Send ``records`` [(type, request id, payload bytes)] from a separate process (as uid
    ``user`` when given); returns [[type, request id, status, seconds], ...] or
    {"error": ..., "replies": [...]}."""
    def demote():
        os.setgid(user)
        os.setuid(user)

    data = json.dumps([[t, i, bytes(p).hex()] for t, i, p in records])
    python = sys.executable if user is None else other_user_python()
    done = subprocess.run([python, "-I", "-c", _CHILD, socket_path], input=data, text=True,
                          capture_output=True, timeout=30, preexec_fn=demote if user is not None else None,
                          cwd="/")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def prepare_payload(model) -> tuple[bytes, list, list]:
    """A PREPARE_MODEL payload for a HalModel: (payload, fds to send, pools to close after)."""
    from nnscope.runtime.drivers.ipc.client.device import model_payload  # noqa: PLC0415

    body, fds, keep = model_payload(model)
    head = struct.pack("<BBq", 1, 100, -1) + struct.pack("<I", 0) + struct.pack("<I", 0)
    return head + body, fds, keep


def prepare_add(sock: socket.socket, shape=(4,)) -> int:
    """Prepare ``out = a + b`` (float32 ``shape``) on ``sock``; returns the model id."""
    from tests.runtime.drivers._hal import add_model  # noqa: PLC0415

    payload, fds, keep = prepare_payload(add_model(shape))
    try:
        reply = exchange(sock, MsgType.PREPARE_MODEL, payload, fds)
    finally:
        for pool in keep:
            pool.close()
    assert reply.status == 0, reply
    return struct.unpack_from("<I", reply.body)[0]


def execute_add_payload(model_id: int, value: float = 2.0, shape=(4,)) -> bytes:
    """An EXECUTE_SYNC payload adding ``value`` to itself with inline pools."""
    import numpy as np  # noqa: PLC0415

    from nnscope.runtime.drivers.ipc.client.encoder import PoolCache, encode_execute  # noqa: PLC0415
    from tests.runtime.drivers._hal import add_model, make_request  # noqa: PLC0415

    request, _, _ = make_request(add_model(shape), [np.full(shape, value, np.float32)] * 2)
    payload, fds, _, _ = encode_execute(model_id, request, False, None, PoolCache(), [])
    assert not fds
    return payload


def execute_add(sock: socket.socket, model_id: int, value: float = 2.0) -> Reply:
    """A real EXECUTE_SYNC of a model from :func:`prepare_add`; the reply's status is the launch
    status, its body the encoded result (``execution_codec.decode_result``)."""
    return exchange(sock, MsgType.EXECUTE_SYNC, execute_add_payload(model_id, value))


def result_of(reply: Reply):
    """(ExecutionResult, inline outputs) of an EXECUTE_SYNC reply that succeeded."""
    from nnscope.runtime.drivers.ipc.wire.codec import Reader  # noqa: PLC0415
    from nnscope.runtime.drivers.ipc.wire.execution_codec import decode_result  # noqa: PLC0415

    assert reply.status == 0, reply
    return decode_result(Reader(reply.body))
