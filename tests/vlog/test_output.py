"""nnscope's handler: logcat threadtime format, ANDROID_LOG_TAGS filter, idempotence."""
import datetime
import io
import logging
import os
import re
import threading

import pytest

from nnscope import vlog
from nnscope.vlog import _logcat

THREADTIME = re.compile(
    r"^(?P<month>\d\d)-(?P<day>\d\d) \d\d:\d\d:\d\d\.\d{3} +(?P<pid>\d+) +(?P<tid>\d+) "
    r"(?P<level>[VDIWEF]) (?P<tag>\S+) *: (?P<message>.*)$")


def lines(stream):
    return stream.getvalue().splitlines()


def test_threadtime_format_with_real_pid_and_tid():
    stream = io.StringIO()
    vlog.configure_logging(stream, log_tags="")
    seen = {}

    def worker():
        seen["tid"] = threading.get_native_id()
        vlog.log("execution", "ExecutionPlan", "step %d of %s", 3, "plan")

    with vlog.override("execution"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    (line,) = lines(stream)
    match = THREADTIME.match(line)
    assert match, line
    today = datetime.datetime.now()
    assert (int(match["month"]), int(match["day"])) == (today.month, today.day)
    assert int(match["pid"]) == os.getpid()
    assert int(match["tid"]) == seen["tid"] != threading.get_native_id()
    assert (match["level"], match["tag"], match["message"]) == ("I", "ExecutionPlan", "step 3 of plan")


def test_short_tag_is_padded_like_logcat_and_multiline_repeats_header():
    stream = io.StringIO()
    vlog.configure_logging(stream, log_tags="")
    with vlog.override("manager"):
        vlog.log("manager", "Manager", "one\ntwo")
    first, second = lines(stream)
    assert first.endswith(" I Manager : one") and second.endswith(" I Manager : two")
    assert first[:-3] == second[:-3]


@pytest.mark.parametrize("level, letter", [(5, "V"), (logging.DEBUG, "D"), (logging.INFO, "I"),
                                           (logging.WARNING, "W"), (logging.ERROR, "E"),
                                           (logging.CRITICAL, "F")])
def test_level_letters(level, letter):
    stream = io.StringIO()
    vlog.configure_logging(stream, log_tags="")
    logger = logging.getLogger("nn.SampleDriver")
    logger.setLevel(1)
    try:
        logger.log(level, "msg")
    finally:
        logger.setLevel(logging.NOTSET)
    (line,) = lines(stream)
    assert THREADTIME.match(line)["level"] == letter


def emit_all(stream, spec):
    vlog.configure_logging(stream, log_tags=spec)
    with vlog.override("all"):
        vlog.log("execution", "ExecutionPlan", "plan")
        vlog.log("cpuexe", "CpuExecutor", "cpu")
        vlog.log("manager", "Manager", "manager")
    return [THREADTIME.match(line)["message"] for line in lines(stream)]


@pytest.mark.parametrize("spec, expected", [
    ("", ["plan", "cpu", "manager"]),
    ("ExecutionPlan:V CpuExecutor:S *:S", ["plan"]),
    ("CpuExecutor:S", ["plan", "manager"]),
    ("*:W", []),
    ("*:w ExecutionPlan:i", ["plan"]),
    ("* CpuExecutor:E", ["plan", "manager"]),
    ("ExecutionPlan *:S", ["plan"]),
])
def test_android_log_tags_filter(spec, expected):
    assert emit_all(io.StringIO(), spec) == expected


def test_android_log_tags_read_from_environment(monkeypatch):
    monkeypatch.setenv(vlog.ANDROID_LOG_TAGS, "Manager:I *:S")
    assert emit_all(io.StringIO(), None) == ["manager"]


def test_malformed_rules_are_skipped_with_a_warning():
    rules = _logcat.parse_log_tags("ExecutionPlan:Q :V CpuExecutor:S")
    assert rules.rejected == ("ExecutionPlan:Q", ":V")
    assert rules.per_tag == {"CpuExecutor": _logcat.SILENT}
    stream = io.StringIO()
    vlog.configure_logging(stream, log_tags="ExecutionPlan:Q")
    (line,) = lines(stream)
    match = THREADTIME.match(line)
    assert (match["level"], match["tag"]) == ("W", "VLog")
    assert "ExecutionPlan:Q" in match["message"]


def test_configure_is_idempotent_and_stops_duplicates():
    app_stream = io.StringIO()
    app_handler = logging.StreamHandler(app_stream)
    logging.getLogger().addHandler(app_handler)
    try:
        vlog.configure_logging(io.StringIO(), log_tags="")
        stream = io.StringIO()
        handler = vlog.configure_logging(stream, log_tags="")
        with vlog.override("model"):
            vlog.log("model", "ModelBuilder", "once")
    finally:
        logging.getLogger().removeHandler(app_handler)
    ours = [h for h in logging.getLogger("nn").handlers if isinstance(h, _logcat.NnHandler)]
    assert ours == [handler]
    assert len(lines(stream)) == 1 and app_stream.getvalue() == ""


def test_default_stream_follows_sys_stderr(capsys):
    vlog.configure_logging(log_tags="")
    with vlog.override("driver"):
        vlog.log("driver", "SampleDriver", "to stderr")
    assert capsys.readouterr().err.rstrip().endswith("I SampleDriver: to stderr")


def test_reset_logging_restores_nn_logger():
    vlog.configure_logging(io.StringIO(), log_tags="")
    vlog.reset_logging()
    nn = logging.getLogger("nn")
    assert nn.propagate and nn.level == logging.NOTSET
    assert not any(isinstance(h, _logcat.NnHandler) for h in nn.handlers)
