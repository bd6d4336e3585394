"""CPU a driver process uses while nothing is asked of it (issue 24: under 1 %).

One real ``sample-all`` driver process, measured side by side in one run over ``--window``
seconds each: with no client; with one idle connection; holding 8 bursts (1 ms polling window)
and 8 fenced runs waiting on fences nobody signals; and after refused burst configurations with
wake-up fds of every wrong kind (``/dev/zero``, a file, pipes). CPU is the process's utime +
stime from ``/proc``.

Usage:
    python benchmarks/driver_idle_cpu.py [--window SECONDS]

Writes ``benchmarks/results/driver_idle_cpu.json`` and prints the same JSON object last (keys
``<case>_cpu_percent``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from nnscope.runtime.drivers.ipc.wire.protocol import MsgType  # noqa: E402
from tests.support.driver_attack import AttackedDriver, exchange, prepare_add  # noqa: E402
from tests.support.driver_attack_rings import (configure_burst, cpu_ticks, fenced_payload,  # noqa: E402
                                               ring_fds, unsignalled_fences)

from _common import write_results  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def _percent(pid: int, window: float) -> float:
    before, start = cpu_ticks(pid), time.monotonic()
    time.sleep(window)
    return round(100.0 * (cpu_ticks(pid) - before) / _TICK / (time.monotonic() - start), 2)


def _wrong_wakeups(attacker, sock, model_id: int) -> None:
    for make in (lambda: os.open("/dev/zero", os.O_RDONLY), lambda: os.pipe()[0], lambda: os.pipe()[1]):
        fds = ring_fds(attacker) + ring_fds(attacker)
        fds[4] = attacker.own(make())
        configure_burst(sock, fds, model_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=5.0)
    args = parser.parse_args()
    results = {}
    with AttackedDriver() as driver:
        results["no_client_cpu_percent"] = _percent(driver.pid, args.window)
        with driver.attack() as attacker:
            sock = attacker.connect()
            model_id = prepare_add(sock)
            results["one_connection_cpu_percent"] = _percent(driver.pid, args.window)
            for _ in range(8):
                configure_burst(sock, ring_fds(attacker) + ring_fds(attacker), model_id, poll_us=1000)
                exchange(sock, MsgType.EXECUTE_FENCED, fenced_payload(model_id, 1),
                         unsignalled_fences(attacker, 1))
            results["bursts_and_fenced_waits_cpu_percent"] = _percent(driver.pid, args.window)
            _wrong_wakeups(attacker, sock, model_id)
            results["after_wrong_wakeups_cpu_percent"] = _percent(driver.pid, args.window)
        results["after_attack_cpu_percent"] = _percent(driver.pid, args.window)
    for key, value in results.items():
        print(f"{key:40s} {value:6.2f}")
    write_results("driver_idle_cpu", results)


if __name__ == "__main__":
    main()
