"""NNTRACE for Python: NNAPI-named spans from every layer and process, in one trace.

Scope factories work as context managers and as decorators; recording is off (and
nearly free) until a :class:`TraceSession` starts or ``NNSCOPE_TRACE`` /
``NNSCOPE_TRACE_DIR`` is set. Child processes join with :func:`session_env` and
:func:`flush`.

Example:
    >>> import tracing
    >>> from tracing import Phase
    >>> with tracing.TraceSession() as session:
    ...     with tracing.application(Phase.OVERALL, "mobilenet"):
    ...         with tracing.runtime(Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...             pass
    >>> [span.name for span in session.collect().spans()]
    ['[NN_LR_PE]ANeuralNetworksExecution_compute', '[NN_LA_PO]mobilenet']
"""
from tracing.naming import Layer, Phase
from tracing.session import (NNSCOPE_TRACE, NNSCOPE_TRACE_DIR, TraceConfig, TraceSession, flush,
                             override_environment, session_env)
from tracing.tracer import (Scope, application, cpu, driver, enabled, full, hidl, ipc, runtime,
                            set_process_name, subtract, switch, utility)

__all__ = [
    "Layer", "Phase", "Scope", "TraceSession", "TraceConfig", "NNSCOPE_TRACE", "NNSCOPE_TRACE_DIR",
    "application", "runtime", "ipc", "driver", "cpu", "utility", "full", "switch", "subtract",
    "hidl", "enabled", "session_env", "flush", "set_process_name", "override_environment",
]
