"""The two-process second pass gives exactly the serial output (small blocks force it)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nnscope.parse_systrace import _parallel
from nnscope.parse_systrace.__main__ import main
from nnscope.parse_systrace.readers import systrace
from tests.support.paths import GEN_SYSTRACE

FLAGS = ([], ["--json"], ["--tolerant"], ["--per-process"], ["--total-times", "--json"])


@pytest.fixture(autouse=True)
def _one_thread_as_the_cli(monkeypatch):
    """The CLI runs one thread, so it may fork; tests that ran before in this worker may have
    left idle daemon threads (the runtime's execution worker), which would turn the split off
    here and not there. The guard itself is tested below, unpatched."""
    monkeypatch.setattr(_parallel, "forks_safely", lambda: True)


def generate_trace(tmp_path, seed, fmt, runs=5):
    out = tmp_path / f"{seed}.{fmt}"
    subprocess.run([sys.executable, str(GEN_SYSTRACE), "--seed", str(seed), "--scenario",
                    "mixed", "--format", fmt, "--runs", str(runs), "--execs", "4",
                    "-o", str(out)], check=True)
    return out


def _outputs(path, flags, capsys, monkeypatch, parallel, chunk):
    monkeypatch.setattr(systrace, "CHUNK", chunk)
    monkeypatch.setattr(_parallel, "MIN_BYTES", 0 if parallel else 1 << 62)
    status = main([*flags, str(path)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize("fmt", ["html", "text", "oldtext"])
@pytest.mark.parametrize("chunk", [4096, 1 << 15])
def test_split_output_equals_serial(tmp_path, capsys, monkeypatch, fmt, chunk):
    path = generate_trace(tmp_path, 41, fmt)
    calls = []
    emit = _parallel._emit
    monkeypatch.setattr(_parallel, "_emit", lambda *a: calls.append(1) or emit(*a))
    for flags in FLAGS:
        serial = _outputs(path, flags, capsys, monkeypatch, False, chunk)
        assert serial[0] == 0
        assert _outputs(path, flags, capsys, monkeypatch, True, chunk) == serial
    # each split run gave the two processes' runs (an old-layout trace's attempt may fall
    # back to the serial passes: some of its rows take their process id from earlier rows)
    assert len(calls) == len(FLAGS) or (fmt == "oldtext" and chunk == 4096)


@pytest.mark.parametrize("fmt", ["html", "text", "oldtext"])
def test_the_split_row_is_the_first_run_start_from_the_parents_share(tmp_path, monkeypatch,
                                                                      fmt):
    """The parent reads the bytes before the split row's line, the child those from it on
    (no row is read twice): the first run-starting row from PARENT_SHARE of the bytes on."""
    from nnscope.parse_systrace.readers import open_rows  # noqa: PLC0415
    monkeypatch.setattr(_parallel, "MIN_BYTES", 0)
    path = generate_trace(tmp_path, 44, fmt)
    offsets = [0]
    for line in path.read_bytes().splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    share = int(offsets[-1] * _parallel.PARENT_SHARE)
    starts = [offsets[where - 1] for _, _, _, name, where in open_rows(path).rows()
              if name is not None and "[NN_LA_PO]" in name]
    line = next(offset for offset in offsets if offset >= share)
    assert _parallel.plan(open_rows(path)).at == next(s for s in starts if s >= line)


def test_an_unreadable_line_where_the_split_row_is_searched_gives_the_serial_error(
        tmp_path, capsys, monkeypatch):
    """The byte search before the fork meets a bad line naming ``[NN_LA_PO]``: no split, and
    the error names the line as the serial passes do."""
    lines = generate_trace(tmp_path, 45, "text").read_bytes().splitlines(keepends=True)
    share, at = sum(map(len, lines)) * _parallel.PARENT_SHARE, 0
    while share > 0:  # the bad line comes first from the share of the bytes on
        share -= len(lines[at])
        at += 1
    path = tmp_path / "bad.txt"
    path.write_bytes(b"".join(lines[:at] + [b"garbage [NN_LA_PO]x\n"] + lines[at:]))
    serial = _outputs(path, [], capsys, monkeypatch, False, 4096)
    assert serial[0] == 2 and f"line {at + 1}" in serial[2]
    assert _outputs(path, [], capsys, monkeypatch, True, 4096) == serial


def test_rows_before_the_first_run_stay_in_it(tmp_path, capsys, monkeypatch):
    lines = generate_trace(tmp_path, 42, "text", runs=3).read_bytes().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if b"[NN_LA_PO]" in line)
    pair = [line for line in lines[first:] if b"]ANeuralNetworksModel_create" in line][:1]
    pair.append(lines[lines.index(pair[0]) + 1])
    path = tmp_path / "late.txt"  # the middle of the file is before the first run's mark
    path.write_bytes(b"".join(lines[:first] + pair * 2000 + lines[first:]))
    for flags in (["--json"], ["--tolerant"]):
        serial = _outputs(path, flags, capsys, monkeypatch, False, 4096)
        assert serial[0] == 0 and serial[1].count("[NN_LA_PO]") == 3
        assert _outputs(path, flags, capsys, monkeypatch, True, 4096) == serial


def test_a_trace_part_that_ends_before_the_split_is_read_serially(tmp_path, capsys,
                                                                 monkeypatch):
    """The child starts at the split byte: when the page's trace data ends before it (a
    second script section of mark rows follows), the split is dropped, not those rows read."""
    page = generate_trace(tmp_path, 48, "html").read_bytes()
    rows = page[page.index(b"TASK-PID"):page.index(b"</script>")]
    rows = rows[rows.index(b"\n") + 1:]
    other = b'<script class="trace-data" type="application/text">\n' + rows * 4 + b"</script>\n"
    path = tmp_path / "two_sections.html"
    path.write_bytes(page.replace(b"<!-- END TRACE -->", other + b"<!-- END TRACE -->"))
    calls = []
    runs = _parallel.runs
    monkeypatch.setattr(_parallel, "runs", lambda *a: calls.append(1) or runs(*a))
    for flags in (["--json"], ["--tolerant"]):  # tolerant: the second part's rows would fit
        serial = _outputs(path, flags, capsys, monkeypatch, False, 4096)
        assert serial[0] == 0
        assert _outputs(path, flags, capsys, monkeypatch, True, 4096) == serial
    assert calls  # the split was tried


@pytest.mark.parametrize("fmt", ["html", "text", "oldtext"])
def test_the_byte_search_finds_the_rows_that_start_runs(tmp_path, fmt):
    """The parent stops reading at the split row's line, found by a byte search: it must
    find exactly the run-starting begin rows that the row reader gives, from the first line
    start at or after any byte on."""
    from nnscope.parse_systrace.readers import open_rows  # noqa: PLC0415
    path = generate_trace(tmp_path, 49, fmt)
    lines = path.read_bytes().splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    rows = [(offsets[where - 1], tid) for _, tid, _, name, where in open_rows(path).rows()
            if name is not None and "[NN_LA_PO]" in name]
    assert len(rows) == 5
    for start in (offsets[0], offsets[len(lines) // 3], offsets[len(lines) // 3] + 7,
                  rows[2][0] - 1, rows[2][0], rows[2][0] + 1, offsets[-1] - 1):
        line = next(offset for offset in offsets if offset >= start)
        with open(path, "rb") as handle:
            found = list(systrace.begin_rows_from(handle, start, "[NN_LA_PO]"))
        assert found == [row for row in rows if row[0] >= line]


def test_a_failing_child_falls_back_to_the_serial_passes(tmp_path, capsys, monkeypatch):
    path = generate_trace(tmp_path, 43, "html")
    serial = _outputs(path, ["--json"], capsys, monkeypatch, False, 4096)
    monkeypatch.setattr(_parallel, "_plain", lambda value: 1 / 0)  # the child fails
    assert _outputs(path, ["--json"], capsys, monkeypatch, True, 4096) == serial


def test_small_gzip_and_file_objects_stay_serial(tmp_path):
    import gzip
    import io

    from nnscope.parse_systrace.readers import open_rows
    path = generate_trace(tmp_path, 44, "html")
    assert _parallel.plan(open_rows(path)) is None  # below MIN_BYTES
    packed = tmp_path / "trace.html.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert _parallel.plan(open_rows(io.BytesIO(path.read_bytes()))) is None
    original, _parallel.MIN_BYTES = _parallel.MIN_BYTES, 0
    try:
        assert _parallel.plan(open_rows(packed)) is None
        assert _parallel.plan(open_rows(path)) is not None
    finally:
        _parallel.MIN_BYTES = original


def test_a_file_emptied_after_its_size_was_read_stays_serial(tmp_path, monkeypatch):
    empty = tmp_path / "emptied.html"
    empty.write_bytes(b"")
    monkeypatch.setattr(_parallel, "MIN_BYTES", -1)  # as if its size had been read before
    monkeypatch.setattr(_parallel, "usable_cpus", lambda: 2)
    assert _parallel._split_at(str(empty)) is None  # mmap of an empty file: ValueError
    with open(empty, "rb") as handle:
        assert list(systrace.begin_rows_from(handle, 0, "[NN_LA_PO]")) == []


def _record_guesses(monkeypatch) -> list:
    """Whether each guessed pass 1 result was used (True) or dropped (False)."""
    outcomes = []
    speculate = _parallel.runs

    def recording(*args):
        found = yield from speculate(*args)
        outcomes.append(found is None)
        return found

    monkeypatch.setattr(_parallel, "runs", recording)
    return outcomes


@pytest.mark.parametrize("fmt", ["html", "oldtext"])  # oldtext: blocks read line by line
@pytest.mark.parametrize("chunk, guessed", [(1 << 15, True), (1024, False)])
def test_a_guessed_first_pass_is_used_only_when_checked_right(tmp_path, capsys, monkeypatch,
                                                               chunk, guessed, fmt):
    path = generate_trace(tmp_path, 45, fmt)
    outcomes = _record_guesses(monkeypatch)
    for flags in (["--json"], ["--tolerant"]):
        serial = _outputs(path, flags, capsys, monkeypatch, False, chunk)
        assert _outputs(path, flags, capsys, monkeypatch, True, chunk) == serial
    assert outcomes == [guessed, guessed]


def insert_pair(lines: list, at: int, task: bytes, tgid: bytes, name: bytes) -> list:
    """``lines`` with a B/E pair of ``task`` (``name-tid``) in process ``tgid`` put before
    line ``at``, at that line's timestamp."""
    stamp = lines[at].split(b": tracing_mark_write")[0].split()[-1]
    head = b"  %s (%s) [000] ...1  %s: tracing_mark_write: " % (task, tgid, stamp)
    return lines[:at] + [head + b"B|%s|%s\n" % (tgid, name), head + b"E|%s\n" % tgid] + lines[at:]


@pytest.mark.parametrize("share", [0.25, 0.75])  # in the parent's rows, in the child's
@pytest.mark.parametrize("kind", ["new thread", "other process", "driver mark"])
def test_rows_that_break_the_guess_are_caught(tmp_path, capsys, monkeypatch, share, kind):
    lines = generate_trace(tmp_path, 45, "text").read_bytes().splitlines(keepends=True)
    first = next(line for line in lines if b"[NN_LA_PO]" in line)
    task, tgid = first.split()[0], first.split()[1].strip(b"()")  # the app's main thread
    pair = {"new thread": (b"extra-31999", b"31999", b"[NN_LR_PP]late"),
            "other process": (task, b"31998", b"[NN_LR_PP]moved"),
            "driver mark": (task, tgid, b"HIDL::IDevice::getVersionString::server")}
    path = tmp_path / "broken.txt"
    path.write_bytes(b"".join(insert_pair(lines, int(len(lines) * share), *pair[kind])))
    outcomes = _record_guesses(monkeypatch)
    serial = _outputs(path, ["--json"], capsys, monkeypatch, False, 1 << 15)
    open_fds = len(os.listdir("/proc/self/fd"))
    assert _outputs(path, ["--json"], capsys, monkeypatch, True, 1 << 15) == serial
    assert outcomes == [False]  # the guess from the first block was rejected
    assert len(os.listdir("/proc/self/fd")) == open_fds  # its child's pipes are closed


def test_a_first_block_without_nn_marks_gives_no_guess(tmp_path, capsys, monkeypatch):
    lines = generate_trace(tmp_path, 46, "text").read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b"tracing_mark_write" in line)
    pair = insert_pair(lines[at:at + 1], 0, b"ui-999", b"999", b"draw")[:2]
    path = tmp_path / "late_nn.txt"  # a UI thread's own marks fill the first 4096 bytes
    path.write_bytes(b"".join(lines[:at] + pair * 200 + lines[at:]))
    outcomes = _record_guesses(monkeypatch)
    serial = _outputs(path, ["--json"], capsys, monkeypatch, False, 4096)
    assert serial[0] == 0
    assert _outputs(path, ["--json"], capsys, monkeypatch, True, 4096) == serial
    assert outcomes == [False]


def test_a_process_with_other_threads_does_not_split(tmp_path, monkeypatch):
    import threading  # noqa: PLC0415

    from nnscope.parse_systrace.readers import open_rows  # noqa: PLC0415
    monkeypatch.undo()  # the real guard
    monkeypatch.setattr(_parallel, "MIN_BYTES", 0)
    path = generate_trace(tmp_path, 47, "html")
    release = threading.Event()
    other = threading.Thread(target=release.wait, daemon=True)
    other.start()
    try:
        assert not _parallel.forks_safely() and _parallel.plan(open_rows(path)) is None
    finally:
        release.set()
        other.join()
