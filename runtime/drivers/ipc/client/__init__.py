"""Client side of the driver IPC: runs in the application's process (the runtime).

``RemoteDevice`` (``device``) and ``RemotePreparedModel`` (``prepared``) proxy a driver process;
``burst``, ``fenced``, ``buffer`` and ``cache`` are their bursts, fenced executions, IBuffers and
compilation-cache files; ``_process`` and ``_restart`` spawn the driver and start it again after
a death; ``encoder`` and ``lanes`` send execute requests. Imports ``wire``, never ``service``.
"""
