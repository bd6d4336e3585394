"""HAL 1.3 over real IPC: the runtime talks to driver processes through a Unix socket.

Modules: ``protocol`` (framing), ``transport`` (one record + fds per message), ``codec`` and
``execution_codec`` (explicit binary encodings, no pickle), ``shm`` (memfd pools), ``client`` /
``prepared`` (runtime-side proxies), ``service`` (the driver process loop), ``bench`` (raw round
trip of the transport).

Example::

    from runtime.drivers.ipc import RemoteDevice
    device = RemoteDevice("sample-all")        # process starts on first call
    caps = device.capabilities()
    device.shutdown()
"""
from runtime.drivers.ipc.client.device import DEFAULT_TIMEOUT_S, RemoteDevice
from runtime.drivers.ipc.client.prepared import ExecutionCallback, RemotePreparedModel
from runtime.drivers.ipc.wire.shm import SharedPool

__all__ = ["RemoteDevice", "RemotePreparedModel", "ExecutionCallback", "SharedPool", "DEFAULT_TIMEOUT_S"]
