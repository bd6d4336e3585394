"""Every code block of the README runs as pasted (issue 27), and so does every command written
inline in its prose (issue 37: ``nnscope run --example fibonacci --dot fib.dot`` sat in a
sentence, where no test looked, and failed as written).

The blocks are extracted from ``README.md`` (fenced ``sh`` and ``python`` blocks, and indented
blocks, which are shell); the inline commands are the prose's code spans that start with one of
:data:`PROGRAMS` and an argument. Each runs in a fresh directory that looks like the checkout (its
top-level entries linked in), so the paths the README uses (the shipped model under
``tests/data/models/``, the CTS vectors) resolve and whatever a block writes stays out of the
tree. Shell blocks run in ``bash -e`` with this environment's programs on PATH and ``HOME`` in
the scratch directory; Python blocks in this interpreter. A block passes when it exits 0 with
no traceback; a Python block also writes nothing to stderr (a stray warning at exit shows).

Only :data:`NOT_RUN` and :data:`INLINE_NOT_RUN` are left out, each with the reason.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.programs import require_program

README = REPO / "README.md"

#: README lines this test does not run, and why.
NOT_RUN = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test,litert]' && nnscope run":
        "installing is how this environment was made; `nnscope run` runs in the next block",
    "python -m pytest -n 2": "the test suite itself",
    "docker run --rm -d --name jaeger -p 16686:16686 -p 4318:4318 jaegertracing/all-in-one:latest":
        "Docker and a registry download: for the reader's machine (the next lines run without a collector)",
}

#: Programs whose inline code spans in the README's prose are commands (with an argument).
PROGRAMS = ("nnscope", "parse_systrace", "nnscope-dashboard")
#: Inline commands this test does not run, and why.
INLINE_NOT_RUN = {
    "nnscope cts": "every shipped CTS vector: minutes (a block runs `nnscope cts` on one file)",
    "nnscope cts --device sample-litert": "every shipped CTS vector on one device: minutes",
    "nnscope cts --device NAME": "NAME stands for a device",
}

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def readme_blocks(text: str) -> list[tuple[str, str, int]]:
    """(language, code, line number) of every code block: fenced ones, then indented ones
    (four spaces after a blank line, outside fences), in README order."""
    blocks = [(m.group(1) or "sh", m.group(2), text.count("\n", 0, m.start()) + 1) for m in _FENCE.finditer(text)
              if m.group(1) != "text"]  # a drawing, not code
    outside = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for m in re.finditer(r"(?:(?<=\n\n)|^)((?: {4}.*\S.*\n)+)", outside):
        code = "".join(line[4:] + "\n" for line in m.group(1).splitlines())
        blocks.append(("sh", code, outside.count("\n", 0, m.start()) + 1))
    return sorted(blocks, key=lambda block: block[2])


def readme_inline_commands(text: str) -> list[tuple[str, int]]:
    """(command, line number) of each code span in the prose (outside every block) that starts
    with a program of :data:`PROGRAMS` and an argument, first occurrence only, in README order."""
    outside = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    outside = re.sub(r"(?:(?<=\n\n)|^)((?: {4}.*\S.*\n)+)", lambda m: "\n" * m.group(0).count("\n"),
                     outside)
    found: dict[str, int] = {}
    for m in _SPAN.finditer(outside):
        words = m.group(1).split()
        if len(words) > 1 and words[0] in PROGRAMS:
            found.setdefault(m.group(1), outside.count("\n", 0, m.start()) + 1)
    return list(found.items())


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
INLINE = readme_inline_commands(README.read_text(encoding="utf-8"))


def _runnable(code: str) -> str:
    kept = [line for line in code.splitlines() if line.strip() not in NOT_RUN]
    return "\n".join(kept) + "\n"


@pytest.fixture
def checkout(tmp_path):
    """A scratch directory that looks like the checkout."""
    for entry in REPO.iterdir():
        if entry.name not in (".git", ".venv") and not entry.name.startswith("."):
            (tmp_path / entry.name).symlink_to(entry)
    (tmp_path / "home").mkdir()
    return tmp_path


def _env(checkout: Path) -> dict:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("NN_", "NNSCOPE_", "PYTEST_"))}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["HOME"] = str(checkout / "home")
    return env


def test_the_readme_has_its_blocks_and_every_left_out_line_is_in_it():
    assert [language for language, _, _ in BLOCKS].count("python") == 2
    assert len(BLOCKS) >= 7
    lines = {line.strip() for _, code, _ in BLOCKS for line in code.splitlines()}
    assert set(NOT_RUN) <= lines  # a stale exception fails here
    assert set(INLINE_NOT_RUN) <= {command for command, _ in INLINE}
    assert "nnscope run --burst" in dict(INLINE)  # the extraction finds commands


@pytest.mark.parametrize("language, code, line", BLOCKS, ids=[f"line{b[2]}" for b in BLOCKS])
def test_readme_block_runs_as_pasted(language, code, line, checkout):
    script = _runnable(code)
    assert not script.rstrip().endswith("\\"), f"README line {line}: the block was cut short"
    if not script.strip():
        pytest.skip(f"README line {line}: every line is in NOT_RUN")
    if re.search(r"^\s*dot ", script, re.M):
        require_program("dot")
    command = [sys.executable, "-"] if language == "python" else ["bash", "-e", "-o", "pipefail", "-s"]
    done = subprocess.run(command, input=script, capture_output=True, text=True, cwd=checkout,
                          env=_env(checkout), timeout=900)
    where = f"README block at line {line}:\n{script}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, where
    assert "Traceback" not in done.stderr and "cannot write trace events" not in done.stderr, where
    if language == "python":
        assert done.stderr == "", where


@pytest.mark.parametrize("command, line", INLINE, ids=[f"inline-line{line}" for _, line in INLINE])
def test_readme_inline_command_runs_as_pasted(command, line, checkout):
    if command in INLINE_NOT_RUN:
        pytest.skip(f"README line {line}: {INLINE_NOT_RUN[command]}")
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], capture_output=True,
                          text=True, cwd=checkout, env=_env(checkout), timeout=900)
    where = f"README line {line}: {command}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, where
    assert "Traceback" not in done.stderr, where
