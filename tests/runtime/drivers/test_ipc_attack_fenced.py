"""Attacks on a real driver process through executeFenced (issue 24, bugs 6 and 7): runs that
wait on fences nobody signals must neither lock other clients out nor hold uncounted fds."""
import pytest

from nnscope.runtime.drivers.ipc.service.fenced import MAX_RUNNING_PER_CLIENT, MAX_WAIT_FENCES
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.types import ErrorStatus
from tests.support.driver_attack import AttackedDriver, exchange, prepare_add
from tests.support.driver_attack_rings import (fenced_from_other_process, fenced_payload,
                                               unsignalled_fences)

EXHAUSTED = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT


def _flood(attacker, connections: int, waits: int) -> list:
    """Waiting fenced runs on ``connections`` connections of this process until refused."""
    statuses = []
    for _ in range(connections):
        sock = attacker.connect()
        model_id = prepare_add(sock)
        while True:
            reply = exchange(sock, MsgType.EXECUTE_FENCED, fenced_payload(model_id, waits),
                             unsignalled_fences(attacker, waits))
            statuses.append(reply.status)
            if reply.status != 0:
                break
    return statuses


# ---------------------------------------------------------------- bug 6: a fair share per client
def test_waiting_fenced_runs_of_one_client_leave_room_for_others():
    with AttackedDriver() as driver:
        with driver.attack() as attacker:
            statuses = _flood(attacker, 10, 1)
            assert set(statuses) == {0, EXHAUSTED}, statuses
            assert statuses.count(0) <= MAX_RUNNING_PER_CLIENT
            assert fenced_from_other_process(driver.socket_path) == 0  # another client runs


# ---------------------------------------------------------------- bug 7: fences and pools charged
@pytest.mark.parametrize("waits", [MAX_WAIT_FENCES, 1])
def test_waiting_fenced_runs_are_charged_to_the_fd_budget(waits):
    with AttackedDriver(max_fds=400) as driver:
        with driver.attack() as attacker:
            statuses = _flood(attacker, 8, waits)
            assert set(statuses) == {0, EXHAUSTED}, statuses
            assert fenced_from_other_process(driver.socket_path) == 0
