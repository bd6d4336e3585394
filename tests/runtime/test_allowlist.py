"""The extensions allowlist (``runtime._allowlist``): locations, allowlisted binaries and
packages, and a missing, empty or malformed file, with real files and real subprocesses that
read the environment as a program would."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from nnscope.runtime._allowlist import (ALLOWLIST_NAME, NNSCOPE_APP_PACKAGE, NNSCOPE_DATA_DIR,
                                NNSCOPE_EXTENSIONS_ALLOWLIST, NNSCOPE_ODM_DIR, NNSCOPE_PRODUCT_DIR,
                                NNSCOPE_SYSTEM_DIR, NNSCOPE_VENDOR_DIR, Policy, default_path,
                                read_allowlist)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def tree(tmp_path):
    """system/vendor/product/odm/data locations and an app outside all of them."""
    dirs = {name: tmp_path / name for name in ("system", "vendor", "product", "odm", "data", "opt")}
    for path in dirs.values():
        (path / "bin").mkdir(parents=True)
    env = {NNSCOPE_SYSTEM_DIR: str(dirs["system"]), NNSCOPE_VENDOR_DIR: str(dirs["vendor"]),
           NNSCOPE_PRODUCT_DIR: str(dirs["product"]), NNSCOPE_ODM_DIR: str(dirs["odm"]),
           NNSCOPE_DATA_DIR: str(dirs["data"])}
    return dirs, env


def _allowlist(tmp_path, text: str) -> str:
    path = tmp_path / ALLOWLIST_NAME
    path.write_text(text)
    return str(path)


def _allowed(env, identity) -> bool:
    return Policy.from_environ(env, identity=str(identity)).allowed()


def test_matrix_of_locations_and_entries(tree, tmp_path):
    dirs, env = tree
    system_app, opt_app = dirs["system"] / "bin" / "app", dirs["opt"] / "bin" / "app"
    listed = _allowlist(tmp_path, f"{system_app}\n{opt_app}\ncom.example.listed\n")
    env = {**env, NNSCOPE_EXTENSIONS_ALLOWLIST: listed}
    assert not _allowed(env, system_app)  # system: never, even when listed
    for location in ("vendor", "product", "odm", "data"):  # those locations: always
        assert _allowed(env, dirs[location] / "bin" / "tool")
    assert _allowed(env, opt_app)  # a listed native binary
    assert not _allowed(env, dirs["opt"] / "bin" / "other")  # not listed
    assert _allowed({**env, NNSCOPE_APP_PACKAGE: "com.example.listed"}, dirs["opt"] / "bin" / "x")
    assert not _allowed({**env, NNSCOPE_APP_PACKAGE: "com.example.unlisted"}, dirs["opt"] / "bin" / "x")
    assert not _allowed({**env, NNSCOPE_APP_PACKAGE: "com.example.listed"}, dirs["system"] / "bin" / "y")


def test_missing_empty_and_malformed_files(tree, tmp_path, caplog):
    dirs, env = tree
    app = dirs["opt"] / "bin" / "app"
    missing = {**env, NNSCOPE_EXTENSIONS_ALLOWLIST: str(tmp_path / "absent")}
    assert read_allowlist(str(tmp_path / "absent")) == () and not _allowed(missing, app)
    empty = {**env, NNSCOPE_EXTENSIONS_ALLOWLIST: _allowlist(tmp_path, "")}
    assert not _allowed(empty, app)
    assert _allowed(empty, dirs["vendor"] / "bin" / "app")  # locations do not need the file
    text = f"relative/path\nnot a package\n  {app}  \n# comment\n\n/with space/x\ncom.\n\x00\n"
    path = _allowlist(tmp_path, text)
    with caplog.at_level(logging.WARNING, logger="nn.TypeManager"):
        assert read_allowlist(path) == (str(app),)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 5 and all(path in w and "malformed" in w for w in warnings)
    assert any(f"{path}:1:" in w for w in warnings)
    assert _allowed({**env, NNSCOPE_EXTENSIONS_ALLOWLIST: path}, app)
    binary = tmp_path / "binary"
    binary.write_bytes(bytes(range(256)) * 4)
    assert read_allowlist(str(binary)) == ()


def test_default_path_is_under_the_vendor_location(tree):
    _, env = tree
    assert default_path(env) == os.path.join(env[NNSCOPE_VENDOR_DIR], "etc", ALLOWLIST_NAME)
    assert default_path({}) == "/vendor/etc/nnapi_extensions_app_allowlist"
    assert default_path({NNSCOPE_EXTENSIONS_ALLOWLIST: "/x/list"}) == "/x/list"


_PROBE = """
import sys
from nnscope.runtime import Model, NnError
from nnscope.runtime.drivers.fibonacci import FibonacciDriver
print(FibonacciDriver().get_extension_support("com.example.fibonacci"))
try:
    Model().get_extension_operand_type("com.example.fibonacci", 0)
    print("type ok")
except NnError as error:
    print(error.code.name, error.message)
"""


def _probe(tmp_path, location_dir, env) -> list[str]:
    """Run the probe as a script in ``location_dir`` (its identity is the script path)."""
    script = location_dir / "bin" / "probe.py"
    script.write_text(_PROBE)
    base = {k: v for k, v in os.environ.items() if not k.startswith("NNSCOPE_")}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={**base, **env}, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_programs_read_the_environment(tree, tmp_path):
    dirs, env = tree
    listed = _allowlist(tmp_path, f"{dirs['opt'] / 'bin' / 'probe.py'}\n")
    env = {**env, NNSCOPE_EXTENSIONS_ALLOWLIST: listed}
    assert _probe(tmp_path, dirs["vendor"], env) == ["True", "type ok"]
    assert _probe(tmp_path, dirs["opt"], env) == ["True", "type ok"]
    refused = _probe(tmp_path, dirs["system"], env)
    assert refused[0] == "False" and refused[1].startswith("BAD_DATA")
    assert ALLOWLIST_NAME in refused[1] and "system location" in refused[1]
    other = tmp_path / "elsewhere"
    (other / "bin").mkdir(parents=True)
    unlisted = _probe(tmp_path, other, env)
    assert unlisted[0] == "False" and ALLOWLIST_NAME in unlisted[1] and listed in unlisted[1]
