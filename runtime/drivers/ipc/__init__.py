"""HAL 1.3 over real IPC: the runtime talks to driver processes through a Unix socket.

The folders are the process boundary:

- ``client/`` runs in the application's process: ``RemoteDevice`` (``client.device``) and
  ``RemotePreparedModel`` (``client.prepared``) proxy a driver, with its bursts, fenced
  executions, IBuffers and cache files; ``_process`` and ``_restart`` spawn the driver.
- ``service/`` runs in the driver's process (``python -m nnscope.runtime.drivers NAME``): the serve
  loop, the execute, burst, fenced, cache and buffer servers, the scheduler and the per-client
  limits.
- ``wire/`` is what both share: framing (``protocol``), ``transport``, the codecs, reply
  status and message layouts, shared memory (``shm``), FMQ rings, sync fences.

``client`` and ``service`` import ``wire`` and never each other
(``tests/runtime/drivers/test_ipc_boundary.py``); ``bench`` (raw round trip of the transport)
starts both. The names below are imported on first use (PEP 562), so importing ``service`` or
``wire`` does not load the client through this package.

Example::

    from nnscope.runtime.drivers.ipc import RemoteDevice
    device = RemoteDevice("sample-all")        # process starts on first call
    caps = device.capabilities()
    device.shutdown()
"""
from __future__ import annotations

__all__ = ["RemoteDevice", "RemotePreparedModel", "ExecutionCallback", "SharedPool", "DEFAULT_TIMEOUT_S"]


def __getattr__(name: str):
    """The client's public names, imported when first asked for (PEP 562)."""
    if name in ("RemoteDevice", "DEFAULT_TIMEOUT_S"):
        from nnscope.runtime.drivers.ipc.client import device as module  # noqa: PLC0415
    elif name in ("RemotePreparedModel", "ExecutionCallback"):
        from nnscope.runtime.drivers.ipc.client import prepared as module  # noqa: PLC0415
    elif name == "SharedPool":
        from nnscope.runtime.hal import shared_memory as module  # noqa: PLC0415
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)
