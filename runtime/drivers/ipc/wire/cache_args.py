"""Compilation-cache arguments on the wire (the runtime's side of caching is ``client.cache``,
the driver's ``service.cache``).

``PREPARE_MODEL`` carries ``n_model u32 | n_data u32 | [token 32s when a count is not 0]``
after its fixed fields, and the cache fds before the model's fds; ``PREPARE_MODEL_FROM_CACHE``
(type 24) is ``deadline i64 | n_model u32 | n_data u32 | priority u8 | token blob`` with the
cache fds only (HAL 1.3's call has no priority; ours carries it, so that the driver's scheduler
ranks a model prepared from cache as one prepared from scratch).

Example:
    >>> w = Writer(); prepare_args(w, (1, 0), bytes(32))
    >>> model_fds, data_fds, token, rest = read_prepare_args(Reader(w.getvalue()), [7, 8])
    >>> model_fds, data_fds, len(token), rest
    ([7], [], 32, [8])
"""
from __future__ import annotations

import struct

from nnscope.runtime.drivers.ipc.wire.codec import CodecError, Reader, Writer, enum_value
from nnscope.runtime.hal.types import Priority

TOKEN_SIZE = 32
#: NNAPI ``Constant::MAX_NUMBER_OF_CACHE_FILES``.
MAX_NUMBER_OF_CACHE_FILES = 32
_COUNTS = struct.Struct("<II")
_TOKEN = struct.Struct("<32s")
_FROM_CACHE = struct.Struct("<qIIB")


def prepare_args(w: Writer, counts: tuple[int, int], token: bytes | None) -> None:
    """The cache part of a ``PREPARE_MODEL`` payload: the two counts, then the token only when
    there are files (without caching: 8 zero bytes, as the empty directory and token the
    message carried before caching existed)."""
    w.parts.append(_COUNTS.pack(*counts))
    if counts != (0, 0):
        w.parts.append(token)


def read_prepare_args(r: Reader, fds: list):
    """Driver side: ``(model_cache_fds, data_cache_fds, token, the remaining fds)``."""
    n_model, n_data = r.take(_COUNTS)
    token = r.take(_TOKEN)[0] if n_model or n_data else b""
    return _split(n_model, n_data, token, fds)


def _split(n_model: int, n_data: int, token: bytes, fds: list):
    count = n_model + n_data
    if count > 2 * MAX_NUMBER_OF_CACHE_FILES or count > len(fds):
        raise CodecError(f"{count} cache files announced, {len(fds)} fds sent")
    if count and len(token) != TOKEN_SIZE:
        raise CodecError(f"cache token of {len(token)} bytes, expected {TOKEN_SIZE}")
    return list(fds[:n_model]), list(fds[n_model:count]), token, list(fds[count:])


def from_cache_args(deadline_ns: int | None, counts: tuple[int, int], priority, token: bytes) -> bytes:
    """The ``PREPARE_MODEL_FROM_CACHE`` payload (its fds are the cache files, model's first)."""
    w = Writer()
    w.blob(token)
    return _FROM_CACHE.pack(-1 if deadline_ns is None else deadline_ns, *counts, int(priority)) + w.getvalue()


def read_from_cache_args(r: Reader, fds: list):
    """Driver side of ``PREPARE_MODEL_FROM_CACHE``: ``(deadline or None, model fds, data fds,
    token, priority)``."""
    deadline, n_model, n_data, priority = r.take(_FROM_CACHE)
    model_fds, data_fds, token, rest = _split(n_model, n_data, r.blob(), fds)
    r.end()
    if rest or not model_fds and not data_fds:
        raise CodecError(f"prepareModelFromCache needs exactly its {n_model + n_data} cache fds")
    return None if deadline < 0 else deadline, model_fds, data_fds, token, enum_value(Priority, priority)
