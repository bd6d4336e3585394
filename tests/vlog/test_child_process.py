"""Real child processes: NN_VLOG is read at import and lines reach stderr once."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from nnscope import vlog

REPO = Path(__file__).resolve().parents[2]
THREADTIME = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +(\d+) +(\d+) I (\S+) *: (.*)$")

LOGS = """
from nnscope import vlog
vlog.log("execution", "ExecutionPlan", "plan %d step %s", 2, "ADD")
vlog.log("model", "ModelBuilder", "must not appear")
vlog.log("cpuexe", "CpuExecutor", "must not appear either")
"""


def run_child(code, nn_vlog, **extra_env):
    env = {k: v for k, v in os.environ.items()
           if k not in (vlog.NN_VLOG, vlog.ANDROID_LOG_TAGS, vlog.VLOG_WARNED)}
    env.update({vlog.NN_VLOG: nn_vlog, **extra_env})
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return proc.pid, out, err.splitlines()


def test_child_with_execution_tag_logs_threadtime_to_stderr():
    pid, out, err = run_child(LOGS, "execution")
    assert out == ""
    (line,) = err
    child_pid, tid, tag, message = THREADTIME.match(line).groups()
    assert int(child_pid) == pid
    assert int(tid) == pid  # the main thread's TID is the PID on Linux
    assert (tag, message) == ("ExecutionPlan", "plan 2 step ADD")


def test_child_with_vlog_off_prints_nothing():
    _, _, err = run_child(LOGS, "")
    assert err == []


def test_child_unknown_tag_warns_once_and_keeps_known_tags():
    _, _, err = run_child(LOGS, "bogus execution bogus")
    warnings = [line for line in err if "bogus" in line]
    assert len(warnings) == 1 and "valid tags" in warnings[0]
    assert [THREADTIME.match(line).group(3) for line in err if line not in warnings] == [
        "ExecutionPlan"]


def test_a_run_warns_once_not_once_per_driver_process():
    """Issue 37: ``NN_VLOG=bogus nnscope run`` printed the warning 9 times, once per process."""
    env = {k: v for k, v in os.environ.items() if k != vlog.VLOG_WARNED}
    done = subprocess.run([sys.executable, "-m", "nnscope.runtime", "run", "--executions", "1",
                           "--warmup", "0", "--no-summary"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**env, vlog.NN_VLOG: "bogus"})
    assert done.returncode == 0, done.stderr
    assert "plan: step 0: " in done.stdout  # a driver process ran the model
    assert [line for line in done.stderr.splitlines() if "bogus" in line] == [
        "NN_VLOG: ignoring unknown tag(s) 'bogus'; valid tags: 1, all, model, compilation, "
        "execution, cpuexe, manager, driver, partition"]


def test_a_child_of_a_process_that_warned_does_not_warn_again():
    parent = "import subprocess, sys\nfrom nnscope import vlog\nsubprocess.run([sys.executable, '-c', 'import nnscope.vlog'])\n"
    _, _, err = run_child(parent, "bogus")
    assert len([line for line in err if "bogus" in line]) == 1, err
    _, _, err = run_child("import nnscope.vlog", "bogus", NNSCOPE_VLOG_WARNED="other")
    assert len([line for line in err if "bogus" in line]) == 1, err  # another value still warns


def test_child_android_log_tags_silences_tag():
    _, _, err = run_child(LOGS, "all", ANDROID_LOG_TAGS="ModelBuilder:I *:S")
    assert [THREADTIME.match(line).group(4) for line in err] == ["must not appear"]


def test_child_that_configured_logging_gets_each_line_once():
    code = 'import logging\nlogging.basicConfig(format="APP %(name)s %(levelname)s %(message)s")'
    code += LOGS
    _, _, err = run_child(code, "execution")
    assert err == ["APP nn.ExecutionPlan INFO plan 2 step ADD"]
