"""The NN_VLOG grammar: separators, 1/all, unknown tags, case, and the bitmask."""
import logging

import pytest

from nnscope import vlog


def enabled():
    return {tag for tag in vlog.TAGS if vlog.is_on(tag)}


def vlog_warnings(caplog):
    return [r for r in caplog.records if r.levelno == logging.WARNING and "NN_VLOG" in r.getMessage()]


def test_tags_are_aosp_order_and_bits():
    assert vlog.TAGS == ("model", "compilation", "execution", "cpuexe", "manager", "driver")
    for index, tag in enumerate(vlog.TAGS):
        assert vlog.reload(tag) == 1 << index


@pytest.mark.parametrize("value", ["", "   ", " , : "])
def test_empty_is_off(value):
    vlog.reload("all")
    assert vlog.reload(value) == 0
    assert enabled() == set()


def test_unset_env_is_off(monkeypatch):
    monkeypatch.delenv(vlog.NN_VLOG, raising=False)
    vlog.reload("all")
    assert vlog.reload() == 0


def test_reads_env_var(monkeypatch):
    monkeypatch.setenv(vlog.NN_VLOG, "manager")
    vlog.reload()
    assert enabled() == {"manager"}
    assert vlog.NN_VLOG == "NN_VLOG"


@pytest.mark.parametrize("value", ["1", "all", "ALL", "All", "model 1", "driver,all"])
def test_everything(value):
    vlog.reload(value)
    assert enabled() == set(vlog.TAGS)


def test_mixed_separators():
    vlog.reload("model, execution:cpuexe  driver,,manager")
    assert enabled() == {"model", "execution", "cpuexe", "driver", "manager"}


def test_case_is_ignored():
    vlog.reload("Execution COMPILATION")
    assert enabled() == {"execution", "compilation"}


def test_unknown_tag_warns_once_and_known_tags_apply(caplog):
    with caplog.at_level(logging.WARNING):
        vlog.reload("model bogus execution bogus")
    (warning,) = vlog_warnings(caplog)
    message = warning.getMessage()
    assert "'bogus'" in message
    assert all(tag in message for tag in vlog.TAGS)
    assert enabled() == {"model", "execution"}


def test_several_unknown_tags_share_one_warning(caplog):
    with caplog.at_level(logging.WARNING):
        vlog.reload("foo:bar")
    (warning,) = vlog_warnings(caplog)
    assert "'foo'" in warning.getMessage() and "'bar'" in warning.getMessage()
    assert enabled() == set()


def test_known_tags_do_not_warn(caplog):
    with caplog.at_level(logging.WARNING):
        vlog.reload("all model")
    assert vlog_warnings(caplog) == []


def test_is_on_rejects_unknown_tag():
    with pytest.raises(ValueError, match="valid tags: model, compilation"):
        vlog.is_on("memory")


def test_override_scopes_and_restores():
    vlog.reload("model")
    with vlog.override("all") as mask:
        assert mask == (1 << len(vlog.TAGS)) - 1
        with vlog.override("driver"):
            assert enabled() == {"driver"}
        assert enabled() == set(vlog.TAGS)
    assert enabled() == {"model"}


def test_override_restores_after_exception():
    with pytest.raises(RuntimeError):
        with vlog.override("execution"):
            raise RuntimeError
    assert enabled() == set()


def test_override_is_strict():
    with pytest.raises(ValueError, match="'exec'"):
        with vlog.override("exec"):
            pass  # pragma: no cover
