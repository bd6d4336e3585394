"""The NNTRACE recorder: scope factories, hot recording and the on/off switch.

Off by default. When off, a factory costs one call, one global check and returns a
shared no-op scope. When on, a factory extends the calling thread's buffer (a plain,
flat list reached through one ``threading.local`` attribute) with ``tag, detail, ts_ns``
and returns a shared scope whose ``__exit__`` appends the bare ``ts_ns`` of the end.
The buffer thus holds no per-event object (no tuple for the garbage collector to track):
a begin is three items, the first not an int, an end is one int. Each event is written
by one C call (``list.extend`` of a tuple, ``list.append``), atomic under the GIL, so a
buffer copied or drained by another thread always ends on an event boundary.
Like AOSP's ``NNTRACE_*`` macros the span begins when the factory is called, so
use the result at once in a ``with`` statement or as a decorator. Names are
joined (``tag + detail``) only when the trace is collected. Timestamps come from
``time.monotonic_ns`` (CLOCK_MONOTONIC, shared by all processes of a machine).

Across threads and processes: :func:`context` gives the W3C-style context of the innermost
open span (sent with a request), :func:`adopt` makes a thread's top-level spans its children
(a note in the buffer, a tuple), :func:`fail` marks a span's call failed.

Hot loops (the CPU executor) may skip the factories: :func:`hot_recorder` gives
``(append, extend, now)`` for the calling thread, to append the same events directly.
The buffers themselves, and reading them back as named tracks, live in
:mod:`tracing._buffer`; when recording is on, and collecting, is :mod:`tracing.session`'s
job: this module loads it and lets it throw the switch.

Example:
    >>> from tracing.naming import Phase
    >>> with runtime(Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...     pass
    >>> @runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_finish")
    ... def finish():
    ...     return 0
"""
from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
from typing import Any, Callable

from tracing import _buffer, _decorate, session
from tracing import propagation as _context
from tracing._buffer import _clear, _name_events, _snapshot  # noqa: F401 (tests, benchmarks)
from tracing._buffer import process_name, set_process_name  # noqa: F401 (tracing's API)
from tracing.naming import APPLICATION_PHASES, MARKERS, Layer, Phase, format_name, hidl_mark

_log = logging.getLogger(__name__)
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
_LA, _LR, _LI = _PLAIN[Layer.APPLICATION], _PLAIN[Layer.RUNTIME], _PLAIN[Layer.IPC]
_LD, _LC, _LU = _PLAIN[Layer.DRIVER], _PLAIN[Layer.CPU], _PLAIN[Layer.UTILITY]


def _register_thread() -> list:
    buffer = _buffer.new_buffer()
    _tls.buffer = buffer
    _tls.events = buffer.events
    _tls.append = buffer.events.append
    _tls.extend = buffer.events.extend
    _tls.recorder = (buffer.events.append, buffer.events.extend, _now)
    return buffer.events


class Scope:
    """What a scope factory returns: a context manager and a decorator.

    ``with`` binds nothing useful (``as`` gets ``()``). Used as a decorator, each
    call of the decorated function is one span, whether or not tracing was on
    when the decorator was applied.
    """

    __slots__ = ()
    __enter__ = staticmethod(tuple)  # C-level no-ops: the disabled path runs no Python code
    __exit__ = staticmethod("".format)

    def __call__(self, func: Callable) -> Callable:
        return _wrap_from_source(func, sys._getframe(1))


class _OpenScope(Scope):
    """The scope returned while tracing is on: its exit records the end."""

    __slots__ = ()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            _tls.append(_now())
        except AttributeError:
            _register_thread().append(_now())

    def __call__(self, func: Callable) -> Callable:
        events = getattr(_tls, "buffer", None) and _tls.buffer.events
        # The begin that the factory has just recorded: tag, detail, ts (an end, an int, is
        # always preceded by an int: a begin's ts or another end).
        if not events or len(events) < 3 or type(events[-2]) is int:
            return _wrap_from_source(func, sys._getframe(1))
        tag, detail, _ = events[-3:]
        del events[-3:]
        return _wrap(func, tag, detail)


_NULL = Scope()
_OPEN = _OpenScope()


def _begin(tags: _Tags, phase: Phase, detail: str) -> Scope:
    event = (tags[phase], detail, _now())
    try:
        _tls.extend(event)
    except AttributeError:  # the thread's first event (the hot factories inline the rest)
        _register_thread().extend(event)
    return _OPEN


def _layer_tags(table: dict, layer: Layer) -> _Tags:
    try:
        return table[layer]
    except (KeyError, TypeError):
        raise ValueError(f"unknown layer {layer!r}; valid: "
                         f"{', '.join(item.value for item in Layer)}") from None


def application(phase: Phase, detail: str = "") -> Scope:
    """Scope ``[NN_LA_<phase>]detail``: user code, benchmark runs (PO, PWU, PBM allowed)."""
    if not _on:
        return _NULL
    try:
        _tls.extend((_LA[phase], detail, _now()))
    except AttributeError:
        return _begin(_LA, phase, detail)
    return _OPEN


def runtime(phase: Phase, detail: str = "") -> Scope:
    """Scope ``[NN_LR_<phase>]detail``: the runtime API and its executor.

    Raises:
        ValueError: (tracing on) for an application-only phase.
    """
    if not _on:
        return _NULL
    try:
        _tls.extend((_LR[phase], detail, _now()))
    except AttributeError:
        return _begin(_LR, phase, detail)
    return _OPEN


def ipc(phase: Phase, detail: str = "") -> Scope:
    """Scope ``[NN_LI_<phase>]detail``: runtime-side code talking to a driver process."""
    if not _on:
        return _NULL
    try:
        _tls.extend((_LI[phase], detail, _now()))
    except AttributeError:
        return _begin(_LI, phase, detail)
    return _OPEN


def driver(phase: Phase, detail: str = "") -> Scope:
    """Scope ``[NN_LD_<phase>]detail``: code running in a driver process."""
    if not _on:
        return _NULL
    try:
        _tls.extend((_LD[phase], detail, _now()))
    except AttributeError:
        return _begin(_LD, phase, detail)
    return _OPEN


def cpu(phase: Phase, detail: str = "") -> Scope:
    """Scope ``[NN_LC_<phase>]detail``: the reference CPU executor."""
    if not _on:
        return _NULL
    try:
        _tls.extend((_LC[phase], detail, _now()))
    except AttributeError:
        return _begin(_LC, phase, detail)
    return _OPEN


def utility(phase: Phase, detail: str = "") -> Scope:
    """Scope ``[NN_LU_<phase>]detail``: helpers shared by layers."""
    if not _on:
        return _NULL
    try:
        _tls.extend((_LU[phase], detail, _now()))
    except AttributeError:
        return _begin(_LU, phase, detail)
    return _OPEN


def full(layer: Layer, phase: Phase, detail: str = "") -> Scope:
    """Scope ``[NN_<layer>_<phase>]detail`` for any layer."""
    if not _on:
        return _NULL
    return _begin(_layer_tags(_PLAIN, layer), phase, detail)


def subtract(layer: Layer, phase: Phase, detail: str = "") -> Scope:
    """Scope ``[SUB][NN_<layer>_<phase>]detail``: time that belongs to another layer."""
    if not _on:
        return _NULL
    return _begin(_layer_tags(_SUB, layer), phase, detail)


def hidl(interface: str, method: str, side: str) -> Scope:
    """Scope ``HIDL::<interface>::<method>::<side>``, the IPC transport mark.

    Raises:
        ValueError: (tracing on) when ``side`` is not ``client`` or ``server``.
    """
    if not _on:
        return _NULL
    event = (hidl_mark(interface, method, side), "", _now())
    try:
        _tls.extend(event)
    except AttributeError:
        _register_thread().extend(event)
    return _OPEN


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
    start = _context.innermost_begin(buffer.events)
    if start is None:  # no span open here: the span this thread works for, if it adopted one
        return getattr(_tls, "adopted", None)
    try:
        key = _tls.span_key
    except AttributeError:
        key = _tls.span_key = _context.thread_key(buffer.pid, buffer.tid)
    return _context.pack(_context.process_trace_id(),
                         _context.span_id(buffer.pid, buffer.tid, start, key))


def adopt(parent: bytes | None) -> Scope:
    """Scope: the top-level spans this thread begins inside it are children of ``parent``
    (a context from :func:`context`, received with a request). No-op for None or when off."""
    if not _on or parent is None:
        return _NULL
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


class _Adopted(Scope):
    __slots__ = ()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        _tls.adopted = None
        try:
            _tls.append(("adopt", _now(), None))
        except AttributeError:
            pass


_ADOPTED = _Adopted()


def enabled() -> bool:
    """True while spans are recorded (a :class:`~tracing.session.TraceSession` or the env)."""
    return _on


# Factory -> (args -> (tag, detail)): lets a decorator learn its span when tracing is off.
_KEYS: dict[Callable, Callable[..., tuple[str, str]]] = {
    application: lambda phase, detail="": (_LA[phase], detail),
    runtime: lambda phase, detail="": (_LR[phase], detail),
    ipc: lambda phase, detail="": (_LI[phase], detail),
    driver: lambda phase, detail="": (_LD[phase], detail),
    cpu: lambda phase, detail="": (_LC[phase], detail),
    utility: lambda phase, detail="": (_LU[phase], detail),
    full: lambda layer, phase, detail="": (_layer_tags(_PLAIN, layer)[phase], detail),
    subtract: lambda layer, phase, detail="": (_layer_tags(_SUB, layer)[phase], detail),
    hidl: lambda interface, method, side: (hidl_mark(interface, method, side), ""),
}


def _wrap_from_source(func: Callable, frame: Any) -> Callable:
    key = _decorate.resolve(frame, _KEYS)
    if key is None:
        _log.warning("cannot read the tracing decorator of %s; it will not be traced",
                     getattr(func, "__qualname__", func))
        return func
    return _wrap(func, *key)


def _wrap(func: Callable, tag: str, detail: str) -> Callable:
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
