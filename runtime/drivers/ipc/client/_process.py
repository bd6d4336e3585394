"""Start, connect to and stop one driver process (``python -m nnscope.runtime.drivers <name>``).

The child gets the parent's environment plus ``tracing.session_env()`` so that its spans join
the application's trace session, and, unless the environment says otherwise
(:data:`DRIVER_DEFAULTS`), one BLAS/OpenMP thread and fixed glibc malloc thresholds.
Several driver processes and the runtime share the CPUs, and OpenBLAS worker threads that spin
between calls starve the other processes (on two cores the built-in model went from ~30 ms to
~220 ms per execution across two drivers). With glibc's sliding thresholds a driver could fall
into returning its large tensors to the kernel after every execution and faulting them in again:
3,800 page faults and 17 ms per MobileNet execution against 0 and 9 ms (2026-11-26). It binds a
socket in a private temporary directory; the parent polls ``connect`` until it succeeds, the
child exits (DEVICE_UNAVAILABLE) or the startup timeout passes. :meth:`DriverProcess.stop` waits briefly, then terminates, then kills.

Example::

    proc = DriverProcess("sample-all")
    channel = proc.start(startup_timeout_s=30.0)
    ...
    proc.stop()
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

from nnscope.runtime.drivers.ipc.wire import _trace
from nnscope.runtime.drivers.ipc.wire.transport import Channel
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus


#: Environment defaults for driver processes (a value already set in the environment wins):
#: one BLAS thread; tensors under 32 MiB from the heap, which keeps up to 256 MiB freed at its top.
DRIVER_DEFAULTS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                   "MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(256 << 20)}


def positive_seconds(text: str | None, default: float) -> float:
    """``text`` as a positive number of seconds, else ``default``."""
    try:
        value = float(text) if text else default
    except ValueError:
        return default
    return value if value > 0 else default


class DriverProcess:
    """The OS process behind one ``RemoteDevice``."""

    def __init__(self, name: str):
        self.name = name
        self.popen: subprocess.Popen | None = None
        self._dir: str | None = None
        self.socket_path = ""

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, startup_timeout_s: float, call_timeout_s: float) -> Channel:
        """Spawn the driver and return a connected channel.

        Raises:
            HalError: DEVICE_UNAVAILABLE if the process exits or never listens in time.
        """
        self.spawn()
        return self.wait_listening(startup_timeout_s, call_timeout_s)

    def spawn(self) -> None:
        """Start the process without waiting for it to listen (no-op once spawned)."""
        if self.popen is not None:
            return
        self._dir = tempfile.mkdtemp(prefix="nnscope-drv-")
        self.socket_path = os.path.join(self._dir, "driver.sock")
        env = {**DRIVER_DEFAULTS, **os.environ, **_trace.session_env()}
        command = [sys.executable, "-m", "nnscope.runtime.drivers", self.name, "--socket", self.socket_path,
                   "--parent-pid", str(os.getpid())]
        self.popen = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)

    def wait_listening(self, startup_timeout_s: float, call_timeout_s: float) -> Channel:
        """Poll ``connect`` until the spawned process listens.

        Raises:
            HalError: DEVICE_UNAVAILABLE if the process exits or never listens in time.
        """
        give_up = time.monotonic() + startup_timeout_s
        delay = 0.005
        while True:
            try:
                return self.connect(call_timeout_s)
            except OSError:
                pass
            if self.popen.poll() is not None:
                raise HalError(ErrorStatus.DEVICE_UNAVAILABLE, f"driver process {self.name} exited "
                               f"with code {self.popen.returncode} during start-up")
            if time.monotonic() > give_up:
                self.stop(0.0)
                raise HalError(ErrorStatus.DEVICE_UNAVAILABLE,
                               f"driver process {self.name} did not listen within {startup_timeout_s}s")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def connect(self, call_timeout_s: float) -> Channel:
        return Channel.connect(self.socket_path, call_timeout_s)

    def kill(self) -> None:
        if self.alive():
            self.popen.kill()
            self.popen.wait(5.0)

    def stop(self, grace_s: float = 2.0) -> None:
        """Wait up to ``grace_s`` for a clean exit, then terminate, then kill; remove the socket."""
        if self.popen is not None and self.popen.poll() is None:
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.popen.terminate()
                try:
                    self.popen.wait(2.0)
                except subprocess.TimeoutExpired:
                    self.kill()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
