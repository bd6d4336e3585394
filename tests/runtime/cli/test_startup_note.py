"""Driver start-up is not silent (issue 37): ``nnscope run`` and ``nnscope devices --start`` say on a
terminal, in one line, that driver processes are starting when that takes
``$NNSCOPE_STARTUP_NOTE_S`` seconds; piped output gets nothing. Real processes on a
pseudo-terminal."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nnscope.runtime.cli._startup import STARTUP_NOTE_S
from tests.support.paths import REPO

NOTE = "nnscope: starting 1 driver process..."
RUN = ["run", "--executions", "1", "--warmup", "0", "--no-summary"]


def _env(note_s: str) -> dict:
    return {**os.environ, STARTUP_NOTE_S: note_s, "NNSCOPE_DRIVERS": "sample-all"}


def _on_a_terminal(*args, env) -> str:
    """What ``nnscope ARGS`` prints with stdout and stderr on a pseudo-terminal."""
    leader, follower = os.openpty()
    process = subprocess.Popen([sys.executable, "-m", "nnscope.runtime", *args], cwd=REPO, env=env,
                               stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=300) == 0, b"".join(chunks).decode()
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("command", [RUN, ["devices", "--start"]], ids=["run", "devices"])
def test_a_slow_start_is_said_once_on_a_terminal(command):
    lines = _on_a_terminal(*command, env=_env("0")).splitlines()
    assert lines.count(NOTE) == 1, lines
    assert lines[0] == NOTE  # before the run's first line


def test_a_quick_start_says_nothing():
    assert NOTE not in _on_a_terminal(*RUN, env=_env("1000"))


def test_piped_output_gets_no_note():
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", *RUN], cwd=REPO, env=_env("0"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
