"""nnscope.vlog.log: gating, lazy formatting, logger names and levels."""
import io
import logging

import pytest

from nnscope import vlog


class Counting:
    """An argument that counts how often it is formatted."""

    def __init__(self):
        self.calls = 0

    def __str__(self):
        self.calls += 1
        return "counted"


class Exploding:
    def __str__(self):
        raise AssertionError("formatted while off")

    __repr__ = __str__


def test_off_formats_nothing(caplog):
    arg = Counting()
    with caplog.at_level(logging.DEBUG):
        with vlog.override("model"):
            vlog.log("execution", "ExecutionPlan", "value %s", arg)
            vlog.log("execution", "ExecutionPlan", "%s %r", Exploding(), Exploding())
    assert arg.calls == 0
    assert caplog.records == []


def test_on_formats_once():
    stream = io.StringIO()
    vlog.configure_logging(stream, log_tags="")
    arg = Counting()
    with vlog.override("execution"):
        vlog.log("execution", "ExecutionPlan", "value %s %d", arg, 7)
    assert stream.getvalue().endswith("I ExecutionPlan: value counted 7\n")
    assert arg.calls == 1


def test_filtered_out_by_android_log_tags_formats_nothing():
    stream = io.StringIO()
    vlog.configure_logging(stream, log_tags="ExecutionPlan:S")
    with vlog.override("execution"):
        vlog.log("execution", "ExecutionPlan", "%s", Exploding())
    assert stream.getvalue() == ""


def test_record_is_info_on_nn_logger_with_caller_location(caplog):
    with caplog.at_level(logging.DEBUG), vlog.override("all"):
        vlog.log("cpuexe", "CpuExecutor", "op %s", "ADD")
    (record,) = caplog.records
    assert record.name == "nn.CpuExecutor"
    assert record.levelno == logging.INFO
    assert record.nn_tag == "CpuExecutor"
    assert record.funcName == "test_record_is_info_on_nn_logger_with_caller_location"


def test_each_tag_gates_only_itself(caplog):
    with caplog.at_level(logging.DEBUG), vlog.override("compilation, driver"):
        for tag in vlog.TAGS:
            vlog.log(tag, "Tag", "%s", tag)
    assert [r.getMessage() for r in caplog.records] == ["compilation", "driver"]


def test_info_shows_even_when_root_level_is_warning(caplog):
    root = logging.getLogger()
    saved = root.level
    root.setLevel(logging.WARNING)
    try:
        with vlog.override("execution"):
            vlog.log("execution", "ExecutionBuilder", "visible")
    finally:
        root.setLevel(saved)
    assert [r.getMessage() for r in caplog.records] == ["visible"]


def test_unknown_tag_raises_even_when_off():
    with pytest.raises(ValueError):
        vlog.log("exec", "ExecutionPlan", "x")
