"""Trace sessions: lifetime, environment, and spans from real child processes."""
import json
import os
import subprocess
import sys
import threading

import pytest

from nnscope import tracing
from nnscope.tracing import NNSCOPE_TRACE, NNSCOPE_TRACE_DIR, Phase, TraceSession, override_environment
from nnscope.tracing import _childfile
from nnscope.tracing.exporters import ExportResult
from nnscope.tracing.exporters.memory import InMemoryExporter
from tests.support.paths import REPO

CHILD = """
import json, sys, threading, tracing
from nnscope.tracing import Phase
tracing.set_process_name("nn-driver")
ids = {"pid": __import__("os").getpid(), "main": threading.get_native_id()}
with tracing.driver(Phase.EXECUTION, "SampleDriver::execute"):
    with tracing.hidl("IExecutionCallback", "notify", "client"):
        pass
def work():
    ids["worker"] = threading.get_native_id()
    with tracing.cpu(Phase.COMPUTATION, "conv2dFloat32"):
        pass
thread = threading.Thread(target=work, name="nn-worker")
thread.start(); thread.join()
if sys.argv[1] == "flush":
    print("written", tracing.flush(), file=sys.stderr)
print(json.dumps(ids))
"""


def run_child(mode, env):
    done = subprocess.run([sys.executable, "-c", CHILD, mode], env={**os.environ, **env},
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def names(track):
    return [name for _, name in track.events]


@pytest.mark.parametrize("mode", ["flush", "atexit"])
def test_child_process_spans_join_the_session(mode):
    with TraceSession() as session:
        assert session_env_of(session) == tracing.session_env()
        with tracing.ipc(Phase.EXECUTION, "execute") :
            ids = run_child(mode, tracing.session_env())
    trace = session.collect()
    assert trace.processes == {os.getpid(): trace.processes[os.getpid()],
                               ids["pid"]: "nn-driver"}
    tracks = {(t.pid, t.tid): t for t in trace.threads}
    parent = tracks[(os.getpid(), threading.get_native_id())]
    main, worker = tracks[(ids["pid"], ids["main"])], tracks[(ids["pid"], ids["worker"])]
    assert (main.name, worker.name) == ("MainThread", "nn-worker")
    assert names(main) == ["[NN_LD_PE]SampleDriver::execute",
                           "HIDL::IExecutionCallback::notify::client", None, None]
    assert names(worker) == ["[NN_LC_PCO]conv2dFloat32", None]
    # one monotonic clock: the child's events lie inside the parent's enclosing scope
    begin, end = parent.events[0][0], parent.events[-1][0]
    child_times = [ts for ts, _ in main.events + worker.events]
    assert begin < min(child_times) and max(child_times) < end
    assert [ts for ts, _ in main.events] == sorted(ts for ts, _ in main.events)
    assert main.events[-1][0] <= worker.events[0][0]
    assert not os.path.exists(session.directory)


def session_env_of(session):
    return {NNSCOPE_TRACE_DIR: session.directory}


def test_child_without_session_env_is_not_traced(tmp_path):
    with TraceSession(tmp_path) as session:
        run_child("flush", {NNSCOPE_TRACE_DIR: ""})
    assert {t.pid for t in session.collect().threads} <= {os.getpid()}
    assert list(tmp_path.iterdir()) == []


def test_session_env_is_empty_without_a_session():
    assert tracing.session_env() == {}


def test_collect_after_stop_is_kept_and_new_events_are_not_added():
    session = TraceSession().start()
    with tracing.runtime(Phase.EXECUTION, "in"):
        pass
    trace = session.stop()
    with TraceSession() as other:
        with tracing.runtime(Phase.EXECUTION, "later"):
            pass
    assert session.collect() is trace
    assert [n for t in trace.threads for _, n in t.events] == ["[NN_LR_PE]in", None]
    assert [n for t in other.collect().threads for _, n in t.events] == ["[NN_LR_PE]later", None]


def test_session_started_inside_open_scope_drops_the_orphan_end():
    with TraceSession() as outer:
        with tracing.application(Phase.OVERALL, "run"):
            with TraceSession() as inner:
                with tracing.runtime(Phase.EXECUTION, "x"):
                    pass
        assert tracing.enabled()
    assert [n for t in inner.collect().threads for _, n in t.events] == ["[NN_LR_PE]x", None]
    assert inner.directory == outer.directory
    assert outer.collect().span_count() == 2


def test_session_starts_once():
    session = TraceSession().start()
    session.stop()
    with pytest.raises(RuntimeError):
        session.start()


def test_export_by_extension_and_to_an_exporter(tmp_path):
    with TraceSession() as session:
        with tracing.runtime(Phase.EXECUTION, "x"):
            pass
    for name in ("t.json", "t.txt", "t.html"):
        assert session.export(tmp_path / name) is ExportResult.SUCCESS
        assert "[NN_LR_PE]x" in (tmp_path / name).read_text()
    memory = InMemoryExporter()
    assert session.export(memory) is ExportResult.SUCCESS and memory.last is session.collect()
    with pytest.raises(ValueError, match="cannot tell the trace format"):
        session.export(tmp_path / "t.xyz")


def test_trace_dir_env_makes_this_process_a_contributor(tmp_path):
    assert tracing.flush() == 0
    with override_environment({NNSCOPE_TRACE_DIR: str(tmp_path)}):
        assert tracing.enabled()
        assert tracing.session_env() == {NNSCOPE_TRACE_DIR: str(tmp_path)}
        with tracing.runtime(Phase.PREPARATION, "x"):
            pass
        assert tracing.flush() == 2
        assert tracing.flush() == 0
    assert not tracing.enabled()
    tracks, processes = _childfile.read_tracks(tmp_path)
    assert [names(t) for t in tracks] == [["[NN_LR_PP]x", None]]
    assert list(processes) == [os.getpid()]


def test_reader_skips_a_partial_last_line(tmp_path):
    with override_environment({NNSCOPE_TRACE_DIR: str(tmp_path)}):
        with tracing.runtime(Phase.PREPARATION, "x"):
            pass
        tracing.flush()
    with open(_childfile.file_for(tmp_path, os.getpid()), "a") as out:
        out.write('{"v":1,"pid":1,"tid":1,"thread":"t","process":"p","events":[[1,"y"]')
    tracks, _ = _childfile.read_tracks(tmp_path)
    assert [names(t) for t in tracks] == [["[NN_LR_PP]x", None]]


def test_trace_env_exports_at_exit(tmp_path):
    output = tmp_path / "program.txt"
    with override_environment({NNSCOPE_TRACE: str(output)}):
        assert tracing.enabled()
        with tracing.application(Phase.OVERALL, "whole"):
            pass
        assert not output.exists()
    assert not tracing.enabled()
    assert "B|%d|[NN_LA_PO]whole" % os.getpid() in output.read_text()


def test_trace_env_with_unknown_format_is_ignored(tmp_path, caplog):
    with override_environment({NNSCOPE_TRACE: str(tmp_path / "out.xyz")}):
        assert not tracing.enabled()
    assert "not traced" in caplog.text


def test_trace_env_in_a_real_program(tmp_path):
    output = tmp_path / "program.json"
    code = ("from nnscope import tracing\nfrom tracing import Phase\n"
            "with tracing.application(Phase.OVERALL, 'whole'): pass\n")
    env = {**os.environ, NNSCOPE_TRACE: str(output)}
    env.pop(NNSCOPE_TRACE_DIR, None)
    subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, check=True, timeout=60)
    events = json.loads(output.read_text())["traceEvents"]
    assert [e["name"] for e in events if e["ph"] == "B"] == ["[NN_LA_PO]whole"]


def test_trace_env_applies_however_the_recorder_is_reached(tmp_path):
    """The package loads its recorder lazily: the naming contract alone loads none of it, and a
    program that goes straight to ``tracing.tracer`` is still traced by NNSCOPE_TRACE."""
    output = tmp_path / "direct.json"
    code = ("import sys, tracing.naming\n"
            "assert 'nnscope.tracing.tracer' not in sys.modules and 'nnscope.tracing.session' not in sys.modules\n"
            "from nnscope.tracing.tracer import hot_recorder\n"
            "append, extend, now = hot_recorder()\n"
            "extend(('[NN_LR_PE]', 'direct', now())); append(now())\n")
    env = {**os.environ, NNSCOPE_TRACE: str(output)}
    env.pop(NNSCOPE_TRACE_DIR, None)
    subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, check=True, timeout=60)
    events = json.loads(output.read_text())["traceEvents"]
    assert [e["name"] for e in events if e["ph"] == "B"] == ["[NN_LR_PE]direct"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_joins_the_session():
    with TraceSession() as session:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            with tracing.driver(Phase.EXECUTION, "forked"):
                pass
            os._exit(0 if tracing.flush() == 2 else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    [track] = [t for t in session.collect().threads if t.pid == pid]
    assert names(track) == ["[NN_LD_PE]forked", None]


def test_a_child_outliving_its_session_exits_quietly(tmp_path):
    """A driver process outlives the ``TraceSession`` that started it (the session removed its
    directory): at exit it has nothing to join and says nothing (issue 27: 7 errors at exit)."""
    with tracing.TraceSession() as session:
        directory = session.directory
        env = {**os.environ, **session.env()}
        code = ("import sys, tracing\nfrom tracing import Phase\n"
                "with tracing.application(Phase.OVERALL, 'during'): pass\n"
                "assert tracing.flush() == 2\n"
                "print('flushed', flush=True)\n"
                "sys.stdin.readline()  # the session ends meanwhile\n"
                "with tracing.application(Phase.OVERALL, 'after'): pass\n")
        child = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=REPO, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "flushed\n", child.stderr.read()
        names = [e[1] for t in session.collect().threads for e in t.events if e[1] is not None]
    assert not os.path.exists(directory)
    _, stderr = child.communicate("go\n", timeout=60)  # it records once more, flushes at exit
    assert child.returncode == 0 and stderr == ""
    assert "[NN_LA_PO]during" in names
