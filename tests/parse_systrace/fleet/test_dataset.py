"""The dataset: each trace written once, every table queryable even when empty, parts complete."""
from __future__ import annotations

from nnscope.parse_systrace.fleet.dataset import Writer, known_files, query, read_meta


def _result(trace_id: str, path: str = "/lab/a.txt") -> dict:
    phases = {"trace_id": [trace_id], "run": [0], "app_phase": [""], "phase": ["PE"], "layer": ["LD"],
              "time_ms": [2.0], "self_ms": [1.5]}
    run = dict(trace_id=trace_id, run=0, starting_mark="B|1|[NN_LA_PO]m", model="m",
               warmup_and_benchmark=False, executions_po=1, executions_pwu=0, executions_pbm=0)
    return dict(path=path, size_bytes=10, mtime_ns=5, trace_id=trace_id, format="ftrace", driver=None,
                parse_s=0.1, runs=[run], phases=phases, error=None)


def test_a_retried_task_is_written_once(tmp_path):
    writer = Writer(tmp_path, ["device"])
    assert writer.add(_result("t1"), {"device": "p6"})
    assert not writer.add(_result("t1"), {"device": "p6"})  # the same trace again
    writer.close()
    assert query(tmp_path, "SELECT count(*) FROM traces")[1] == [(1,)]
    assert query(tmp_path, "SELECT count(*) FROM phases")[1] == [(1,)]
    again = Writer(tmp_path, [], known_ids=known_files(tmp_path)[1])
    assert not again.add(_result("t1", "/lab/copy.txt"), {})
    assert again.duplicates == 1


def test_an_empty_table_has_its_columns(tmp_path):
    Writer(tmp_path, ["device", "build"]).close()
    assert query(tmp_path, "SELECT * FROM errors")[0] == [
        "path", "trace_id", "size_bytes", "mtime_ns", "reason", "device", "build"]
    assert query(tmp_path, "SELECT count(*) FROM phases")[1] == [(0,)]


def test_parts_are_renamed_into_place_and_keys_accumulate(tmp_path):
    writer = Writer(tmp_path, ["device"])
    writer.add(_result("t1"), {"device": "p6"})
    writer.close()
    writer = Writer(tmp_path, ["rack"])
    writer.add(_result("t2", "/lab/b.txt"), {"device": "p7", "rack": "r1"})
    writer.close()
    assert read_meta(tmp_path)["keys"] == ["device", "rack"]
    assert not list(tmp_path.rglob(".*.tmp"))
    assert query(tmp_path, "SELECT trace_id, device, rack FROM traces ORDER BY 1")[1] == [
        ("t1", "p6", None), ("t2", "p7", "r1")]
    assert known_files(tmp_path)[0] == {("/lab/a.txt", 10, 5), ("/lab/b.txt", 10, 5)}
