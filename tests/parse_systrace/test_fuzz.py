"""Fuzz: mutated traces of every format never crash the parser with a traceback.

Seeds are small fixtures in every format we read (systrace HTML, ftrace text, Chrome
JSON, Perfetto ftrace/track events, gzip). A seeded RNG applies bit flips, truncations,
duplicated/deleted/shuffled lines and random bytes; each case runs the CLI's
``main(argv)`` in-process and must end with an exit status, never another exception,
and never print a traceback. Also a hypothesis test feeds arbitrary JSON to the Chrome
JSON reader, which must raise nothing but TraceFormatError.
"""
import io
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.readers.chrome_json import read_chrome_json
from tests.support import trace_convert
from tests.support.paths import SYSTRACE_FIXTURES
from tests.support.trace_convert import run_main

CASES_PER_TEST = 10
TESTS = 30  # 300 cases in all


def _seeds() -> dict[str, bytes]:
    synthetic = SYSTRACE_FIXTURES / "synthetic"
    seeds = {name: (synthetic / name).read_bytes()
             for name in ("driver-plain.txt", "mixed-old.txt", "driver.html")}
    rows = trace_convert.read_rows(synthetic / "driver-plain.txt")
    for name, convert in trace_convert.CONVERTERS.items():
        seeds[name] = convert(rows)
    return seeds


SEEDS = _seeds()


def _flip_bits(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 20)):
        position = rng.randrange(len(data))
        data[position] ^= 1 << rng.randrange(8)
    return bytes(data)


def _truncate(rng, data):
    return data[:rng.randrange(len(data))]


def _lines(rng, data, edit):
    lines = data.splitlines(keepends=True)
    if len(lines) < 2:
        return _flip_bits(rng, data)
    index = rng.randrange(len(lines))
    edit(rng, lines, index)
    return b"".join(lines)


def _duplicate_line(rng, data):
    return _lines(rng, data, lambda rng, lines, i: lines.insert(i, lines[i]))


def _delete_line(rng, data):
    return _lines(rng, data, lambda rng, lines, i: lines.pop(i))


def _shuffle_lines(rng, data):
    def shuffle(rng, lines, i):
        part = lines[i:i + rng.randint(2, 40)]
        rng.shuffle(part)
        lines[i:i + len(part)] = part
    return _lines(rng, data, shuffle)


def _random_bytes(rng, data):
    start = rng.randrange(len(data))
    noise = rng.randbytes(rng.randint(1, 64))
    return data[:start] + noise + data[start + rng.randint(0, 64):]


def _garbage(rng, data):
    return rng.choice([b"", b"\x1f\x8b", b"\x0a", b"{", b"["]) + rng.randbytes(rng.randint(0, 300))


MUTATIONS = [_flip_bits, _truncate, _duplicate_line, _delete_line, _shuffle_lines,
             _random_bytes, _garbage]


def _case(number: int) -> tuple[str, bytes]:
    rng = random.Random(number)
    name = rng.choice(sorted(SEEDS))
    data = SEEDS[name]
    mutations = rng.sample(MUTATIONS, rng.randint(1, 2))
    for mutate in mutations:
        data = mutate(rng, data) if data else data
    label = f"case {number}: {name} via {'+'.join(m.__name__ for m in mutations)}"
    return label, data


@pytest.mark.parametrize("block", range(TESTS))
def test_mutated_traces_end_with_an_exit_status_and_no_traceback(block, tmp_path):
    for number in range(block * CASES_PER_TEST, (block + 1) * CASES_PER_TEST):
        label, data = _case(number)
        path = tmp_path / f"case{number}"
        path.write_bytes(data)
        status, _, stderr = run_main([str(path)])
        assert isinstance(status, int), label
        assert "Traceback" not in stderr, label
        if status == 3:  # a partial trace: what is complete printed, "Incomplete trace" said
            assert "Incomplete trace" in stderr, label
        elif status != 0:
            assert status == 2 and stderr.strip(), f"{label}: status {status}, {stderr!r}"


def test_unmutated_seeds_all_summarise(tmp_path):
    for name in ("driver-plain.txt", "chrome-x", "perfetto-track", "gzip-ftrace"):
        path = tmp_path / name
        path.write_bytes(SEEDS[name])
        status, stdout, _ = run_main([str(path)])
        assert status == 0 and "NNAPI timing summary" in stdout, name


JSON_SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
                | st.floats(allow_nan=False) | st.text(max_size=8))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=4),
                           max_leaves=20)
EVENT_FIELDS = st.fixed_dictionaries({}, optional={
    "ph": st.sampled_from(["B", "E", "X", "M", "i"]) | JSON_SCALARS,
    "ts": JSON_SCALARS, "dur": JSON_SCALARS, "pid": JSON_SCALARS, "tid": JSON_SCALARS,
    "name": JSON_SCALARS, "args": JSON_VALUES})
DOCUMENTS = (st.lists(EVENT_FIELDS | JSON_VALUES, max_size=6)
             | st.fixed_dictionaries({}, optional={
                 "traceEvents": st.lists(EVENT_FIELDS, max_size=6) | JSON_VALUES,
                 "systemTraceEvents": st.text(max_size=200) | JSON_VALUES}))


@settings(max_examples=200, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS)
def test_chrome_json_reader_raises_only_trace_format_error(document):
    data = json.dumps(document).encode()
    try:
        rows = list(read_chrome_json(io.BytesIO(data)))
    except TraceFormatError:
        return
    for ts, tid, tgid, name, where in rows:
        assert isinstance(ts, float) and isinstance(tid, int) and isinstance(tgid, int)
        assert name is None or isinstance(name, str)
