"""Pass 2 on a guessed pass 1 result (one process) gives exactly the output of both passes."""
from __future__ import annotations

import pytest

from nnscope.parse_systrace import _engine, _parallel
from nnscope.parse_systrace.__main__ import main
from nnscope.parse_systrace.readers import open_rows, systrace
from tests.parse_systrace.test_parallel import FLAGS, generate_trace, insert_pair


@pytest.fixture(autouse=True)
def _serial(monkeypatch):
    monkeypatch.setattr(_parallel, "MIN_BYTES", 1 << 62)  # no split: the one-process path


def _record(monkeypatch) -> list:
    """Whether each guess was used (True) or dropped (False)."""
    outcomes = []
    speculate = _engine.speculate

    def recording(*args):
        used = yield from speculate(*args)
        outcomes.append(used)
        return used

    monkeypatch.setattr(_engine, "speculate", recording)
    return outcomes


def _both_passes(monkeypatch) -> None:
    def never(*args):
        return False
        yield  # a generator, as speculate

    monkeypatch.setattr(_engine, "speculate", never)


def _outputs(path, flags, capsys, monkeypatch, chunk, guessing):
    with monkeypatch.context() as patch:
        patch.setattr(systrace, "CHUNK", chunk)
        if not guessing:
            _both_passes(patch)
        status = main([*flags, str(path)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("fmt", ["html", "text", "oldtext"])
@pytest.mark.parametrize("chunk, used", [(1 << 20, True), (1024, False)])
def test_guessed_output_equals_both_passes(tmp_path, capsys, monkeypatch, fmt, chunk, used):
    path = generate_trace(tmp_path, 51, fmt)
    outcomes = _record(monkeypatch)
    for flags in FLAGS:
        both = _outputs(path, flags, capsys, monkeypatch, chunk, False)
        assert both[0] == 0
        assert _outputs(path, flags, capsys, monkeypatch, chunk, True) == both
    assert outcomes == [used] * len(FLAGS)


@pytest.mark.parametrize("at", [0.3, 0.9])
@pytest.mark.parametrize("kind", ["new thread", "other process", "driver mark"])
def test_rows_against_the_guess_start_over_with_pass_one(tmp_path, capsys, monkeypatch, at, kind):
    lines = generate_trace(tmp_path, 52, "text").read_bytes().splitlines(keepends=True)
    first = next(line for line in lines if b"[NN_LA_PO]" in line)
    task, tgid = first.split()[0], first.split(b"(")[1].split(b")")[0].strip()
    pair = {"new thread": (b"extra-31999", b"31999", b"[NN_LR_PP]late"),
            "other process": (task, b"31998", b"[NN_LR_PP]moved"),
            "driver mark": (task, tgid, b"HIDL::IDevice::getVersionString::server")}
    path = tmp_path / "late.txt"
    path.write_bytes(b"".join(insert_pair(lines, int(len(lines) * at), *pair[kind])))
    both = _outputs(path, ["--json"], capsys, monkeypatch, 1 << 15, False)
    outcomes = _record(monkeypatch)
    assert _outputs(path, ["--json"], capsys, monkeypatch, 1 << 15, True) == both
    assert outcomes == [False]


def test_a_process_allowed_one_cpu_does_not_split(tmp_path, monkeypatch):
    monkeypatch.setattr(_parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(_parallel, "forks_safely", lambda: True)
    path = generate_trace(tmp_path, 53, "html")
    monkeypatch.setattr(_parallel, "usable_cpus", lambda: 2)
    assert _parallel.plan(open_rows(path)) is not None
    monkeypatch.setattr(_parallel, "usable_cpus", lambda: 1)
    assert _parallel.plan(open_rows(path)) is None
