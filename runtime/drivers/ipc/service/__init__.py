"""Service side of the driver IPC: runs in the driver's process (``python -m nnscope.runtime.drivers NAME``).

``driver_service`` serves one ``Device`` over the socket, ``_serve`` is its event loop and
``_guard`` its limits per client; ``execute``, ``burst``, ``fenced``,
``cache`` and ``buffers`` answer those requests; ``scheduler`` orders queued executions.
Imports ``wire``, never ``client``.
"""
