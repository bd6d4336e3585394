"""NNTRACE for Python: NNAPI-named spans from every layer and process, in one trace.

Scope factories work as context managers and as decorators; recording is off (and
nearly free) until a :class:`TraceSession` starts or ``NNSCOPE_TRACE`` /
``NNSCOPE_TRACE_DIR`` is set. Child processes join with :func:`session_env` and
:func:`flush`.

Example:
    >>> from nnscope import tracing
    >>> from nnscope.tracing import Phase
    >>> with tracing.TraceSession() as session:
    ...     with tracing.application(Phase.OVERALL, "mobilenet"):
    ...         with tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...             pass
    >>> [span.name for span in session.collect().spans()]
    ['[NN_LR_PE]ANeuralNetworksExecution_compute', '[NN_LA_PO]mobilenet']
"""
from nnscope.tracing.naming import Layer, Phase

#: Loaded with the recorder on first use, so that importing only the naming contract
#: (``tracing.naming``, as parse_systrace does) loads none of it.
_SESSION_NAMES = ("NNSCOPE_TRACE", "NNSCOPE_TRACE_DIR", "TraceConfig", "TraceSession", "flush",
                  "on_gather", "override_environment", "session_env")
_TRACER_NAMES = ("Scope", "adopt", "application", "context", "cpu", "driver", "enabled", "fail",
                 "full", "hidl", "ipc", "named", "runtime", "set_process_name", "subtract", "switch",
                 "utility")

__all__ = ["Layer", "Phase", *_SESSION_NAMES, *_TRACER_NAMES]


def __getattr__(name: str):
    if name not in _SESSION_NAMES and name not in _TRACER_NAMES:
        raise AttributeError(f"module 'tracing' has no attribute {name!r}")
    from nnscope.tracing import session, tracer  # noqa: PLC0415 - the lazy load itself

    for module, names in ((session, _SESSION_NAMES), (tracer, _TRACER_NAMES)):
        globals().update((item, getattr(module, item)) for item in names)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
