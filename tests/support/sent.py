"""Know when a thread's request is on its way to a driver: a hook on the client's sends.

Tests that order requests across processes (a driver stopped with SIGSTOP while requests queue
up in its sockets) need to know that a thread's execute has been written before they go on;
waiting a while instead depends on the machine's load. ``SentHook`` wraps ``Channel.send`` and
``FmqChannel.write`` (a burst frame) for the test's duration and sets the event of the thread
that sent an execute message or wrote a frame.

Example::

    hook = SentHook(monkeypatch)
    thread, sent = hook.start(execution.compute)
    assert sent.wait(30)          # its EXECUTE is in the driver's socket now
"""
from __future__ import annotations

import threading

from nnscope.runtime.drivers.ipc.wire.fmq import FmqChannel
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.drivers.ipc.wire.transport import Channel

EXECUTES = frozenset({MsgType.EXECUTE_SYNC, MsgType.EXECUTE_SYNC_MEMO, MsgType.EXECUTE, MsgType.EXECUTE_FENCED,
                      MsgType.EXECUTE_FENCED_MEMO})


class SentHook:
    """Per-thread "sent" events, set after the thread's first execute message or burst frame."""

    def __init__(self, monkeypatch):
        self._sent: dict[int, threading.Event] = {}
        original_send, original_write = Channel.send, FmqChannel.write
        sent = self._sent

        def send(channel, msg_type, *args, **kwargs):
            original_send(channel, msg_type, *args, **kwargs)
            if msg_type in EXECUTES and threading.get_ident() in sent:
                sent[threading.get_ident()].set()

        def write(ring, *args, **kwargs):
            written = original_write(ring, *args, **kwargs)
            if threading.get_ident() in sent:
                sent[threading.get_ident()].set()
            return written

        monkeypatch.setattr(Channel, "send", send)
        monkeypatch.setattr(FmqChannel, "write", write)

    def start(self, call, name: str = "sender") -> tuple[threading.Thread, threading.Event]:
        """Run ``call`` on a new thread; returns it and its "sent" event (also set when
        ``call`` ends without sending, so that nobody waits in vain)."""
        registered, sent = threading.Event(), threading.Event()

        def body():
            self._sent[threading.get_ident()] = sent
            registered.set()
            try:
                call()
            finally:
                sent.set()

        thread = threading.Thread(target=body, name=name, daemon=True)
        thread.start()
        registered.wait()
        return thread, sent
