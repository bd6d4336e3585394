"""The NNTRACE recorder: the scope factories, hot recording and the on/off switch.

Each factory (one per layer, plus :func:`full`, :func:`subtract` and :func:`hidl`) returns a
:class:`Scope` that keeps its ``(tag, detail)``, as OpenTelemetry's context managers keep
their arguments: a context manager, and a decorator that makes every call one span (a
scope holds no state of its own, so a factory hands the same one out again for the same
phase and detail). Off by default: a scope made while off enters and exits without running Python code, and records
nothing. A scope made while on extends the calling thread's buffer (a plain, flat list
reached through one ``threading.local`` attribute) with ``tag, detail, ts_ns`` on enter
and appends the bare ``ts_ns`` of the end on exit. The buffer thus holds no per-event
object (no tuple for the garbage collector to track): a begin is three items, the first
not an int, an end is one int. Each event is written by one C call (``list.extend`` of a
tuple, ``list.append``), atomic under the GIL, so a buffer copied or drained by another
thread always ends on an event boundary. Names are joined (``tag + detail``) only when the
trace is collected. Timestamps come from ``time.monotonic_ns`` (CLOCK_MONOTONIC, shared by
all processes of a machine).

Across threads and processes: :func:`context` gives the W3C-style context of the innermost
open span (sent with a request), :func:`adopt` makes a thread's top-level spans its children
(a note in the buffer, a tuple), :func:`fail` marks a span's call failed.

Hot loops (the CPU executor) may skip the factories: :func:`hot_recorder` gives
``(append, extend, now)`` for the calling thread, to append the same events directly.
The buffers themselves, and reading them back as named tracks, live in
:mod:`tracing._buffer`; when recording is on, and collecting, is :mod:`tracing.session`'s
job: this module loads it and lets it throw the switch.

Example:
    >>> from nnscope.tracing.naming import Phase
    >>> with runtime(Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...     pass
    >>> @runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_finish")
    ... def finish():
    ...     return 0
"""
from __future__ import annotations

import contextlib
import functools
import operator
import os
import threading
import time
from typing import Any, Callable

from nnscope.tracing import _buffer, session
from nnscope.tracing import propagation as _context
from nnscope.tracing._buffer import process_name, set_process_name  # noqa: F401 (tracing's API)
from nnscope.tracing.naming import APPLICATION_PHASES, MARKERS, Layer, Phase, format_name, hidl_mark

_now = time.monotonic_ns
_on = False
_tls = threading.local()


class _Tags(dict):
    """Phase -> tag string of one (layer, marker); a miss raises the contract's ValueError."""

    __slots__ = ("layer", "marker")

    def __init__(self, layer: Layer, marker: str) -> None:
        super().__init__((phase, format_name(layer, phase, "", marker)) for phase in Phase
                         if layer is Layer.APPLICATION or phase not in APPLICATION_PHASES)
        self.layer, self.marker = layer, marker

    def __missing__(self, phase: Any) -> str:
        format_name(self.layer, Phase(phase), "", self.marker)  # raises ValueError
        raise ValueError(f"invalid phase {phase!r} for layer {self.layer.value}")


_PLAIN = {layer: _Tags(layer, "") for layer in Layer}
_SW = {layer: _Tags(layer, MARKERS[0]) for layer in Layer}
_SUB = {layer: _Tags(layer, MARKERS[1]) for layer in Layer}
#: Scopes a factory keeps per phase (:func:`hidl`: in all), to hand out again (a scope holds no state of its own,
#: and details are mostly literals; past this many per phase, each call makes a new one).
_KEPT_PER_PHASE = 256


def _register_thread() -> list:
    buffer = _buffer.new_buffer()
    _tls.buffer = buffer
    _tls.events = buffer.events
    _tls.append = buffer.events.append
    _tls.extend = buffer.events.extend
    _tls.recorder = (buffer.events.append, buffer.events.extend, _now)
    return buffer.events


class Scope(tuple):
    """One span, ``tag + detail``: what every factory returns, a context manager and a decorator.

    Like OpenTelemetry's ``start_as_current_span`` it keeps its arguments, ``(tag, detail)``,
    so as a decorator each call of the function is one span, whether or not tracing was on
    when the decorator was applied. Made while tracing is off, ``with`` runs no Python code
    (``as`` binds ``()``); made while it is on, it is a :class:`_LiveScope`.
    """

    __slots__ = ()
    tag = property(operator.itemgetter(0),
                   doc="``[NN_<layer>_<phase>]`` (with its marker), or a HIDL mark.")
    detail = property(operator.itemgetter(1), doc="The free text after the tag.")
    __enter__ = staticmethod(tuple)  # C-level no-ops: the disabled path runs no Python code
    __exit__ = staticmethod("".format)

    def __call__(self, func: Callable) -> Callable:
        return _wrap(func, self[0], self[1])


class _LiveScope(Scope):
    """The scope made while tracing is on: its enter records the begin, its exit the end."""

    __slots__ = ()

    def __enter__(self) -> None:
        event = (self[0], self[1], _now())
        try:
            _tls.extend(event)
        except AttributeError:  # the thread's first event
            _register_thread().extend(event)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            _tls.append(_now())
        except AttributeError:
            _register_thread().append(_now())


def _scope(tag: str, detail: str) -> Scope:
    """A new scope, live while tracing is on."""
    return _LiveScope((tag, detail)) if _on else Scope((tag, detail))


def _keep(kept: dict, key: Any, scope: Scope) -> Scope:
    """``scope``, kept as ``kept[key]`` for reuse while ``kept`` is not full."""
    if len(kept) < _KEPT_PER_PHASE:
        kept[key] = scope
    return scope


def _layer_tags(table: dict, layer: Layer) -> _Tags:
    try:
        return table[layer]
    except (KeyError, TypeError):
        raise ValueError(f"unknown layer {layer!r}; valid: "
                         f"{', '.join(item.value for item in Layer)}") from None


def _layer_factory(layer: Layer, summary: str) -> Callable[..., Scope]:
    """The scope factory of one layer: ``factory(phase, detail="")``."""
    tags = _PLAIN[layer]
    kept_off: dict[Phase, dict[str, Scope]] = {phase: {} for phase in tags}
    kept_on: dict[Phase, dict[str, Scope]] = {phase: {} for phase in tags}

    def factory(phase: Phase, detail: str = "") -> Scope:
        on = _on
        try:
            return (kept_on if on else kept_off)[phase][detail]
        except KeyError:
            scope = (_LiveScope if on else Scope)((tags[phase], detail))  # raises for a bad phase
            return _keep((kept_on if on else kept_off)[phase], detail, scope)

    name = layer.name.lower()
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = (f"Scope ``[NN_{layer.value}_<phase>]detail``: {summary}\n\n"
                       "    Raises:\n        ValueError: for a phase the layer may not use.\n    ")
    return factory


application = _layer_factory(Layer.APPLICATION, "user code, benchmark runs (PO, PWU, PBM allowed).")
runtime = _layer_factory(Layer.RUNTIME, "the runtime API and its executor.")
ipc = _layer_factory(Layer.IPC, "runtime-side code talking to a driver process.")
driver = _layer_factory(Layer.DRIVER, "code running in a driver process.")
cpu = _layer_factory(Layer.CPU, "the reference CPU executor.")
utility = _layer_factory(Layer.UTILITY, "helpers shared by layers.")


def full(layer: Layer, phase: Phase, detail: str = "") -> Scope:
    """Scope ``[NN_<layer>_<phase>]detail`` for any layer."""
    return _scope(_layer_tags(_PLAIN, layer)[phase], detail)


def named(name: str) -> Scope:
    """Scope ``name`` with no NNTRACE tag: another library's own span, such as TFLite's
    operator spans (``CONV_2D``, ``TfLiteNnapiDelegate``); it stays out of the NNAPI analysis
    (``parse_systrace`` reads only tagged spans) but shows in every exported trace."""
    return _scope("", name)


def subtract(layer: Layer, phase: Phase, detail: str = "") -> Scope:
    """Scope ``[SUB][NN_<layer>_<phase>]detail``: time that belongs to another layer."""
    return _scope(_layer_tags(_SUB, layer)[phase], detail)


def hidl(interface: str, method: str, side: str) -> Scope:
    """Scope ``HIDL::<interface>::<method>::<side>``, the IPC transport mark.

    Raises:
        ValueError: when ``side`` is not ``client`` or ``server``.
    """
    on = _on
    kept = _HIDL_ON if on else _HIDL_OFF
    key = (interface, method, side)
    try:
        return kept[key]
    except KeyError:
        scope = (_LiveScope if on else Scope)((hidl_mark(interface, method, side), ""))
        return _keep(kept, key, scope)


_HIDL_OFF: dict[tuple[str, str, str], Scope] = {}
_HIDL_ON: dict[tuple[str, str, str], Scope] = {}


def switch(layer: Layer, phase: Phase, detail: str = "") -> None:
    """End the innermost open scope of this thread and begin ``[SW][NN_<l>_<p>]detail``.

    The enclosing ``with`` (or decorated call) ends the new span, exactly as
    AOSP's ``NNTRACE_*_SWITCH``. Call it only inside an open scope.
    """
    if not _on:
        return
    tag = _layer_tags(_SW, layer)[phase]
    now = _now()
    try:
        extend = _tls.extend
    except AttributeError:
        extend = _register_thread().extend
    extend((now, tag, detail, now))


def hot_recorder() -> tuple[Callable[[Any], None], Callable[[Any], None],
                            Callable[[], int]] | None:
    """``(append, extend, now)`` to record from a hot loop of this thread; None when off.

    The events are those the factories record. Begin a span with
    ``extend((tag, detail, now()))`` (one call: a begin must never be split), taking ``tag``
    from :func:`tracing.naming.format_name` with an empty detail (computed once, outside the
    loop) and a str ``detail``; end the innermost open span with ``append(now())``; switch
    with ``t = now(); extend((t, sw_tag, detail, t))``.
    End every begin on the same thread, also when an exception passes (``try``/``finally``).
    Ask again on each run of the hot function: the pair must not outlive the run (another
    thread, a fork, tracing switched off).

    Example:
        >>> rec = hot_recorder()
        >>> if rec is not None:
        ...     append, extend, now = rec
        ...     extend(("[NN_LC_PCO]", "addFloat32", now()))
        ...     append(now())
    """
    if not _on:
        return None
    try:
        return _tls.recorder
    except AttributeError:
        _register_thread()
        return _tls.recorder


def context() -> bytes | None:
    """The binary trace context (:mod:`tracing.propagation`) of this thread's innermost open span,
    to send with a request it makes; with no span open, the context this thread adopted
    (:func:`adopt`); None when off or neither."""
    if not _on:
        return None
    try:
        buffer = _tls.buffer
    except AttributeError:
        return None
    start = buffer.innermost_open()
    if start is None:  # no span open here: the span this thread works for, if it adopted one
        return getattr(_tls, "adopted", None)
    try:
        key = _tls.span_key
    except AttributeError:
        key = _tls.span_key = _context.thread_key(buffer.pid, buffer.tid)
    return _context.pack(_context.process_trace_id(),
                         _context.span_id(buffer.pid, buffer.tid, start, key))


def adopt(parent: bytes | None) -> contextlib.AbstractContextManager:
    """A context: the top-level spans this thread begins inside it are children of ``parent``
    (a context from :func:`context`, received with a request). No-op for None or when off."""
    if not _on or parent is None:
        return _NO_ADOPTION
    note = ("adopt", _now(), parent)
    try:
        _tls.append(note)
    except AttributeError:
        _register_thread().append(note)
    _tls.adopted = parent  # what context() passes on while no span of this thread is open
    return _ADOPTED


def fail(code: int, name: str) -> None:
    """Mark this thread's innermost open span failed with result ``code`` (named ``name``)."""
    if not _on:
        return
    try:
        events = _tls.events
    except AttributeError:
        return
    start = _context.innermost_begin(events)
    if start is not None:
        events.append(("error", start, (int(code), str(name))))


class _Adopted:
    __slots__ = ()

    def __enter__(self) -> None:
        pass

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        _tls.adopted = None
        try:
            _tls.append(("adopt", _now(), None))
        except AttributeError:
            pass


_ADOPTED = _Adopted()
_NO_ADOPTION = contextlib.nullcontext()


def enabled() -> bool:
    """True while spans are recorded (a :class:`~tracing.session.TraceSession` or the env)."""
    return _on


def _wrap(func: Callable, tag: str, detail: str) -> Callable:
    """``func`` with every call one span ``tag + detail`` (while tracing is on)."""
    @functools.wraps(func)
    def traced(*args: Any, **kwargs: Any) -> Any:
        if not _on:
            return func(*args, **kwargs)
        try:
            events = _tls.events
        except AttributeError:
            events = _register_thread()
        events.extend((tag, detail, _now()))
        try:
            return func(*args, **kwargs)
        finally:
            events.append(_now())
    return traced




# ----- the on/off switch, thrown by tracing.session ----------------------------------------

def _set_enabled(flag: bool) -> None:
    global _on
    _on = bool(flag)


def _after_fork_in_child() -> None:
    global _tls
    _tls = threading.local()  # the forking thread's attributes name the parent's buffer


os.register_at_fork(after_in_child=_after_fork_in_child)
# The session module owns when recording is on (sessions, NNSCOPE_TRACE, NNSCOPE_TRACE_DIR, read
# when it loads, which importing this module does): it switches this recorder from now on.
session.attach_recorder(_set_enabled, lambda: _now())
