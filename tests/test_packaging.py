"""The built wheel claims only the name ``nnscope`` (issue 26): every folder installs as
``nnscope.<folder>``, and the console scripts and exporter entry points point inside it."""
from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile

import pytest

from tests.support.paths import REPO

FOLDERS = ("runtime", "tracing", "parse_systrace", "vlog", "timing", "dashboards")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    (path,) = out.glob("nnscope-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_has_no_top_level_name_but_nnscope(wheel):
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {top for top in tops if not top.startswith("nnscope-")} == {"nnscope"}


def test_every_folder_installs_under_nnscope_with_its_data(wheel):
    names = set(wheel.namelist())
    assert {f"nnscope/{folder}/__init__.py" for folder in FOLDERS} <= names
    assert "nnscope/runtime/cts/vectors/index.json" in names
    assert any(name.startswith("nnscope/dashboards/assets/") for name in names)


def test_scripts_and_exporter_entry_points_point_inside_nnscope(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(wheel.read(entry_points).decode())
    assert set(parser["console_scripts"]) == {"nnscope", "parse_systrace", "nnscope-dashboard"}
    targets = [*parser["console_scripts"].values(), *parser["nnscope.trace_exporters"].values()]
    assert all(target.startswith("nnscope.") for target in targets), targets
