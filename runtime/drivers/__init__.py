"""Devices: the one ``Device`` / ``PreparedModel`` interface and everything behind it.

* ``base``: the interface (HAL 1.3 ``IDevice`` / ``IPreparedModel``); the runtime sees nothing else.
* ``cpu``: ``nnapi-reference``, the in-process CPU device over ``runtime.ops.executor``.
* ``sample``: AOSP's sample drivers (``sample-all``, ``sample-float-fast``, ...) as configs of
  advertised capabilities and supported operations over the same executor.
* ``registry``: driver names, ``NNSCOPE_DRIVERS`` selection, one ``RemoteDevice`` per driver.
* ``ipc``: each sample driver runs in its own process (``python -m nnscope.runtime.drivers NAME
  --socket PATH``) and the runtime talks to it over a Unix socket and shared memory.

Dependencies: ``runtime.hal``, ``runtime.ops``, ``tracing``, ``vlog``, ``timing``.

Example:
    >>> from nnscope.runtime.drivers.cpu import CpuDevice
    >>> from nnscope.runtime.drivers.registry import create_driver
    >>> CpuDevice().name, create_driver("sample-float-fast").name
    ('nnapi-reference', 'sample-float-fast')
"""
