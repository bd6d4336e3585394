"""Compilation caching through a real ``sample-all`` driver process.

Oracles: the same model executed on the in-process reference CPU device (outputs must be
identical), the trace and vlog of each compilation (from cache or not), and the cache files
themselves (after any bad cache, the rewritten files are byte-identical to a fresh cache).
"""
from __future__ import annotations

import ast
import builtins
import os
import pickle
import pickletools
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, Execution, manager
from nnscope.runtime.builtin_models import mobilenet, sample_input
from nnscope.runtime.drivers import cache_files
from nnscope.runtime.drivers.cache_files import FIELDS, HEADER_SIZE, KIND_DATA, KIND_MODEL
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.client.cache import cache_paths
from nnscope.runtime.drivers.sample import SAMPLES, SampleConfig, SampleDriver
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import Preference, Priority
from nnscope.runtime import _caching
from tests.runtime.helpers import add_model, mixed_expected, mixed_model, run
from tests.support.log_capture import captured_log

TOKEN = bytes(range(32))
OTHER_TOKEN = bytes(range(100, 132))
MODEL = mobilenet(size=32, alpha=0.25, classes=10)
INPUT = sample_input(MODEL)[0]


@pytest.fixture(scope="module")
def driver(sample_all):
    return sample_all


@pytest.fixture(scope="module")
def expected():
    return run(MODEL, INPUT, devices=[CpuDevice()])


def _compile(driver, cache_dir, token=TOKEN, model=MODEL) -> tuple[Compilation, list[str]]:
    compilation = Compilation.for_devices(model, [driver])
    compilation.set_caching(str(cache_dir), token)
    with captured_log("nn", "compilation") as lines:
        compilation.finish()
    return compilation, lines


def _from_cache(lines: list[str]) -> bool:
    return any("whole model on sample-all from cache" in line for line in lines)


def _files(driver, cache_dir, token=TOKEN) -> tuple[Path, Path]:
    hashed = _caching.step_token(token, driver, Preference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                                 tuple(range(len(MODEL.operations))))
    (model_path,), (data_path,) = cache_paths(str(cache_dir), hashed, (1, 1))
    return Path(model_path), Path(data_path)


def _outputs(compilation) -> np.ndarray:
    try:
        return run(compilation, INPUT)
    finally:
        compilation.free()


def test_sample_drivers_ask_for_a_model_and_a_data_cache_file(driver):
    assert driver.number_of_cache_files_needed() == (1, 1)
    assert CpuDevice().number_of_cache_files_needed() == (0, 0)


def test_second_compilation_is_from_cache_with_identical_outputs(driver, expected, tmp_path):
    first, lines = _compile(driver, tmp_path)
    assert not _from_cache(lines)
    assert any("not prepared from cache" in line for line in lines)  # no files yet
    np.testing.assert_array_equal(_outputs(first), expected)
    model_file, data_file = _files(driver, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [model_file.name, data_file.name]
    assert model_file.name.endswith("10") and data_file.name.endswith("20")
    with tracing.TraceSession() as session:
        second, lines = _compile(driver, tmp_path)
        np.testing.assert_array_equal(_outputs(second), expected)
    assert _from_cache(lines)
    assert any(line.startswith("sample-all: prepared from cache") for line in lines)
    names = [span.name for span in session.collect().spans()]
    assert "[NN_LR_PC]ExecutionPlan::prepareModelFromCache" in names
    assert "[NN_LI_PC]prepareModelFromCache_1_3" in names
    assert "HIDL::IDevice::prepareModelFromCache_1_3::client" in names
    assert "[NN_LD_PC]SampleDriver::prepareModelFromCache_1_3" in names
    assert not any("getSupportedOperations" in n or n.endswith("]prepareModel") for n in names)


def test_another_token_or_preference_gets_its_own_files(driver, expected, tmp_path):
    _compile(driver, tmp_path)[0].free()
    other, lines = _compile(driver, tmp_path, OTHER_TOKEN)
    assert not _from_cache(lines)
    np.testing.assert_array_equal(_outputs(other), expected)
    assert len(list(tmp_path.iterdir())) == 4
    hashed = [_caching.step_token(TOKEN, driver, p, Priority.MEDIUM, (0,)) for p in Preference]
    assert len(set(hashed)) == len(Preference)


def test_each_driver_step_of_a_compound_plan_is_cached(tmp_path):
    made = [RemoteDevice(name, timeout_s=30.0) for name in ("sample-float-fast", "sample-quant")]
    manager.forTest_set_devices(made)  # the CPU only as fallback: a compound plan
    x, y = np.float32([[1, 2.5, -2, 3]]), np.float32([[2, -1, 0.5, 1]])
    q = np.uint8([[130, 121, 128, 140]])
    try:
        for round_number in range(2):  # cold, then from the cache
            compilation = Compilation(mixed_model())
            compilation.set_caching(str(tmp_path), TOKEN)
            with captured_log("nn", "compilation") as lines:
                compilation.finish()
            steps = [s.device.name for s in compilation.plan.steps]
            assert steps == ["sample-float-fast", "nnapi-reference", "sample-quant",
                             "nnapi-reference", "sample-float-fast"]
            from_cache = [line.split(":")[0] for line in lines if line.endswith(": prepared from cache")]
            assert from_cache == ([] if round_number == 0 else ["sample-float-fast", "sample-quant",
                                                           "sample-float-fast"])
            execution = Execution(compilation)
            for index, value in enumerate((x, y, q)):
                execution.set_input(index, value)
            out = np.zeros((1, 4), np.float32)
            execution.set_output(0, out)
            execution.compute()
            np.testing.assert_array_equal(out, mixed_expected(x, y, q))
            compilation.free()
        assert len(list(tmp_path.iterdir())) == 6  # a model and a data file per driver step
    finally:
        manager.forTest_reset()
        for device in made:
            device.shutdown()


# ------------------------------------------------------------------ bad caches
def _flip(path: Path, start: int, end: int) -> None:
    data = bytearray(path.read_bytes())
    for i in range(start, end):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def _reseal(path: Path, kind: int, **changes) -> None:
    """Rewrite the header with ``changes`` and a valid header checksum."""
    data = path.read_bytes()
    fields = cache_files._BODY.unpack_from(data)
    values = dict(magic=fields[0], version=fields[1], kind=fields[2], driver=fields[5],
                  driver_version=fields[6], token=fields[7], digest=fields[8], length=fields[9],
                  sums=fields[10:13])
    values.update(changes)
    body = cache_files._BODY.pack(values["magic"], values["version"], values["kind"], 0, 0,
                                  values["driver"], values["driver_version"], values["token"],
                                  values["digest"], values["length"], *values["sums"])
    path.write_bytes(body + cache_files._CRC.pack(cache_files.zlib.crc32(body)) + data[HEADER_SIZE:])


def _header_cases():
    for which in ("model", "data"):
        for field, (start, end) in FIELDS.items():
            yield f"{which}-{field}", which, lambda p, s=start, e=end: _flip(p, s, e)


def _payload_cases():
    for which in ("model", "data"):
        yield f"{which}-payload-first-byte", which, lambda p: _flip(p, HEADER_SIZE, HEADER_SIZE + 1)
        yield f"{which}-payload-middle", which, lambda p: _flip(p, HEADER_SIZE + 600, HEADER_SIZE + 640)
        yield f"{which}-payload-last-byte", which, lambda p: _flip(p, p.stat().st_size - 1, p.stat().st_size)
        yield f"{which}-truncated-to-header", which, lambda p: os.truncate(p, HEADER_SIZE)
        yield f"{which}-truncated-mid-payload", which, lambda p: os.truncate(p, p.stat().st_size - 100)
        yield f"{which}-truncated-mid-header", which, lambda p: os.truncate(p, 17)
        yield f"{which}-empty", which, lambda p: os.truncate(p, 0)
        yield f"{which}-extended", which, lambda p: p.write_bytes(p.read_bytes() + bytes(4096))
        yield f"{which}-words-swapped", which, _swap_words
        kind = KIND_MODEL if which == "model" else KIND_DATA
        yield f"{which}-resealed-version", which, lambda p, k=kind: _reseal(p, k, version=cache_files.FORMAT_VERSION + 1)
        yield f"{which}-resealed-driver-version", which, lambda p, k=kind: _reseal(p, k, driver_version=b"9")
        yield f"{which}-resealed-digest", which, lambda p, k=kind: _reseal(p, k, digest=bytes(32))
        yield f"{which}-resealed-length", which, lambda p, k=kind: _reseal(p, k, length=8)
        yield f"{which}-resealed-sums", which, lambda p, k=kind: _reseal(p, k, sums=(1, 2, 3))


def _swap_words(path: Path) -> None:
    data = bytearray(path.read_bytes())
    a, b = HEADER_SIZE + 8, HEADER_SIZE + 8 * 700
    data[a:a + 8], data[b:b + 8] = data[b:b + 8], data[a:a + 8]
    if data[a:a + 8] == data[b:b + 8]:
        data[a] ^= 1
    path.write_bytes(bytes(data))


CASES = [*_header_cases(), *_payload_cases()]


@pytest.fixture(scope="module")
def pristine(driver, tmp_path_factory):
    """A directory holding a fresh valid cache of MODEL, and its two files' bytes."""
    directory = tmp_path_factory.mktemp("pristine")
    _compile(driver, directory)[0].free()
    model_file, data_file = _files(driver, directory)
    return directory, model_file.read_bytes(), data_file.read_bytes()


def _check_recovery(driver, expected, directory, pristine) -> None:
    """The next compilation is not from cache, gives the right outputs and rewrites the
    cache as it was; the one after that is from the cache again."""
    compilation, lines = _compile(driver, directory)
    assert not _from_cache(lines)
    assert any("not prepared from cache" in line for line in lines)
    np.testing.assert_array_equal(_outputs(compilation), expected)
    model_file, data_file = _files(driver, directory)
    assert model_file.read_bytes() == pristine[1] and data_file.read_bytes() == pristine[2]
    again, lines = _compile(driver, directory)
    assert _from_cache(lines)
    np.testing.assert_array_equal(_outputs(again), expected)


@pytest.mark.parametrize("name,which,corrupt", CASES, ids=[c[0] for c in CASES])
def test_each_corrupted_region_is_rejected_and_rewritten(driver, expected, pristine, tmp_path,
                                                         name, which, corrupt):
    shutil.copytree(pristine[0], tmp_path, dirs_exist_ok=True)
    model_file, data_file = _files(driver, tmp_path)
    before = (model_file if which == "model" else data_file).read_bytes()
    corrupt(model_file if which == "model" else data_file)
    assert (model_file if which == "model" else data_file).read_bytes() != before
    _check_recovery(driver, expected, tmp_path, pristine)


def test_swapped_model_and_data_files(driver, expected, pristine, tmp_path):
    shutil.copytree(pristine[0], tmp_path, dirs_exist_ok=True)
    model_file, data_file = _files(driver, tmp_path)
    model_file.write_bytes(pristine[2])
    data_file.write_bytes(pristine[1])
    _check_recovery(driver, expected, tmp_path, pristine)


def test_cache_of_another_model(driver, expected, pristine, tmp_path):
    other, _ = _compile(driver, tmp_path, OTHER_TOKEN, add_model())
    other.free()
    hashed = _caching.step_token(OTHER_TOKEN, driver, Preference.FAST_SINGLE_ANSWER, Priority.MEDIUM, (0,))
    (other_model,), (other_data,) = cache_paths(str(tmp_path), hashed, (1, 1))
    model_file, data_file = _files(driver, tmp_path)
    shutil.copyfile(other_model, model_file)
    shutil.copyfile(other_data, data_file)
    _check_recovery(driver, expected, tmp_path, pristine)
    model_file.write_bytes(pristine[1])  # a mix: our model cache, the other model's data
    shutil.copyfile(other_data, data_file)
    _check_recovery(driver, expected, tmp_path, pristine)


def test_cache_written_by_another_driver_for_the_same_token(driver, expected, pristine, tmp_path):
    model_file, data_file = _files(driver, tmp_path)
    hashed = bytes.fromhex(_hashed_hex(driver))
    impostor = SampleDriver(SampleConfig("sample-impostor", SAMPLES["sample-all"].perf))
    prepared = impostor.prepare_model(MODEL.to_hal())
    with open(model_file, "wb+") as m, open(data_file, "wb+") as d:
        impostor.write_cache(prepared, [m.fileno()], [d.fileno()], hashed)
    _check_recovery(driver, expected, tmp_path, pristine)


def _hashed_hex(device) -> str:
    return _caching.step_token(TOKEN, device, Preference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                               tuple(range(len(MODEL.operations)))).hex()


def test_unwritable_cache_directory_still_compiles(driver, expected, tmp_path):
    missing = tmp_path / "does-not-exist"
    compilation, lines = _compile(driver, missing)
    np.testing.assert_array_equal(_outputs(compilation), expected)
    assert not missing.exists()


def test_cache_paths_that_are_links_or_fifos_are_not_used(driver, expected, tmp_path):
    model_file, data_file = _files(driver, tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    model_file.symlink_to(victim)
    os.mkfifo(data_file)
    compilation, lines = _compile(driver, tmp_path)
    np.testing.assert_array_equal(_outputs(compilation), expected)
    assert victim.read_bytes() == b"precious"
    assert model_file.is_symlink() and not _from_cache(lines)


# ------------------------------------------------------------------ no pickle, no code
PICKLE_OPCODES = {ord(opcode.code) for opcode in pickletools.opcodes}
LOADER_MODULES = ("runtime/drivers/cache_files.py", "runtime/drivers/cache_payload.py",
                  "runtime/drivers/cache_tables.py",
                  "runtime/drivers/ipc/service/cache.py", "runtime/drivers/ipc/client/cache.py")


def test_cache_files_are_not_pickles(pristine):
    for data in pristine[1:]:
        assert data.startswith(cache_files.MAGIC)
        assert data[0] not in PICKLE_OPCODES
        with pytest.raises(pickle.UnpicklingError):
            pickle.loads(data)


def test_loader_modules_neither_import_pickle_nor_run_code():
    root = Path(__file__).resolve().parents[2]
    for relative in LOADER_MODULES:
        tree = ast.parse((root / relative).read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                    for alias in node.names} | {node.module for node in ast.walk(tree)
                                                if isinstance(node, ast.ImportFrom)}
        assert not any(name and ("pickle" in name or name in ("marshal", "shelve")) for name in imported)
        called = {node.func.id for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
        assert not called & {"eval", "exec", "compile", "__import__"}, relative


def test_loading_a_cache_unpickles_and_executes_nothing(pristine, monkeypatch, tmp_path):
    """In-process load with every unpickling entry point and eval/exec trapped, and an audit
    hook watching for code compilation or execution while the cache loads."""
    events: list[str] = []
    watching = [False]

    def hook(event, args):
        if watching[0] and event in ("exec", "compile", "pickle.find_class", "marshal.loads"):
            events.append(event)
    sys.addaudithook(hook)

    def trap(*args, **kwargs):
        raise AssertionError("the cache loader tried to unpickle or run code")
    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, trap)
    monkeypatch.setattr(builtins, "eval", trap)
    monkeypatch.setattr(builtins, "exec", trap)
    sample = SampleDriver(SAMPLES["sample-all"])
    hashed = bytes.fromhex(_hashed_hex(sample))
    model_path, data_path = tmp_path / "m", tmp_path / "d"
    model_path.write_bytes(pristine[1])
    data_path.write_bytes(pristine[2])
    with open(model_path, "rb") as m, open(data_path, "rb") as d:
        watching[0] = True
        try:
            prepared = sample.prepare_model_from_cache_files([m.fileno()], [d.fileno()], hashed)
        finally:
            watching[0] = False
    assert events == []
    reference = SampleDriver(SAMPLES["sample-all"]).prepare_model(MODEL.to_hal())
    np.testing.assert_array_equal(prepared.executor.run([INPUT])[0], reference.executor.run([INPUT])[0])
    assert prepared.executor.calls == reference.executor.calls


def test_in_process_device_without_cache_support_reports_general_failure():
    with pytest.raises(HalError):
        CpuDevice().prepare_model_from_cache(MODEL.to_hal(), None, "/tmp", TOKEN)
