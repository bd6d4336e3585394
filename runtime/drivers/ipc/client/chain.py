"""Runtime side of chained plan steps (``EXECUTE_CHAINED``; the protocol is in ``wire.chain``).

:func:`run_chain` sends every step of one execution at once, each to its driver, and sleeps
until the last step answers: the drivers hand over to each other through words in the step
memory, so a boundary costs neither the application a wake-up nor the next driver one. A step
that succeeds says so in its word only; a step that fails, or is skipped after a failure,
answers with an error. When no step ends for a driver's ``timeout_s``, that driver is declared
dead (killed, restarted on next use) and its steps' words are written REPLIED by the application,
so that the chain ends at once. The caller then runs the steps one by one, without the dead
drivers (see ``runtime._steps``).

Example::

    outcome = run_chain(links, memory.region.view, words_at, run)
    if outcome is None or outcome.results is None:
        ...  # run the steps one by one (outcome.dead: drivers that stopped answering)
"""
from __future__ import annotations

import logging
import math
import os
import platform
import select
import time
from typing import NamedTuple

from nnscope import vlog
from nnscope.runtime.drivers.ipc.client._reply import check_status
from nnscope.runtime.drivers.ipc.wire import chain
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.device_types import Request
from nnscope.runtime.hal.errors import HalError

#: Seconds between two looks at the words while the application waits for the last step.
CHECK_S = 0.1
_FD_SETSIZE = 1024  # select() takes no fd above
_X86 = frozenset({"x86_64", "AMD64", "i386", "i686"})
_CHAINED = int(MsgType.EXECUTE_CHAINED)
_log = logging.getLogger("nn.ExecutionPlan")


class Link(NamedTuple):
    """One step of a chain: the prepared model that runs it and its (memoized) request."""

    prepared: object  # RemotePreparedModel
    request: Request


class Outcome(NamedTuple):
    """``results``: one ExecutionResult per step when every step succeeded, else None;
    ``dead``: the devices declared dead on the way."""

    results: list | None
    dead: frozenset
    elapsed_s: float = 0.0


def worthwhile(window_s: float) -> bool:
    """Chaining pays when the steps have a polling window (``window_s``; none with LOW_POWER, one
    CPU or ``NNSCOPE_STEP_POLL_US=0``): a driver watches its word while the one before runs. Only
    on the x86 family, whose store order the words rely on."""
    return window_s > 0 and platform.machine() in _X86


def run_chain(links: list[Link], region, words_at: int, run: int, expected_s: float = 0.0,
              window_s: float = 0.0) -> Outcome | None:
    """Run ``links`` chained through the words at ``words_at`` of ``region`` (8 bytes a step) for
    run number ``run``; None when the chain cannot start (nothing was sent). The application
    sleeps until ``window_s`` before the ``expected_s`` a chain takes, then watches for the
    answer during that window."""
    steps = _Chain(links, region, words_at, run)
    locked = []
    try:
        for device in steps.devices:
            if not device.lock.acquire(blocking=False):  # another thread's call is in flight
                return None
            locked.append(device)
        return steps.run(expected_s, window_s)
    finally:
        for device in locked:
            device.lock.release()


class _Chain:
    """The state of one chained execution in the application."""

    def __init__(self, links: list[Link], region, words_at: int, run: int):
        self.links, self.region, self.words_at, self.run_number = links, region, words_at, run
        self.devices = list(dict.fromkeys(link.prepared.device for link in links))
        self.sent: dict = {}  # (device, request id) -> step index
        self.answers: dict = {}  # step index -> reply payload bytes
        self.silent: set = set()  # steps of dead devices: no answer will come
        self.dead: set = set()

    def run(self, expected_s: float, window_s: float) -> Outcome | None:
        """Send the first step, then the others (while it runs), then wait; None when the
        first cannot be sent as a repeat. Anything unexpected on the way buries the drivers
        that may still wait, so that none is left watching a word."""
        start = time.perf_counter()
        try:
            if not self._send_all():
                return None
            self._nap(start + expected_s - window_s, window_s)
            self._wait()
        except BaseException as error:  # an interrupt too: no driver may go on waiting or writing
            _log.warning("chained execution ended by %s: %s", type(error).__name__, error)
            for device in {device for device, _ in self.sent} - self.dead:
                try:
                    self._bury(device, f"chained execution ended by {type(error).__name__}")
                except Exception as failure:  # noqa: BLE001 - bury the others all the same
                    _log.warning("driver %s: %s", device.name, failure)
            if not isinstance(error, Exception):
                raise
        return Outcome(self._results(), frozenset(self.dead), time.perf_counter() - start)

    def _send_all(self) -> bool:
        links = self.links
        # the application, not a waiting driver, tells who stopped answering: a driver may wait
        # through every step before its own
        longest = max(device.timeout_s for device in self.devices)
        wait_ns = min(int(1e9 * longest * (len(links) + 1)), chain.MAX_WAIT_NS)
        for index, link in enumerate(links):
            flags = chain.ALWAYS_REPLY if index == len(links) - 1 else 0
            wait_at = self.words_at + chain.WORD_SIZE * (index - 1) if index else -1
            payload = link.prepared.chained_payload(link.request, chain.HEAD.pack(
                wait_at, self.words_at + chain.WORD_SIZE * index, self.run_number, wait_ns, flags))
            if payload is None and not index:
                return False
            self._send(index, link.prepared.device, payload)
        return True

    def _send(self, index: int, device, payload: bytes | None) -> None:
        """Send step ``index``; a step that cannot go (no repeat, or its driver is gone) ends here."""
        if payload is None or device in self.dead:
            self.silent.add(index)
            self._write(index)
            return
        try:
            self.sent[device, device.send_request(_CHAINED, payload)] = index
        except HalError:
            self._bury(device)

    def _nap(self, until: float, window_s: float) -> None:
        """Sleep until ``until`` (an answer ends the nap), then watch the connections for
        ``window_s``."""
        nap = until - time.perf_counter()
        if nap > 0 and self._readable(nap):
            return
        end = time.perf_counter() + window_s
        while time.perf_counter() < end and self._live() and not self._readable(0.0):
            os.sched_yield()  # a driver still running goes first

    def _live(self) -> bool:
        return any(device not in self.dead and device.channel is not None for device, _ in self.sent)

    def _readable(self, timeout_s: float) -> list:
        """The live devices with a record (or a closed connection) within ``timeout_s``:
        ``select`` (to the microsecond) while every fd fits its set, else ``poll``."""
        by_fd = {device.channel.sock.fileno(): device for device, _ in self.sent
                 if device not in self.dead and device.channel is not None}
        if not by_fd:
            return []
        if max(by_fd) < _FD_SETSIZE:
            return [by_fd[fd] for fd in select.select(list(by_fd), (), (), timeout_s)[0]]
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        return [by_fd[fd] for fd, _ in poller.poll(math.ceil(timeout_s * 1000))]

    def _state(self, index: int) -> int:
        return chain.state_of(chain.read(self.region, self.words_at + chain.WORD_SIZE * index),
                              self.run_number)

    def _ended(self) -> int:
        """How many leading steps have ended."""
        for index in range(len(self.links)):
            if not self._state(index) and index not in self.silent:
                return index
        return len(self.links)

    def _due(self) -> int | None:
        """The step the chain waits for: the first that has not ended, else the first whose
        answer has not come; None when nothing is due."""
        ended = self._ended()
        if ended < len(self.links):
            return ended
        return next((index for index in range(len(self.links)) if self._state(index) == chain.REPLIED
                     and index not in self.answers and index not in self.silent), None)

    def _wait(self) -> None:
        """Receive the answers until every step ended and answered as it said; a driver whose
        step stays due for its ``timeout_s`` is buried."""
        progress, since = None, time.monotonic()
        while (due := self._due()) is not None:
            if not self._live():
                return
            for device in self._readable(CHECK_S):
                self._receive(device)
            if due != progress:
                progress, since = due, time.monotonic()
                continue
            stuck = self.links[due].prepared.device
            if time.monotonic() - since > stuck.timeout_s:
                self._bury(stuck, f"no chained step ended within {stuck.timeout_s:.3g}s")

    def _receive(self, device) -> None:
        try:
            message = device.receive(device.timeout_s)
        except HalError:
            self._bury(device)
            return
        if message is None:  # a NOTIFY of another call, kept for it
            return
        index = self.sent.get((device, message.request_id))
        if index is None:
            return
        self.answers[index] = bytes(message.payload)
        if not self._state(index):  # refused before it knew its word: end the steps after it
            self._write(index)

    def _bury(self, device, why: str | None = None) -> None:
        """``device`` stopped answering: killed (it must not write a word or an output any
        more) and declared dead (``why``; None: its call already did, with its reason); its
        pending steps are ended here."""
        self.dead.add(device)
        if why is None:
            device.process.kill()
        else:
            try:
                device.declare_dead(why)
            except HalError as error:
                vlog.log("execution", "ExecutionBuilder", "%s: %s", error.status.name, error)
        for index, link in enumerate(self.links):
            if link.prepared.device is device and index not in self.answers:
                self.silent.add(index)
                if not self._state(index):
                    self._write(index)

    def _write(self, index: int) -> None:
        chain.write(self.region, self.words_at + chain.WORD_SIZE * index,
                    chain.word(self.run_number, chain.REPLIED))

    def _results(self) -> list | None:
        last = len(self.links) - 1
        if self.dead or any(self._state(index) != chain.DONE for index in range(last)) \
                or last not in self.answers:
            self._log_end()
            return None
        link = self.links[last]
        result = link.prepared.finish_chained(self.answers[last], link.request)
        if result is None or result.status:
            return None
        return [link.prepared.memo_result() for link in self.links[:last]] + [result]

    def _log_end(self) -> None:
        for index in sorted(self.answers):
            try:
                check_status(self.answers[index], "chained execute")
            except Exception as error:  # noqa: BLE001 - HalError, or CodecError for a short answer
                vlog.log("execution", "ExecutionPlan", "chained step %d on %s ended: %s", index,
                         self.links[index].prepared.device.name, error)
