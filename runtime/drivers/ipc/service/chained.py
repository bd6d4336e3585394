"""Driver side of ``EXECUTE_CHAINED``: one memoized step of a partitioned execution that waits,
in shared memory, for the step before it (the protocol is in ``wire.chain``).

The request is checked before anything waits: a memo of this connection for this prepared model,
an untimed repeat with known shapes and no deadline, both words inside its first pool (the step
memory, mapped shared memory) and aligned, a wait of at most ``wire.chain.MAX_WAIT_NS``. The driver must
be serving this connection alone (no other connection, burst or fenced run), because the serve
loop itself waits: it watches the word without sleeping for :data:`SPIN_NS` (yielding the CPU to
anything else runnable), then in naps that double up to :data:`MAX_NAP_S`, never longer than the
request's wait, and not once the client has hung up or another client connects (whom the loop
must serve). A refused request gets an error reply; once its words are known, its own word says
REPLIED first, so the steps after it end too.

Example (``DriverService`` routes ``EXECUTE_CHAINED`` here)::

    payload = chained(executions, connection, message, start)   # bytes, or PARKED when done
"""
from __future__ import annotations

import os
import select
import time

from nnscope.runtime.drivers.ipc.service.execute import OK_COMPACT, PARKED, ExecuteServer
from nnscope.runtime.drivers.ipc.wire import chain
from nnscope.runtime.drivers.ipc.wire.codec import CodecError
from nnscope.runtime.drivers.ipc.wire.execution_codec import _MEMO_HEAD, KNOWS_SHAPES
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus

#: How long the loop watches the word without sleeping (ns).
SPIN_NS = 5_000_000
#: How long before its usual wait a step wakes up to watch the word (ns): a sleeping process
#: takes up to about this long to run again.
WAKE_NS = 1_000_000
#: Longest nap between two looks at the word after the spin (s).
MAX_NAP_S = 0.002
_HEAD_SIZE = chain.HEAD.size
_MEMO_SIZE = _MEMO_HEAD.size


def chained(executions: ExecuteServer, connection, message, start: int):
    """Run one chained step: PARKED (no reply) when it ran and nothing needs saying, else the
    reply payload (the last step's answer, or an error)."""
    view = message.payload
    if message.fds or len(view) < _HEAD_SIZE + _MEMO_SIZE:
        raise CodecError("malformed chained execute")
    wait_at, done_at, run, wait_ns, flags = chain.HEAD.unpack_from(view)
    model_id, memo_id, measure, deadline = _MEMO_HEAD.unpack_from(view, _HEAD_SIZE)
    memo = connection.state.memos.get(memo_id)
    if memo is None or memo.model_id != model_id:
        raise CodecError(f"chained execute: no memo {memo_id} of prepared model {model_id}")
    if len(view) != _HEAD_SIZE + _MEMO_SIZE + memo.inline_size:
        raise CodecError(f"chained execute carries {len(view) - _HEAD_SIZE - _MEMO_SIZE} inline bytes, "
                         f"its request has {memo.inline_size}")
    region = _region(memo, wait_at, done_at)
    try:
        _check(executions, memo, run, wait_ns, flags, measure, deadline)
        if wait_at >= 0 and not _await(region, wait_at, run, wait_ns, _watch(executions, connection), memo):
            raise HalError(ErrorStatus.GENERAL_FAILURE, "chained execute: the step before did not "
                           "finish")
        memo.refill(view, _HEAD_SIZE + _MEMO_SIZE)
        payload = executions.repeat_here(connection, model_id, memo, start)
    except BaseException:
        chain.write(region, done_at, chain.word(run, chain.REPLIED))
        raise
    # quiet: a success with every output in shared memory (output bytes must travel in a reply)
    quiet = not flags & chain.ALWAYS_REPLY and payload == OK_COMPACT
    chain.write(region, done_at, chain.word(run, chain.DONE if quiet else chain.REPLIED))
    return PARKED if quiet else payload


def _check(executions: ExecuteServer, memo, run: int, wait_ns: int, flags: int, measure: int,
           deadline: int) -> None:
    """CodecError for a request this path cannot take; HalError while other work could wait."""
    if flags & ~chain.ALWAYS_REPLY or not 0 < wait_ns <= chain.MAX_WAIT_NS or not 0 < run < chain.MAX_RUN \
            or measure != KNOWS_SHAPES or deadline != -1 or memo.shapes is None:
        raise CodecError("chained execute: bad flags, wait, run, timing or deadline (or a memo "
                         "without a first answer)")
    if not executions.alone() or executions.scheduler.busy():
        raise HalError(ErrorStatus.GENERAL_FAILURE, "chained execute: the driver is not serving "
                       "this client alone")


def _region(memo, wait_at: int, done_at: int):
    """The memo's first pool as bytes when both words fit in it (CodecError otherwise)."""
    pools = memo.request.pools
    if not pools or isinstance(pools[0], (bytes, bytearray)):
        raise CodecError("chained execute: the first pool is not shared memory")
    region = memoryview(pools[0]).cast("B")
    size = region.nbytes
    for offset in (done_at, *((wait_at,) if wait_at != -1 else ())):
        if offset < 0 or offset % chain.WORD_SIZE or offset + chain.WORD_SIZE > size:
            raise CodecError(f"chained execute: word at {offset} is outside the {size}-byte region "
                             "or unaligned")
    if wait_at == done_at:
        raise CodecError("chained execute: a step cannot wait for its own word")
    return region


def _watch(executions: ExecuteServer, connection):
    """A poll object that fires when the client hangs up or another client connects."""
    watch = select.poll()
    watch.register(connection.channel.sock, select.POLLHUP)
    loop = executions.service.loop
    if loop is not None:
        watch.register(loop.listener, select.POLLIN)
    return watch


def _await(region, offset: int, run: int, wait_ns: int, watch, memo) -> bool:
    """True once the step before is DONE; False when it REPLIED, ``wait_ns`` passed, or
    ``watch`` fired (the client hung up, or another wants serving). A wait that usually lasts
    longer than :data:`WAKE_NS` (``memo.waited_ns``, learnt from waits that ended DONE while
    watched) sleeps first, in naps of a millisecond that look at the word and at ``watch``, then
the rest at once."""
    now = time.monotonic_ns
    read, state_of = chain.read, chain.state_of
    start = now()
    end = start + wait_ns
    sleep_end = min(end, start + memo.waited_ns - WAKE_NS)
    slept = False
    while not state_of(read(region, offset), run) and (left := sleep_end - now()) > 0:
        slept = True
        if left < 1_000_000:  # the last of the sleep, precisely
            time.sleep(left / 1e9)
        elif watch.poll(1):
            return False
    spin_end = min(end, now() + SPIN_NS)
    nap = 50e-6
    while True:
        state = state_of(read(region, offset), run)
        if state:
            if state == chain.DONE and not slept:  # watched as it ended
                memo.waited_ns += (now() - start - memo.waited_ns) // 4
            elif state == chain.DONE:  # maybe ended while this slept: at most this long
                memo.waited_ns = min(memo.waited_ns, now() - start)
            return state == chain.DONE
        slept = False
        if now() < spin_end:
            os.sched_yield()
            continue
        left = end - now()
        if left <= 0 or watch.poll(0):
            return False
        time.sleep(min(nap, left / 1e9))
        nap = min(nap * 2, MAX_NAP_S)
