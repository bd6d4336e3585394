"""Wire format of the driver IPC: one framed record per message on a ``SOCK_SEQPACKET`` socket.

Every record starts with a 16-byte little-endian header::

    magic u32 ('NNIP') | version u8 | flags u8 | type u16 | request id u32 | payload length u32

followed by the payload (struct-packed fields, see ``codec``). ``SOCK_SEQPACKET`` keeps record
boundaries and delivers the ``SCM_RIGHTS`` file descriptors with the record they were sent with,
so a message and its shared-memory fds always arrive together. A payload larger than
:data:`MAX_INLINE_PAYLOAD` travels as a memfd (flag :data:`FLAG_BULK`): the record then holds only
the header and the first attached fd holds the payload bytes.

A request may carry the trace context of the runtime span that sent it (flag
:data:`FLAG_TRACE`): the 26 bytes of ``tracing.propagation`` (W3C ``traceparent`` in binary)
follow the header, before the payload, and are not counted in its length (but in the
record's :data:`MAX_INLINE_PAYLOAD`). A record whose
context is short or malformed is a ``ProtocolError`` (INVALID_ARGUMENT).

Replies carry ``type | REPLY``; the asynchronous execution callback is :attr:`MsgType.NOTIFY`
with the request id of the ``EXECUTE`` it answers.

Example:
    >>> head = pack_header(MsgType.GET_CAPABILITIES, 7, 0)
    >>> unpack_header(head)
    Header(flags=0, type=1, request_id=7, length=0)
"""
from __future__ import annotations

import enum
import struct
from typing import NamedTuple

MAGIC = 0x5049_4E4E  # b"NNIP" little endian
VERSION = 1
HEADER = struct.Struct("<IBBHII")
HEADER_SIZE = HEADER.size
#: Largest payload sent inside the record itself; larger ones go through a memfd.
MAX_INLINE_PAYLOAD = 32 * 1024
#: Largest payload accepted at all (bulk included).
MAX_PAYLOAD = 64 * 1024 * 1024
#: Most file descriptors one record may carry.
MAX_FDS = 64
#: Tensor regions up to this size travel inside messages; larger ones through shared memory.
INLINE_DATA_LIMIT = 4096

FLAG_BULK = 0x01
FLAG_TRACE = 0x02
#: Size of the trace context a FLAG_TRACE record carries after its header.
TRACE_CONTEXT_SIZE = 26
REPLY = 0x8000


class MsgType(enum.IntEnum):
    """Request types (``IDevice`` / ``IPreparedModel`` methods) and the callback."""

    GET_CAPABILITIES = 1
    GET_SUPPORTED_OPERATIONS = 2
    GET_TYPE = 3
    GET_VERSION_STRING = 4
    GET_SUPPORTED_EXTENSIONS = 5
    GET_NUMBER_OF_CACHE_FILES = 6
    PREPARE_MODEL = 7
    EXECUTE_SYNC = 8
    EXECUTE = 9
    RELEASE_MODEL = 10
    FREE_POOLS = 11
    PING = 12
    SHUTDOWN = 13
    SET_TRACE_DIR = 14  # join (or, with an empty path, leave) the runtime's trace session
    EXECUTE_SYNC_MEMO = 15  # executeSynchronously repeating a memoized request (execution_codec)
    CONFIGURE_BURST = 16  # IPreparedModel.configureExecutionBurst: two FMQs (service.burst)
    BURST_MEMORIES = 17  # the runtime's answer to the driver's IBurstCallback.getMemories
    BURST_FREE_MEMORY = 18  # IBurstContext.freeMemory(slot)
    BURST_RELEASE = 19  # the runtime's burst is gone: stop its listener thread
    EXECUTE_FENCED = 20  # executeFenced: wait fences in, a sync fence out (service.fenced)
    FENCED_INFO = 21  # IFencedExecutionCallback.getExecutionInfo
    EXECUTE_FENCED_MEMO = 23  # executeFenced of a memoized request (service.fenced)
    PREPARE_MODEL_FROM_CACHE = 24  # prepareModelFromCache_1_3: cache fds + token (wire.cache_args)
    ALLOCATE = 26  # IDevice.allocate: a driver-side IBuffer for a memory domain (buffers)
    BUFFER_COPY_TO = 27  # IBuffer.copyTo(shared memory)
    BUFFER_COPY_FROM = 28  # IBuffer.copyFrom(shared memory, dimensions)
    BUFFER_FREE = 29  # the runtime's device memory is freed: drop the IBuffer
    NOTIFY = 0x100


#: HIDL interface and method name of each request type, for the trace marks.
HIDL_NAMES = {
    MsgType.GET_CAPABILITIES: ("IDevice", "getCapabilities"),
    MsgType.GET_SUPPORTED_OPERATIONS: ("IDevice", "getSupportedOperations"),
    MsgType.GET_TYPE: ("IDevice", "getType"),
    MsgType.GET_VERSION_STRING: ("IDevice", "getVersionString"),
    MsgType.GET_SUPPORTED_EXTENSIONS: ("IDevice", "getSupportedExtensions"),
    MsgType.GET_NUMBER_OF_CACHE_FILES: ("IDevice", "getNumberOfCacheFilesNeeded"),
    MsgType.PREPARE_MODEL: ("IDevice", "prepareModel"),
    MsgType.EXECUTE_SYNC: ("IPreparedModel", "executeSynchronously"),
    MsgType.EXECUTE_SYNC_MEMO: ("IPreparedModel", "executeSynchronously"),
    MsgType.EXECUTE: ("IPreparedModel", "execute"),
    MsgType.RELEASE_MODEL: ("IPreparedModel", "release"),
    MsgType.FREE_POOLS: ("IPreparedModel", "freePools"),
    MsgType.PING: ("IDevice", "ping"),
    MsgType.SHUTDOWN: ("IDevice", "shutdown"),
    MsgType.SET_TRACE_DIR: ("IDevice", "setTraceDirectory"),
    MsgType.CONFIGURE_BURST: ("IPreparedModel", "configureExecutionBurst"),
    MsgType.BURST_MEMORIES: ("IBurstCallback", "getMemories"),
    MsgType.BURST_FREE_MEMORY: ("IBurstContext", "freeMemory"),
    MsgType.BURST_RELEASE: ("IBurstContext", "release"),
    MsgType.EXECUTE_FENCED: ("IPreparedModel", "executeFenced"),
    MsgType.EXECUTE_FENCED_MEMO: ("IPreparedModel", "executeFenced"),
    MsgType.FENCED_INFO: ("IFencedExecutionCallback", "getExecutionInfo"),
    MsgType.PREPARE_MODEL_FROM_CACHE: ("IDevice", "prepareModelFromCache_1_3"),
    MsgType.ALLOCATE: ("IDevice", "allocate"),
    MsgType.BUFFER_COPY_TO: ("IBuffer", "copyTo"),
    MsgType.BUFFER_COPY_FROM: ("IBuffer", "copyFrom"),
    MsgType.BUFFER_FREE: ("IBuffer", "release"),
}


class ProtocolError(ValueError):
    """A record that does not follow the framing; ``request_id`` and ``msg_type`` (what the
    answer is a reply to) are 0 when unknown."""

    def __init__(self, message: str, request_id: int = 0, msg_type: int = 0):
        super().__init__(message)
        self.request_id = request_id
        self.msg_type = msg_type


class Header(NamedTuple):
    flags: int
    type: int
    request_id: int
    length: int


def pack_header(msg_type: int, request_id: int, length: int, flags: int = 0) -> bytes:
    return HEADER.pack(MAGIC, VERSION, flags, msg_type, request_id, length)


def unpack_header(data) -> Header:
    """Parse and check a header.

    Raises:
        ProtocolError: short record, bad magic/version, unknown flags or an oversized length.
    """
    if len(data) < HEADER_SIZE:
        raise ProtocolError(f"record of {len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, flags, msg_type, request_id, length = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ProtocolError(f"bad magic 0x{magic:08x}")
    if version != VERSION:
        raise ProtocolError(f"unsupported protocol version {version} (speaks {VERSION})", request_id, msg_type)
    if flags & ~(FLAG_BULK | FLAG_TRACE):
        raise ProtocolError(f"unknown flags 0x{flags:02x}", request_id, msg_type)
    if length > MAX_PAYLOAD:
        raise ProtocolError(f"payload length {length} exceeds {MAX_PAYLOAD}", request_id, msg_type)
    return Header(flags, msg_type, request_id, length)
