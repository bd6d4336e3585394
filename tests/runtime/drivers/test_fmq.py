"""The FMQ ring (runtime.drivers.ipc.wire.fmq) within one process and against a real second process,
and the burst datum codec (runtime.drivers.ipc.wire.fmq_datum) against malformed input."""
import os
import random
import struct
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nnscope.runtime.drivers.ipc.wire.codec import CodecError
from nnscope.runtime.drivers.ipc.wire.fmq import (HEADER_SIZE, FmqChannel, FmqCorrupt, FmqError, FmqPeerGone,
                                          FmqTimeout)
from nnscope.runtime.drivers.ipc.wire.fmq_datum import (DATUM_SIZE, BurstRequest, decode_request, decode_result,
                                                encode_request, encode_result)
from nnscope.runtime.hal.shared_memory import SharedPool
from nnscope.runtime.hal.device_types import ExecutionResult, OutputShape, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus
from nnscope.timing import Timing

# The second process: echoes each message of channel A back on channel B until b"quit"; after
# the first message it also reports the CPU seconds it spent blocked in that read.
ECHO = """
import sys, time
from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel
fds = [int(v) for v in sys.argv[1:]]
inbox, outbox = FmqChannel.attach(*fds[:3]), FmqChannel.attach(*fds[3:])
outbox.write(b"ready", timeout=10)
cpu = time.process_time()
first = inbox.read(timeout=10)
outbox.write(repr(time.process_time() - cpu).encode(), timeout=10)
outbox.write(first, timeout=10)
while (message := inbox.read(timeout=10)) != b"quit":
    outbox.write(message, timeout=10)
"""


@pytest.fixture
def echo_peer():
    """(inbox, outbox, first_read_cpu): channels to and from a real echo process."""
    to_peer, from_peer = FmqChannel.create(4096), FmqChannel.create(4096)
    fds = [*to_peer.fds, *from_peer.fds]
    proc = subprocess.Popen([sys.executable, "-c", ECHO, *map(str, fds)], pass_fds=fds)
    try:
        assert from_peer.read(timeout=30) == b"ready"
        yield to_peer, from_peer, proc
    finally:
        proc.kill()
        proc.wait()
        to_peer.close()
        from_peer.close()


def test_messages_round_trip_in_one_process():
    with FmqChannel.create(256) as channel:
        for message in (b"", b"x", bytes(range(200)), b"\0" * 252):
            assert channel.write(message, block=False)
            assert channel.read(block=False) == message


def test_attached_view_sees_the_writes_of_the_creator():
    with FmqChannel.create(64) as writer:
        with FmqChannel.attach(*[os.dup(fd) for fd in writer.fds]) as reader:
            assert reader.capacity == 64
            writer.write(b"camera frame 1")
            writer.write(b"camera frame 2")
            assert reader.read(timeout=1) == b"camera frame 1"
            assert reader.read(timeout=1) == b"camera frame 2"
            assert reader.read(block=False) is None


def test_messages_wrap_around_the_ring_end():
    rng = random.Random(11)
    with FmqChannel.create(32) as channel:
        for _ in range(200):  # 4..28-byte records on a 32-byte ring: every offset, split prefixes
            message = rng.randbytes(rng.randrange(0, 25))
            assert channel.write(message, block=False)
            assert channel.read(block=False) == message
        assert channel._index[8] > 10 * 32  # the write index (u64 at byte 64) went round often


def test_message_ten_times_the_ring_streams_through_it():
    message = random.Random(3).randbytes(640)
    with FmqChannel.create(64) as channel:
        received = []
        reader = threading.Thread(target=lambda: received.append(channel.read(timeout=10)))
        reader.start()
        assert channel.write(message, timeout=10)
        reader.join(10)
        assert received == [message]


def test_non_blocking_read_takes_a_streamed_message_piece_by_piece():
    message = bytes(range(256)) * 3
    with FmqChannel.create(64) as channel:
        writer = threading.Thread(target=channel.write, args=(message,), kwargs={"timeout": 10})
        writer.start()
        deadline, got = time.monotonic() + 10, None
        while got is None and time.monotonic() < deadline:
            got = channel.read(block=False)
        writer.join(10)
        assert got == message


def test_non_blocking_calls_on_empty_and_full_rings():
    with FmqChannel.create(32) as channel:
        assert channel.read(block=False) is None
        assert channel.write(bytes(20), block=False)
        assert channel.write(bytes(20), block=False) is False  # 24 of 32 bytes in use
        with pytest.raises(FmqError):
            channel.write(bytes(40), block=False)  # can never fit whole
        assert channel.read(block=False) == bytes(20)


def test_blocking_read_times_out_asleep_when_nobody_writes():
    with FmqChannel.create(64) as channel:
        cpu, start = time.thread_time(), time.monotonic()
        with pytest.raises(FmqTimeout):
            channel.read(timeout=0.5)
        assert time.monotonic() - start >= 0.45
        # slept in poll(), did not spin: this thread's CPU time (a load only slows a spinner)
        assert time.thread_time() - cpu < 0.1


def test_blocking_write_times_out_when_nobody_reads():
    with FmqChannel.create(32) as channel:
        channel.write(bytes(28))
        cpu = time.thread_time()
        with pytest.raises(FmqTimeout):
            channel.write(b"more", timeout=0.3)
        assert time.thread_time() - cpu < 0.1  # slept in 10 ms poll slices, did not spin
        assert channel.write(b"", block=False) is False  # a clean timeout: still usable
        assert channel.read() == bytes(28)


def test_writer_stalled_mid_stream_breaks_the_channel():
    with FmqChannel.create(32) as channel:
        with pytest.raises(FmqTimeout, match="broken"):
            channel.write(bytes(100), timeout=0.1)
        with pytest.raises(FmqError):
            channel.write(b"x")


def test_wake_ups_are_eventfds():
    with FmqChannel.create(64) as channel:
        kinds = [os.readlink(f"/proc/self/fd/{fd}") for fd in channel.fds]
        assert kinds[0].startswith("/memfd:nnscope-fmq")
        assert kinds[1:] == ["anon_inode:[eventfd]"] * 2


def test_round_trips_with_a_second_process(echo_peer):
    to_peer, from_peer, _ = echo_peer
    rng = random.Random(5)
    to_peer.write(b"first", timeout=10)
    assert float(from_peer.read(timeout=10)) >= 0.0
    assert from_peer.read(timeout=10) == b"first"
    for size in [0, 1, 64, 4000, 4092, 4093, 10 * 4096, *(rng.randrange(9000) for _ in range(50))]:
        message = rng.randbytes(size)
        assert to_peer.write(message, timeout=10)
        assert from_peer.read(timeout=10) == message
    to_peer.write(b"quit", timeout=10)


def test_second_process_sleeps_while_waiting(echo_peer):
    to_peer, from_peer, _ = echo_peer
    time.sleep(0.5)  # the peer is blocked in read() all this time
    to_peer.write(b"wake", timeout=10)
    peer_cpu = float(from_peer.read(timeout=10))
    assert from_peer.read(timeout=10) == b"wake"
    assert peer_cpu < 0.1
    to_peer.write(b"quit", timeout=10)


def test_polling_reads_take_answers_and_sleep_after_the_window(echo_peer):
    to_peer, from_peer, _ = echo_peer
    to_peer.write(b"first", timeout=10)
    from_peer.read(timeout=10)
    assert from_peer.read(timeout=10, poll_s=1e-3) == b"first"
    for size in (0, 64, 3000):
        to_peer.write(bytes(size), timeout=10)
        assert from_peer.read(timeout=10, poll_s=1e-3) == bytes(size)
    cpu = time.thread_time()
    with pytest.raises(FmqTimeout):  # nothing comes: the window passes, then it sleeps
        from_peer.read(timeout=0.5, poll_s=0.01)
    assert time.thread_time() - cpu < 0.15
    to_peer.write(b"quit", timeout=10)


def test_a_watched_fd_wakes_a_blocked_read():
    channel, stop = FmqChannel.create(64), os.eventfd(0, os.EFD_CLOEXEC)
    channel.watch(stop)
    threading.Timer(0.05, os.eventfd_write, (stop, 1)).start()
    with pytest.raises(FmqPeerGone):
        channel.read(timeout=10)
    channel.write(b"still there")  # a message that arrived wins over the watched fd
    assert channel.read(timeout=1) == b"still there"
    channel.close()
    os.close(stop)


def test_dead_peer_gives_a_timeout_not_a_hang(echo_peer):
    to_peer, from_peer, proc = echo_peer
    proc.kill()
    proc.wait()
    to_peer.write(b"anyone?", timeout=1)
    with pytest.raises(FmqTimeout):
        from_peer.read(timeout=0.3)


def test_scribbled_indices_and_lengths_are_corruption_not_out_of_range_reads():
    with FmqChannel.create(64) as channel:
        channel._index[8] = 10_000  # write index far past the read index
        with pytest.raises(FmqCorrupt):
            channel.read(block=False)
    with FmqChannel.create(64, max_message=100) as channel:
        channel._ring[:4] = struct.pack("<I", 0xFFFF_FFF0)
        channel._index[8] = 8
        with pytest.raises(FmqCorrupt, match="max_message"):
            channel.read(block=False)


def test_attach_refuses_what_is_not_an_fmq():
    pool = SharedPool(HEADER_SIZE + 64)  # sealed, right size, no FMQ header
    with pytest.raises(FmqCorrupt):
        FmqChannel.attach(os.dup(pool.fd), os.eventfd(0), os.eventfd(0))
    pool.close()
    unsealed = os.memfd_create("plain")
    os.ftruncate(unsealed, 4096)
    events = os.eventfd(0), os.eventfd(0)
    with pytest.raises(FmqCorrupt, match="sealed"):
        FmqChannel.attach(unsealed, *events)
    for fd in (unsealed, *events):  # attach owns the fds: closed although it refused them
        with pytest.raises(OSError):
            os.fstat(fd)


# -- datum codec -------------------------------------------------------------------------

SAMPLE_REQUEST = BurstRequest(
    inputs=(RequestArgument(False, 0, 0, 16, (1, 4)), RequestArgument(True, 0, 0, 0, ())),
    outputs=(RequestArgument(False, 1, 64, 16, (1, 4)),), slots=(3, 0), measure_timing=True)
SAMPLE_RESULT = ExecutionResult(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE,
                                (OutputShape((2, 3), False), OutputShape((7,), True)), Timing(10, 25))

_dims = st.lists(st.integers(0, 2**32 - 1), max_size=5).map(tuple)


@st.composite
def _requests(draw):
    slots = tuple(draw(st.lists(st.integers(0, 2**31 - 1), max_size=4, unique=True)))

    def argument(draw):
        if not slots or draw(st.booleans()):
            return RequestArgument(True, 0, 0, 0, draw(_dims))
        offset = draw(st.integers(0, 2**31))
        return RequestArgument(False, draw(st.integers(0, len(slots) - 1)), offset,
                               draw(st.integers(0, 2**31 - 1)), draw(_dims))
    inputs = tuple(argument(draw) for _ in range(draw(st.integers(0, 3))))
    outputs = tuple(argument(draw) for _ in range(draw(st.integers(0, 3))))
    return BurstRequest(inputs, outputs, slots, draw(st.booleans()))


_results = st.builds(
    ExecutionResult, st.sampled_from(list(ErrorStatus)),
    st.lists(st.builds(OutputShape, _dims, st.booleans()), max_size=3).map(tuple),
    st.one_of(st.none(), st.integers(0, 2**40).map(lambda t: Timing(t, t + 5))))


@settings(max_examples=200, deadline=None)
@given(_requests())
def test_requests_round_trip(request):
    assert decode_request(encode_request(request)) == request


@settings(max_examples=200, deadline=None)
@given(_results)
def test_results_round_trip(result):
    assert decode_result(encode_result(result)) == result


def _accepts_or_refuses(decode, encode, data) -> None:
    """``data`` either raises CodecError or is canonical: re-encoding gives it back."""
    try:
        value = decode(data)
    except CodecError:
        return
    assert encode(value) == bytes(data)


@pytest.mark.parametrize("decode,encode,valid", [
    (decode_request, encode_request, encode_request(SAMPLE_REQUEST)),
    (decode_result, encode_result, encode_result(SAMPLE_RESULT))])
def test_every_bit_flip_and_truncation_is_refused_or_canonical(decode, encode, valid):
    accepted = 0
    for bit in range(len(valid) * 8):
        flipped = bytearray(valid)
        flipped[bit // 8] ^= 1 << (bit % 8)
        try:
            value = decode(flipped)
        except CodecError:
            continue
        accepted += 1
        assert encode(value) == bytes(flipped)
    assert 0 < accepted < len(valid) * 8 // 2  # value bits flip into other valid datums
    for end in range(len(valid)):
        with pytest.raises(CodecError):
            decode(valid[:end])
    with pytest.raises(CodecError):
        decode(valid + valid[:DATUM_SIZE])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_never_escape_as_another_exception(data):
    _accepts_or_refuses(decode_request, encode_request, data)
    _accepts_or_refuses(decode_result, encode_result, data)


def test_seeded_random_datum_sequences_are_refused_or_canonical():
    rng = random.Random(1234)
    small = (0, 1, 2, 3, 7, 2**31, 2**32 - 1)
    for _ in range(3000):  # plausible tags and small counts reach every check of the walk
        datums = [struct.pack("<BBHIIII", rng.randrange(8), rng.choice((0, 0, 1, 2)),
                              rng.choice((0, 0, 0, 1)), *(rng.choice(small) for _ in range(4)))
                  for _ in range(rng.randrange(1, 12))]
        data = b"".join(datums)
        if rng.random() < 0.5:  # often a packet size that matches
            data = data[:4] + struct.pack("<I", len(datums)) + data[8:]
        _accepts_or_refuses(decode_request, encode_request, data)
        _accepts_or_refuses(decode_result, encode_result, data)


def test_malformed_datums_sent_through_a_real_ring_are_refused(echo_peer):
    to_peer, from_peer, _ = echo_peer
    rng = random.Random(99)
    valid = encode_request(SAMPLE_REQUEST)
    to_peer.write(b"first", timeout=10)
    from_peer.read(timeout=10), from_peer.read(timeout=10)
    refused = 0
    for _ in range(100):
        flipped = bytearray(valid)
        flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        to_peer.write(flipped, timeout=10)
        received = from_peer.read(timeout=10)
        assert received == flipped
        try:
            decode_request(received)
        except CodecError:
            refused += 1
    assert refused > 50
    to_peer.write(b"quit", timeout=10)


@pytest.mark.parametrize("request_", [
    BurstRequest((RequestArgument(False, 0, 0, 4, (1,) * 33),), (), (0,)),   # rank above 32
    BurstRequest((RequestArgument(False, 1, 0, 4, ()),), (), (0,)),          # pool index 1 of 1
    BurstRequest((), (), (-1,)),                                              # negative slot
    BurstRequest((), (), (4, 4)),                                             # slot twice
    BurstRequest((RequestArgument(False, 0, 2**32 - 4, 8, ()),), (), (0,))])  # region past u32
def test_encoder_refuses_what_the_reader_would(request_):
    with pytest.raises(CodecError):
        encode_request(request_)
