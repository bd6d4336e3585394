"""The CTS vectors ship as package data, and ``nnscope cts`` says clearly when they are absent."""
import fnmatch
import os
import subprocess
import sys
import tomllib

from nnscope.runtime.cts import loader
from tests.support.paths import REPO


def _nnscope_cts(*args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != loader.NNSCOPE_CTS_DIR}
    return subprocess.run([sys.executable, "-m", "nnscope.runtime", "cts", *args], capture_output=True,
                          text=True, cwd=REPO, env={**env, **(env_extra or {})}, timeout=300)


def test_every_vector_file_is_declared_package_data():
    with open(REPO / "pyproject.toml", "rb") as handle:
        globs = tomllib.load(handle)["tool"]["setuptools"]["package-data"]["nnscope.runtime.cts"]
    files = [path.relative_to(loader.PACKAGED_VECTORS.parent).as_posix()
             for path in loader.PACKAGED_VECTORS.rglob("*") if path.is_file()]
    assert len(files) > 600
    assert [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)] == []


def test_the_index_names_only_shipped_files():
    specs = loader.load_index(loader.PACKAGED_VECTORS)["specs"]
    assert len(specs) > 600
    assert all((loader.PACKAGED_VECTORS / spec["file"]).is_file() for spec in specs)


def test_default_is_the_packaged_vectors():
    done = subprocess.run([sys.executable, "-c", "from nnscope.runtime.cli.cts import default_root; "
                           "print(default_root())"], capture_output=True, text=True, cwd=REPO,
                          env={k: v for k, v in os.environ.items() if k != loader.NNSCOPE_CTS_DIR})
    assert done.stdout.strip() == str(loader.PACKAGED_VECTORS)


def test_absent_vectors_give_one_line_naming_the_path_option(tmp_path):
    done = _nnscope_cts(env_extra={loader.NNSCOPE_CTS_DIR: str(tmp_path / "none")})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"nnscope: error: no CTS vectors at {tmp_path / 'none'}")
    assert "PATH" in done.stderr and loader.NNSCOPE_CTS_DIR in done.stderr


def test_explicit_paths_need_no_packaged_vectors(tmp_path):
    vector = loader.PACKAGED_VECTORS / "V1_0" / "add.json.gz"
    done = _nnscope_cts("--device", "nnapi-reference", str(vector),
                        env_extra={loader.NNSCOPE_CTS_DIR: str(tmp_path / "none")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "2 passed, 0 failed, 0 skipped"
