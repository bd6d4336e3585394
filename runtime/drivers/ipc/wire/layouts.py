"""Fixed fields of the socket messages that both sides pack and unpack: one definition each, so
the runtime's encoder and the driver's decoder cannot drift apart. Variable parts (models,
requests, results) are in ``codec`` and ``execution_codec``; cache arguments in ``cache_args``.

Example:
    >>> PREPARE.unpack(PREPARE.pack(1, 2, -1))
    (1, 2, -1)
"""
from __future__ import annotations

import struct

#: ``PREPARE_MODEL``: preference u8, priority u8, deadline i64 (-1: none).
PREPARE = struct.Struct("<BBq")
#: ``ALLOCATE``: one role of a memory: prepared model (index in the call's list), operand index,
#: frequency.
BUFFER_ROLE = struct.Struct("<IId")
#: ``BUFFER_COPY_TO`` / ``BUFFER_COPY_FROM``: token, then the shared memory's offset and size.
BUFFER_REGION = struct.Struct("<IQQ")
#: ``BURST_MEMORIES``: one slot's pool: slot, offset, size (its fd rides along).
BURST_MEMORY = struct.Struct("<IQQ")
#: ``EXECUTE_FENCED``: wait-for fence count u32, timeout after the fences i64 (-1: none); an
#: execute payload follows.
FENCED_LAUNCH = struct.Struct("<Iq")
#: ``EXECUTE_FENCED_MEMO``: wait-for fence count u32, timeout after the fences i64 (-1: none), how
#: long the driver may watch the fences before it sleeps (microseconds, 0: never); an
#: ``EXECUTE_SYNC_MEMO`` repeat (``execution_codec.MEMO_HEAD`` + inline pool bytes) follows.
FENCED_MEMO = struct.Struct("<IqI")
#: ``FENCED_INFO`` reply body after its status: execution status u32, then time on device and
#: in driver, launched and fenced (u64 each; ``UINT64_MAX``: not measured).
FENCED_INFO = struct.Struct("<I4Q")
