"""Hostile owners of an FMQ's wake-up eventfds on a real driver process (a burst's rings): the
driver's copy shares the owner's open file description, so whatever flags the owner sets on it
later, the burst listener's signals and reads must not block (the promises of
``tests.support.driver_attack`` are checked after each attack)."""
import os
import struct

from nnscope.runtime.drivers.ipc.wire.fmq_datum import encode_echo
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.sync_fence import FAILED
from tests.support.driver_attack import AttackedDriver, exchange, prepare_add
from tests.support.driver_attack_rings import burst_id, configure_burst, ring


def test_a_wakeup_made_blocking_and_full_after_the_burst_began_stalls_no_signal():
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            sock = attacker.connect()
            model_id = prepare_add(sock)
            requests, results = ring(attacker), ring(attacker)
            ident = burst_id(configure_burst(sock, [*requests.fds, *results.fds], model_id))
            os.set_blocking(results.fds[1], True)  # after the driver made it non-blocking
            os.eventfd_write(results.fds[1], FAILED)  # full: a blocking write of 1 waits for good
            requests.write(encode_echo(1))
            assert results.read(timeout=5.0) == encode_echo(1)  # a hang guard, not a speed
            assert exchange(sock, MsgType.BURST_RELEASE, struct.pack("<I", ident)).status == 0
