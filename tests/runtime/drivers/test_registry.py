"""Driver registry: NNSCOPE_DRIVERS selection, unknown names, the driver process CLI."""
import subprocess
import sys

import pytest

from nnscope.runtime.drivers import registry
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.registry import NNSCOPE_DRIVERS, UnknownDriverError

ALL = ("sample-all", "sample-float-fast", "sample-float-slow", "sample-quant", "sample-minimal",
       "sample-fibonacci", "sample-oem") + (("sample-litert",) if registry.litert_available() else ())


def test_default_registers_every_sample():
    assert registry.available() == ALL
    assert registry.registered({}) == ALL
    assert registry.registered({NNSCOPE_DRIVERS: " , "}) == ALL


def test_env_var_selects_in_order_without_duplicates():
    env = {NNSCOPE_DRIVERS: "sample-quant,sample-float-fast, sample-quant"}
    assert registry.registered(env) == ("sample-quant", "sample-float-fast")


def test_unknown_name_lists_valid_ones():
    with pytest.raises(UnknownDriverError) as error:
        registry.registered({NNSCOPE_DRIVERS: "sample-all,sample-npu"})
    assert "sample-npu" in str(error.value)
    assert all(name in str(error.value) for name in ALL)


def test_remote_devices_are_lazy_proxies():
    devices = registry.remote_devices({NNSCOPE_DRIVERS: "sample-minimal"})
    assert [type(d) for d in devices] == [RemoteDevice]
    assert devices[0].name == "sample-minimal" and devices[0].pid is None  # not started yet


def test_env_var_is_read_in_a_real_child_process():
    code = "from nnscope.runtime.drivers import registry; print(','.join(registry.registered()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**_base_env(), NNSCOPE_DRIVERS: "sample-float-slow"})
    assert out.stdout.strip() == "sample-float-slow"


def test_driver_cli_rejects_unknown_driver_with_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nnscope.runtime.drivers", "sample-npu", "--socket",
                           str(tmp_path / "s")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown driver 'sample-npu'" in proc.stderr and "sample-minimal" in proc.stderr


def _base_env():
    import os
    return {k: v for k, v in os.environ.items() if k != NNSCOPE_DRIVERS}


def test_without_litert_the_driver_is_absent_with_one_line_saying_why():
    code = ("import sys\n"
            "sys.modules['ai_edge_litert'] = None  # as if not installed: find_spec gives None\n"
            "from nnscope.runtime.__main__ import main\n"
            "sys.exit(main(['devices']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=_base_env())
    assert done.returncode == 0, done.stderr
    assert "sample-litert" not in done.stdout and "sample-oem" in done.stdout
    assert done.stderr.strip().splitlines() == [registry.LITERT_MISSING]
