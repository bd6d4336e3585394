"""The long-lived workers behind ``start_compute`` (runtime._workers, runtime.event.Event.start)."""
from __future__ import annotations

import threading

import pytest

from nnscope.runtime import _workers
from nnscope.runtime.api import NnError, ResultCode
from nnscope.runtime.event import Event


def test_executions_one_after_another_share_one_worker():
    idents = []
    for _ in range(6):
        Event.start(lambda: idents.append((threading.get_ident(), threading.current_thread().name))).wait()
    assert len(set(idents)) == 1
    assert idents[0][1] == "nn-execution" and idents[0][0] != threading.get_ident()


def test_executions_in_flight_together_get_a_worker_each():
    release, second_ran, seen = threading.Event(), threading.Event(), []
    first = Event.start(lambda: (seen.append(threading.get_ident()), release.wait()), name="nn-test-held")
    second = Event.start(lambda: (seen.append(threading.get_ident()), second_ran.set()), name="nn-test-held")
    assert second_ran.wait(30)  # ran while the first still holds its worker
    second.wait()
    assert not first.done
    release.set()
    first.wait()
    assert len(set(seen)) == 2


def test_an_error_reaches_wait_and_the_worker_is_kept():
    def fail():
        raise NnError(ResultCode.OP_FAILED, "boom")
    with pytest.raises(NnError) as caught:
        Event.start(fail, name="nn-test-error").wait()
    assert caught.value.code == ResultCode.OP_FAILED
    assert _workers.idle_count("nn-test-error") == 1  # back in the idle list before wait() returned
    idents = []
    Event.start(lambda: idents.append(threading.get_ident()), name="nn-test-error").wait()
    assert _workers.idle_count("nn-test-error") == 1


def test_idle_workers_are_bounded():
    release, started = threading.Event(), threading.Semaphore(0)
    count = _workers.MAX_IDLE + 3
    events = [Event.start(lambda: (started.release(), release.wait()), name="nn-test-many")
              for _ in range(count)]
    for _ in range(count):
        assert started.acquire(timeout=30)
    release.set()
    for event in events:
        event.wait()
    assert _workers.idle_count("nn-test-many") == _workers.MAX_IDLE


def test_an_idle_worker_holds_nothing_of_its_last_execution():
    import gc
    import weakref

    class Payload:
        pass
    payload = Payload()
    alive = weakref.ref(payload)
    event = Event.start(lambda held=payload: held, name="nn-test-release")
    event.wait()
    del payload, event
    gc.collect()
    assert alive() is None
