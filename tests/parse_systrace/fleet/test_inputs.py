"""Inputs and group keys: patterns, globs, manifests."""
from __future__ import annotations

import pytest

from nnscope.parse_systrace.fleet.inputs import expand, keys_from_path


@pytest.mark.parametrize("pattern, path, keys", [
    ("{device}/{build}/{model}/*", "pixel6/b1/asr/0001.txt", {"device": "pixel6", "build": "b1", "model": "asr"}),
    ("{device}/{build}/{model}/*", "lab/x/pixel6/b1/asr/0001.txt", {"device": "pixel6", "build": "b1", "model": "asr"}),
    ("{device}/{build}/{model}/*", "b1/asr/0001.txt", {"device": None, "build": None, "model": None}),
    ("{device}/**/{model}_*.html", "pixel6/nightly/7/asr_3.html", {"device": "pixel6", "model": "asr"}),
    ("{device}/**/{model}_*.html", "pixel6/asr_3.html", {"device": "pixel6", "model": "asr"}),
])
def test_keys_from_path(pattern, path, keys):
    assert keys_from_path(pattern, path) == keys


def test_a_key_cannot_take_a_column_name():
    with pytest.raises(ValueError, match="columns of the dataset"):
        keys_from_path("{path}/*", "a/b")


def test_directories_globs_and_manifests(tmp_path):
    for name in ("a/p6/1.txt", "a/p6/2.json", "a/p7/1.txt", "a/.hidden", "b/3.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    names, files = expand([str(tmp_path / "a")], "{device}/*")
    assert names == ["device"]
    assert [(f.path.rpartition("/a/")[2], f.keys["device"]) for f in files] == [
        ("p6/1.txt", "p6"), ("p6/2.json", "p6"), ("p7/1.txt", "p7")]
    _, files = expand([str(tmp_path / "a" / "**" / "*.txt")])
    assert len(files) == 2
    (tmp_path / "m.csv").write_text("path,device,rack\nb/3.txt,p9,r1\na/p6/1.txt,,r2\n")
    names, files = expand([], "{device}/*", str(tmp_path / "m.csv"))
    assert names == ["device", "rack"]
    assert [f.keys for f in files] == [{"device": None, "rack": "r2"}, {"device": "p9", "rack": "r1"}]
    with pytest.raises(ValueError, match="no such file"):
        expand([str(tmp_path / "missing")])
