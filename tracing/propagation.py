"""Trace context of a recorded span: what a request carries to another process or thread.

The binary form follows W3C ``traceparent`` (version 0): ``version u8 | trace-id 16 bytes |
parent-id 8 bytes | flags u8``, 26 bytes. The parent-id names a recorded span without any
registry: it is made from the span's process id, thread id and begin timestamp, which the
exporter computes again for every span it reads (:func:`span_id`). The trace-id is the id of
the recording process (random, drawn once per process): the trace a span ends up in is decided
at export, by its root. Text form (trace files): ``00-<32 hex>-<16 hex>-01``.

:func:`unpack` and :func:`parse_text` accept nothing else: a wrong size, version, flag bit or an
all-zero id raises ``ValueError``.

Example:
    >>> data = pack(b"\\x01" * 16, span_id(10, 11, 12345))
    >>> len(data), unpack(data).flags
    (26, 1)
    >>> parse_text(text(data)) == unpack(data)
    True
"""
from __future__ import annotations

import hashlib
import os
import struct
from typing import NamedTuple

VERSION = 0
#: Size of the binary context on the wire.
SIZE = 26
SAMPLED = 0x01
_FORMAT = struct.Struct("<B16s8sB")
_KEY = struct.Struct("<II")
_U64 = struct.Struct("<Q")
_ODD = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)
_trace_id: bytes | None = None


class TraceContext(NamedTuple):
    """A decoded context: the trace and the parent span (raw bytes) and the flags."""

    trace_id: bytes
    span_id: bytes
    flags: int


def thread_key(pid: int, tid: int) -> int:
    """The 64-bit key of a thread that its span ids are made from (:func:`span_id`)."""
    return int.from_bytes(hashlib.blake2b(_KEY.pack(pid & 0xFFFFFFFF, tid & 0xFFFFFFFF),
                                          digest_size=8).digest(), "little")


def span_id(pid: int, tid: int, start_ns: int, key: int | None = None) -> bytes:
    """The 8-byte id of the span that thread ``tid`` of ``pid`` began at ``start_ns``:
    its thread's key XOR ``start_ns`` times an odd constant (a bijection on 64 bits, so two
    spans of one thread never share an id). ``key``: :func:`thread_key`, if known."""
    if key is None:
        key = thread_key(pid, tid)
    value = (key ^ (start_ns * _ODD)) & _MASK
    return _U64.pack(value or 1)


def process_trace_id() -> bytes:
    """This process's trace-id (drawn on first use, again after a fork)."""
    global _trace_id
    if _trace_id is None:
        _trace_id = os.urandom(16)
    return _trace_id


def pack(trace_id: bytes, parent_id: bytes, flags: int = SAMPLED) -> bytes:
    """The 26-byte binary context."""
    return _FORMAT.pack(VERSION, trace_id, parent_id, flags)


def unpack(data) -> TraceContext:
    """Decode and check a binary context.

    Raises:
        ValueError: wrong size, unknown version or flag bits, an all-zero trace or span id.
    """
    if len(data) != SIZE:
        raise ValueError(f"trace context of {len(data)} bytes (expected {SIZE})")
    version, trace_id, parent_id, flags = _FORMAT.unpack(data)
    if version != VERSION:
        raise ValueError(f"trace context version {version} (speaks {VERSION})")
    if flags & ~SAMPLED:
        raise ValueError(f"trace context flags 0x{flags:02x}")
    if trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        raise ValueError("trace context with an all-zero id")
    return TraceContext(trace_id, parent_id, flags)


def text(data: bytes) -> str:
    """The W3C text form of a binary context (checked when it was received)."""
    digits = data.hex()
    return f"{digits[:2]}-{digits[2:34]}-{digits[34:50]}-{digits[50:]}"


def parse_text(value: str) -> TraceContext:
    """Decode the text form.

    Raises:
        ValueError: anything but ``00-<32 hex>-<16 hex>-<2 hex>`` with valid ids and flags.
    """
    parts = value.split("-") if isinstance(value, str) and len(value) == 55 else ()
    if len(parts) != 4 or [len(p) for p in parts] != [2, 32, 16, 2]:
        raise ValueError(f"bad trace context {value!r}")
    digits = "".join(parts)
    if digits.strip("0123456789abcdef"):
        raise ValueError(f"bad trace context {value!r}")
    return unpack(bytes.fromhex(digits))


def innermost_begin(events: list, limit: int = 4096) -> int | None:
    """The begin timestamp of the innermost open span in a recorder buffer (flat: a begin is
    ``tag, detail, ts``, an end ``ts``, a note a tuple), read from the end; None when every
    span is closed or the begin lies more than ``limit`` items back (or was drained)."""
    depth = 0
    index = len(events) - 1
    stop = max(index - limit, 0)
    while index >= stop:
        item = events[index]
        if type(item) is tuple:
            index -= 1
        elif index >= 2 and type(events[index - 1]) is str:  # a begin's timestamp
            if depth == 0:
                return item
            depth -= 1
            index -= 3
        else:  # an end
            depth += 1
            index -= 1
    return None


def _after_fork_in_child() -> None:
    global _trace_id
    _trace_id = None


os.register_at_fork(after_in_child=_after_fork_in_child)
