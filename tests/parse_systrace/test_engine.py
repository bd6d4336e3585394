"""Unit tests of classification, tree transforms, aggregation and the run loop."""
from __future__ import annotations

import copy
import io
import math

import pytest

from nnscope import parse_systrace
from nnscope.parse_systrace import _tree
from nnscope.parse_systrace._aggregate import self_times_of
from nnscope.parse_systrace._classify import MarkError, classify
from nnscope.parse_systrace._walk import calculate
from nnscope.parse_systrace.errors import TraceFormatError

HEAD = b"#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n"


def _trace(*marks) -> io.BytesIO:
    """marks: (tid, tgid, seconds, 'B|..|name' or 'E|..')."""
    lines = [b"%16s-%d (%5d) [000] ...1 %12.6f: tracing_mark_write: %s\n"
             % (b"worker", tid, tgid, ts, mark.encode()) for tid, tgid, ts, mark in marks]
    return io.BytesIO(HEAD + b"".join(lines))


@pytest.mark.parametrize("name, layer, phase", [
    ("[NN_LR_PE]ANeuralNetworksExecution_compute", "LR", "PE"),
    ("[SUB][NN_LR_PC]VersionedIDevice::prepareModel", "LR", "PC"),
    ("[NN_LR_PT]ANeuralNetworksEvent_free", "LR", "PE"),          # legacy _PT -> _PE
    ("HIDL::IDevice::getCapabilities_1_2::client", "LI", "PI"),
    ("HIDL::IDevice::prepareModel_1_1::server", "LD", "PC"),
    ("HIDL::IPreparedModel::execute_1_3::server", "LD", "PE"),
    ("HIDL::IPreparedModel::executeFenced::client", "LI", "PE"),
    ("HIDL::IBurstContext::executeBurst::server", "LD", "PE"),
    ("HIDL::IMapper::importBuffer::passthrough", "LI", "PI"),
    ("HIDL::IAllocator::allocate::client", "LI", "PU"),
    ("HWCSession::PresentDisplay::", "LX", "PI"),
])
def test_classify(name, layer, phase):
    assert classify(name)[1:3] == (layer, phase)


def test_classify_rejects_foreign_tags_and_sideless_hidl():
    with pytest.raises(MarkError):
        classify("[foo]bar")
    with pytest.raises(MarkError):
        classify("HIDL::IFoo::bar")


def test_sub_node_is_counted_in_its_layer_and_subtracted_from_ipc():
    root = _tree.new_root()
    lr = _tree.add(root, 0.0, "[NN_LR_PC]finish", "LR", "PC", "PO", False, 1)
    li = _tree.add(lr, 0.001, "[NN_LI_PC]prepare", "LI", "PC", "PO", False, 2)
    sub = _tree.add(li, 0.002, "[SUB][NN_LR_PC]x", "LR", "PC", "PO", True, 3)
    sub[_tree.E], li[_tree.E], lr[_tree.E] = 0.003, 0.005, 0.010
    stats = calculate(root)
    assert stats["PO_LI_PC"] == pytest.approx(3.0)       # 4 ms less the 1 ms [SUB]
    assert stats["PO_LR_PC"] == pytest.approx(11.0)      # 10 ms plus the relocated copy


def _node(parent, mark, layer, phase="PC", placeholder=False):
    if placeholder:
        node = [0.0, 0.001, None, None, None, False, [], parent, None, 0]
        parent[_tree.C].append(node)
        return node
    node = _tree.add(parent, 0.0, mark, layer, phase, "PO", False, 0)
    node[_tree.E] = 0.001
    return node


def test_removed_nodes_children_move_to_the_end_in_removal_order():
    # p: [a, X, b, c] with X (ignored): [x1 (ignored): [y1], x2], b (placeholder): [bk]
    root = _tree.new_root()
    p = _node(root, "p", "LR")
    a, x = _node(p, "a", "LI"), _node(p, "X", "LX", "PI")
    b, c = _node(p, None, None, placeholder=True), _node(p, "c", "LI")
    x1, x2 = _node(x, "x1", "LX", "PI"), _node(x, "x2", "LI")
    _node(x1, "y1", "LI")
    _node(b, "bk", "LI")
    for parents in (None, {id(p)}):  # any node may have such children / only p has
        tree = copy.deepcopy(root) if parents is None else root
        top = tree[_tree.C][0]
        calculate(tree, 2, 1, parents and {id(top)})
        assert [n[_tree.M] for n in top[_tree.C]] == ["a", "c", "x2", "y1", "bk"]
        assert all(n[_tree.PAR] is top for n in top[_tree.C])


def test_unlinked_calculation_leaves_no_parent_references():
    root = _tree.new_root()
    pi = _node(root, "[NN_LR_PI]init", "LR", "PI")
    sub = _tree.add(pi, 0.0, "[SUB][NN_LR_PI]x", "LR", "PI", "PO", True, 2)
    sub[_tree.E] = 0.0005
    stats = calculate(root, 0, 0, None, True)
    # a top-level PI node is relocated too: its 1 ms copy and the [SUB] node's 0.5 ms copy
    assert stats == pytest.approx({"PO_LR_PI": 1.5})
    assert [n[_tree.M] for n in root[_tree.C]] == ["[NN_LR_PI]init", "[NN_LR_PI]init",
                                                    "[SUB][NN_LR_PI]x"]
    stack = [root]
    while stack:
        node = stack.pop()
        assert node[_tree.PAR] is None
        stack.extend(node[_tree.C])


def test_nesting_violation_names_the_row():
    root = _tree.new_root()
    li = _tree.add(root, 0.0, "[NN_LI_PC]a", "LI", "PC", "PO", False, 10)
    la = _tree.add(li, 0.001, "[NN_LA_PC]b", "LA", "PC", "PO", False, 11)
    la[_tree.E], li[_tree.E] = 0.002, 0.003
    with pytest.raises(TraceFormatError, match=r"^line 11: nesting violation: layer LA"):
        calculate(root)


def test_self_times_subtract_the_layer_below_and_keep_nan():
    layers = {"LA": math.nan, "LR": 10.0, "LI": 6.0, "LD": 4.0, "LC": 0.0, "LT": 10.0}
    times = {phase: dict(layers) for phase in
             ("PO", "PI", "PP", "PC", "PE", "PIO", "PTR", "PCO", "PR", "PT")}
    selfs = self_times_of(times, both=False)
    assert math.isnan(selfs["PC"]["LA"])
    assert (selfs["PC"]["LR"], selfs["PC"]["LI"], selfs["PC"]["LD"]) == (4.0, 2.0, 4.0)


def test_synchronous_compute_counts_as_runtime_execution():
    """Beyond the established tool: ANeuralNetworksExecution_compute is Runtime/Execution
    time (that tool counts only create/free/setInput... here 1 ms, so the 4 ms of CPU
    work inside compute would give a Runtime self-time of -3 ms)."""
    marks = [(5, 5, 1.000, "B|5|[NN_LA_PO]m"), (5, 5, 1.001, "B|5|[NN_LA_PE]run"),
             (5, 5, 1.002, "B|5|[NN_LR_PE]ANeuralNetworksExecution_create"),
             (5, 5, 1.0025, "E|5"),
             (5, 5, 1.003, "B|5|[NN_LR_PIO]ANeuralNetworksExecution_setInput"),
             (5, 5, 1.0035, "E|5"),
             (5, 5, 1.004, "B|5|[NN_LR_PE]ANeuralNetworksExecution_compute"),
             (5, 5, 1.005, "B|5|[NN_LC_PE]conv"), (5, 5, 1.009, "E|5"),
             (5, 5, 1.012, "E|5"), (5, 5, 1.013, "E|5"), (5, 5, 1.014, "E|5")]
    [run] = parse_systrace.summarize(_trace(*marks))
    assert run.times["PE"]["LR"] == pytest.approx(9.0)       # 0.5 + 0.5 + 8 ms
    assert run.times["PE"]["LC"] == pytest.approx(4.0)
    assert run.self_times["PE"]["LR"] == pytest.approx(5.0)  # 9 ms less the CPU's 4 ms
    assert run.self_times["PE"]["LA"] == pytest.approx(3.0)  # 12 ms less the Runtime's 9
    assert run.execution_counts["PO"] == 1


def test_summarize_returns_runs_as_data():
    trace = _trace((5, 5, 1.0, "B|5|[NN_LA_PO]m"), (5, 5, 1.1, "B|5|[NN_LR_PC]c"),
                   (5, 5, 1.2, "E|5"), (5, 5, 1.5, "E|5"),
                   (5, 5, 2.0, "B|5|[NN_LA_PO]n"), (5, 5, 2.5, "E|5"))
    runs = parse_systrace.summarize(trace)
    assert [run.starting_mark for run in runs] == ["B|5|[NN_LA_PO]m", "B|5|[NN_LA_PO]n"]
    assert runs[0].times["PC"]["LR"] == pytest.approx(100.0)
    assert "NNAPI timing summary" in parse_systrace.render_text(runs[0])


def test_unfinished_run_is_incomplete_and_renders_nothing():
    warnings = []
    runs = parse_systrace.summarize(_trace((5, 5, 1.0, "B|5|[NN_LR_PC]c")),
                                    warn=warnings.append)
    assert [run.complete for run in runs] == [False]
    assert parse_systrace.render_text(runs[0]) == ""
    assert warnings[-1] == "Incomplete trace, not able to print all statistics\n"


def test_two_client_processes_are_split_with_per_process():
    marks = []
    for tgid, start in ((100, 1.0), (200, 3.0)):
        marks += [(tgid, tgid, start, f"B|{tgid}|[NN_LA_PO]m{tgid}"),
                  (tgid, tgid, start + 0.1, f"B|{tgid}|[NN_LR_PC]c"),
                  (tgid, tgid, start + 0.2, f"E|{tgid}"), (tgid, tgid, start + 0.5, f"E|{tgid}")]
    warnings = []
    merged = parse_systrace.summarize(_trace(*marks), warn=warnings.append)
    assert any("merges 2 client processes" in w for w in warnings)
    split = parse_systrace.summarize(_trace(*marks), per_process=True)
    assert [(run.process, run.starting_mark) for run in split] == [
        (100, "B|100|[NN_LA_PO]m100"), (200, "B|200|[NN_LA_PO]m200")]
    assert len(merged) == 2


def test_missing_and_empty_files_are_one_line_errors(tmp_path, capsys):
    from nnscope.parse_systrace.__main__ import main
    empty = tmp_path / "empty.html"
    empty.write_bytes(b"")
    for path in (tmp_path / "missing.html", empty):
        assert main([str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"parse_systrace: error: {path}:") and err.count("\n") == 1


def test_print_detail_prints_call_trees(tmp_path, capsys):
    from nnscope.parse_systrace.__main__ import main
    trace = tmp_path / "t.txt"
    trace.write_bytes(_trace((5, 5, 1.0, "B|5|[NN_LA_PO]m"), (5, 5, 1.1, "B|5|[NN_LR_PC]c"),
                             (5, 5, 1.2, "E|5"), (5, 5, 1.5, "E|5")).getvalue())
    assert main(["--print-detail", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "thread 5 (process 5, app)" in out and "[NN_LR_PC]c  [PO_LR_PC]" in out


def test_bad_row_in_an_unchecked_block_shows_only_the_error(tmp_path, capsys):
    from nnscope.parse_systrace.__main__ import main
    trace = tmp_path / "t.txt"
    good = _trace((5, 5, 1.0, "B|5|[NN_LA_PO]m"), (5, 5, 1.1, "E|5"),
                  (5, 5, 2.0, "B|5|[NN_LA_PO]n")).getvalue()
    trace.write_bytes(good + b"junk tracing_mark_write: E|5\n")
    assert main([str(trace)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"parse_systrace: error: {trace}:line 5: cannot parse trace row: " \
                           "junk tracing_mark_write: E|5\n"


def test_old_layout_row_in_a_current_block_is_tracked_as_when_checked():
    from nnscope.parse_systrace._engine import iter_runs
    from nnscope.parse_systrace.readers import open_rows
    trace = _trace((5, 5, 1.0, "B|5|[NN_LA_PO]m"), (5, 5, 1.1, "B|5|[NN_LR_PC]c"),
                   (5, 5, 1.2, "E|5"), (5, 5, 1.5, "E|5")).getvalue()
    old = (b"   bench-1-9 [005] ...1  1.300000: tracing_mark_write: B|9|[NN_LR_PC]f\n"
           b"   bench-1-9 [005] ...1  1.400000: tracing_mark_write: E\n")
    data = trace + old
    source = open_rows(io.BytesIO(data))
    checked = list(iter_runs(source.batches, tracking=source.tracking_rows,
                             raw=source.raw_batches))
    runs = parse_systrace.summarize(io.BytesIO(data))
    assert [run.times for run in runs] == [run.times for run in checked]
    assert runs[0].times["PC"]["LR"] == pytest.approx(200.0)
