"""``nnscope devices`` starts no driver process (issue 37: it took seconds, starting every
driver to ask it); what it prints is what the processes answer, which ``--start`` asks them."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from nnscope.runtime import manager
from nnscope.runtime.__main__ import main
from nnscope.runtime.cli.devices import declared, describe
from nnscope.runtime.drivers.registry import registered
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus
from tests.support.paths import REPO


def _nnscope(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300, env=dict(os.environ))


def test_devices_starts_no_driver_process(capsys):
    manager.forTest_reset()
    try:
        assert main(["devices"]) == 0
        remote = manager.devices()[1:]
        assert [d.name for d in remote] == list(registered())
        assert not any(device.launched() for device in remote)  # nothing was started
    finally:
        manager.forTest_reset()
    rows = capsys.readouterr().out.splitlines()[3:]
    assert [row.split()[0] for row in rows] == ["nnapi-reference", *registered()]


def test_the_description_is_what_the_driver_processes_answer():
    without = _nnscope("devices", "--json")
    started = _nnscope("devices", "--json", "--start")
    assert without.returncode == 0 and started.returncode == 0, without.stderr + started.stderr
    assert json.loads(without.stdout) == json.loads(started.stdout)
    table = _nnscope("devices", "--start").stdout.splitlines()
    assert table[2] == "(asked of the running driver processes)"


class _Silent:
    """A running device whose process does not answer."""

    name = "sample-silent"

    def launched(self) -> bool:
        return True

    def launch(self, wait: bool = False) -> None:
        """Running already."""

    def capabilities(self):
        raise HalError(ErrorStatus.DEAD_OBJECT, "driver process is gone")


def test_a_driver_that_does_not_answer_is_one_line_and_exit_1(capsys):
    cpu = manager.cpu_device()
    manager.forTest_set_devices([cpu, _Silent()])
    try:
        assert main(["devices", "--start"]) == 1
    finally:
        manager.forTest_reset()
    out, err = capsys.readouterr()
    assert [row.split()[0] for row in out.splitlines()[3:]] == ["nnapi-reference"]
    assert err.splitlines()[-1].startswith("nnscope: error: driver sample-silent did not answer: ")
    assert declared(cpu) is cpu and describe(cpu)["name"] == "nnapi-reference"
