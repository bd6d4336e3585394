"""NNAPI operations as numpy kernels: the reference definition of what each operation computes.

Each family module (``elementwise``, ``convolution``, ``pooling``, ... listed in
``registry.FAMILIES``) registers one validate/execute record per operation type, as AOSP's
``OperationResolver`` does; :func:`registry.load_all` imports them all. ``executor.CpuExecutor``
runs a model's main subgraph with those kernels: the ``nnapi-reference`` CPU device and every
sample driver execute through it, so other devices are tested against these kernels.
``_common`` holds the shared fused-activation, quantisation and fixed-point helpers.

Dependencies: ``runtime.hal``, ``tracing`` and ``vlog`` only.

Example:
    >>> from nnscope.runtime.hal.types import OperationType
    >>> from nnscope.runtime.ops import registry
    >>> registry.load_all()
    >>> registry.get(OperationType.CONV_2D).family
    'convolution'
"""
