"""gzip-compressed traces: detected from content, re-iterable, bad data is a TraceFormatError."""
import gzip
import io

import pytest

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.readers import open_rows
from tests.support import trace_convert

ROWS = [(5.000001, 12, 12, "[NN_LA_PO]x", 2), (5.000002, 12, 12, None, 3)]
PLAIN = {
    "ftrace": trace_convert.ftrace_text(ROWS).encode(),
    "chrome_json": trace_convert.chrome_json(ROWS, "X"),
    "perfetto": trace_convert.perfetto_track_events(ROWS),
}


@pytest.mark.parametrize("fmt", sorted(PLAIN))
def test_gzipped_trace_is_detected_by_content_and_reads_like_the_plain_one(fmt, tmp_path):
    path = tmp_path / "trace.bin"  # no telling extension
    path.write_bytes(trace_convert.gzipped(PLAIN[fmt]))
    source = open_rows(str(path))
    assert source.format == fmt
    first, second = list(source.rows()), list(source.rows())
    assert [row[:4] for row in first] == [row[:4] for row in ROWS]
    assert second == first


def test_gzipped_file_object_is_re_iterable():
    source = open_rows(io.BytesIO(gzip.compress(PLAIN["chrome_json"])))
    assert list(source.rows()) == list(source.rows()) != []


def test_truncated_gzip_raises_trace_format_error(tmp_path):
    data = trace_convert.gzipped(PLAIN["ftrace"] * 50)
    path = tmp_path / "cut.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated gzip data"):
        list(open_rows(str(path)).rows())


def test_corrupt_gzip_raises_trace_format_error():
    data = bytearray(trace_convert.gzipped(PLAIN["ftrace"]))
    data[-8] ^= 0xFF  # the CRC32 of the content
    with pytest.raises(TraceFormatError, match="corrupt gzip data .*CRC"):
        list(open_rows(io.BytesIO(bytes(data))).rows())


def test_gzip_holding_garbage_is_an_unrecognised_format():
    with pytest.raises(TraceFormatError, match="unrecognised trace format"):
        open_rows(io.BytesIO(gzip.compress(b"\x00\x01 not a trace")))
