"""``tracing.propagation``: the W3C-style context (binary and text), span ids, the innermost
open span of a recorder buffer, and adoption across threads in a real session."""
from __future__ import annotations

import threading

import pytest

from nnscope import tracing
from nnscope.tracing import Phase, propagation

CONTEXT = propagation.pack(bytes(range(1, 17)), bytes(range(1, 9)))


def test_binary_and_text_forms_round_trip():
    text = propagation.text(CONTEXT)
    assert text == "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"
    assert propagation.parse_text(text) == propagation.unpack(CONTEXT)


@pytest.mark.parametrize("text", [
    "", "00-0102030405060708090a0b0c0d0e0f10-0102030405060708", "zz" + "-" * 53,
    "00-0102030405060708090A0B0C0D0E0F10-0102030405060708-01",       # upper case
    "00-00000000000000000000000000000000-0102030405060708-01",       # zero trace id
    "00-0102030405060708090a0b0c0d0e0f10-0000000000000000-01",       # zero span id
    "01-0102030405060708090a0b0c0d0e0f10-0102030405060708-01",       # version
    "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-02",       # flags
])
def test_bad_text_forms_are_refused(text):
    with pytest.raises(ValueError):
        propagation.parse_text(text)


def test_span_ids_differ_by_process_thread_and_time():
    ids = {propagation.span_id(p, t, ts) for p in (1, 2) for t in (1, 2) for ts in (5, 6)}
    assert len(ids) == 8 and all(len(i) == 8 for i in ids)


def test_innermost_begin_skips_closed_spans_and_notes():
    events = ["[NN_LR_PE]", "a", 10, "[NN_LI_PE]", "b", 20, 25, ("adopt", 26, None),
              "[NN_LI_PE]", "c", 30]
    assert propagation.innermost_begin(events) == 30
    assert propagation.innermost_begin(events + [35]) == 10
    assert propagation.innermost_begin(events + [35, 40]) is None


def test_context_reads_the_buffer_again_only_when_it_changed(monkeypatch):
    """Requests sent outside any span (nothing open in the look-back window) read the buffer
    once, not once per request; a span begun or ended since is seen at once."""
    reads = []
    real = propagation.innermost_begin
    monkeypatch.setattr(propagation, "innermost_begin", lambda events: reads.append(1) or real(events))
    with tracing.TraceSession():
        for _ in range(50):
            with tracing.runtime(Phase.EXECUTION, "closed"):
                pass
        before = len(reads)
        assert [tracing.context() for _ in range(100)] == [None] * 100
        assert len(reads) == before + 1
        with tracing.runtime(Phase.EXECUTION, "open"):
            inside = tracing.context()
            assert inside is not None and tracing.context() == inside
        assert tracing.context() is None
        assert len(reads) == before + 3


def test_a_worker_thread_adopts_the_span_that_started_it():
    with tracing.TraceSession() as session:
        with tracing.runtime(Phase.EXECUTION, "start"):
            parent = tracing.context()

            def work():
                with tracing.adopt(parent):
                    with tracing.cpu(Phase.EXECUTION, "work"):
                        pass
                with tracing.cpu(Phase.EXECUTION, "alone"):
                    pass
            worker = threading.Thread(target=work)
            worker.start()
            worker.join()
    spans = {s.name: s for s in session.collect().spans()}
    start, work, alone = (spans[n] for n in ("[NN_LR_PE]start", "[NN_LC_PE]work", "[NN_LC_PE]alone"))
    linked = propagation.parse_text(work.remote_parent).span_id
    assert linked == propagation.span_id(start.pid, start.tid, start.start_ns)
    assert alone.remote_parent is None and start.remote_parent is None


def test_context_and_adopt_are_free_when_off():
    assert tracing.context() is None
    with tracing.adopt(CONTEXT):
        pass


def test_session_files_keep_notes_and_skip_malformed_ones(tmp_path):
    from nnscope.tracing import _childfile
    from nnscope.tracing.span import ThreadTrack, TraceData

    text = propagation.text(CONTEXT)
    track = ThreadTrack(5, 6, "t", [(10, "[NN_LD_PE]x"), (20, None)],
                        [["adopt", 9, text], ["error", 10, [3, "OP_FAILED"]], ["adopt", 21, None]])
    _childfile.append_tracks(tmp_path, [track], "d-driver")
    with open(_childfile.file_for(tmp_path, 5), "a", encoding="utf-8") as out:
        out.write('{"v":1,"pid":5,"tid":6,"thread":"t","process":"d-driver","events":[],'
                  '"notes":[["error",1,"x"],["adopt","1",null],["other",1,null],7]}\n')
    (read,), _ = _childfile.read_tracks(tmp_path)
    assert read.notes == track.notes
    (span,) = read_spans = list(TraceData({5: "d-driver"}, [read]).spans())
    assert (span.remote_parent, span.error) == (text, (3, "OP_FAILED")) and len(read_spans) == 1
