"""How the engine cuts the files into tasks, what it makes of a failed task, how it starts workers."""
from __future__ import annotations

import os

from nnscope.parse_systrace.fleet import engine
from nnscope.parse_systrace.fleet.inputs import InputFile


def _files(tmp_path, sizes: list) -> list:
    files = []
    for index, size in enumerate(sizes):
        path = tmp_path / f"{index}.txt"
        path.write_bytes(b"x" * size)
        files.append(InputFile(str(path)))
    return files


def test_batches_are_consecutive_and_bounded_in_bytes_and_files(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "BATCH_BYTES", 100)
    files = _files(tmp_path, [40, 40, 40, 150, 10, 10, 10, 10, 10, 10, 10, 10])
    missing = InputFile(str(tmp_path / "missing"))
    groups = engine.batches(files + [missing], threads=1)
    assert [file for group in groups for file in group] == files + [missing]
    # budgets: min(100, bytes left // 4): 87, 67, 57 (150 alone), 20, then under 15: one each
    assert [len(group) for group in groups] == [2, 1, 1, 2] + [1] * 7


def test_batches_shrink_to_single_traces_at_the_end(tmp_path):
    groups = engine.batches(_files(tmp_path, [100] * 200), threads=2)
    sizes = [len(group) for group in groups]
    assert sizes[0] == 200 // (2 * engine.TASKS_PER_THREAD)
    assert sizes == sorted(sizes, reverse=True) and sizes[-2 * engine.TASKS_PER_THREAD:] == [1] * 8


def test_every_thread_gets_tasks_even_of_small_files(tmp_path):
    groups = engine.batches(_files(tmp_path, [10] * 16), threads=2)
    # at most 2 files (16 / 8 tasks), budgets 160 // 8 = 20, then under 20 bytes: one each
    assert [len(group) for group in groups] == [2] + [1] * 14


class _Future:
    def __init__(self, key, status="finished", error=None):
        self.key, self.status, self.error, self.released = key, status, error, False

    def exception(self):
        return self.error

    def release(self):
        self.released = True


class _Client:
    def __init__(self):
        self.submitted = []

    def map(self, function, groups, **options):
        self.submitted.extend(groups)
        return [_Future(f"task-{len(self.submitted)}-{index}") for index, _ in enumerate(groups)]


def test_a_failed_batch_is_tried_again_one_trace_per_task(tmp_path):
    client, files = _Client(), _files(tmp_path, [1, 1])
    tasks = engine._Tasks(client, tolerant=False, driver_key=False)
    (batch,) = tasks.submit([files])
    failed, again = _Future(batch.key, "error", RuntimeError("worker died")), []
    assert tasks.results(failed, None, again.append) == [] and failed.released
    assert client.submitted[1:] == [[files[0].path], [files[1].path]] and len(again) == 2
    lost = _Future(again[0].key, "error", RuntimeError("worker died\nagain"))
    ((result, file),) = tasks.results(lost, None, again.append)
    assert file == files[0] and len(again) == 2
    assert result["error"] == "not parsed: RuntimeError: worker died again"
    assert result["mtime_ns"] is None  # tried again by the next build
    done = _Future(again[1].key)
    assert tasks.results(done, [{"error": None}], again.append) == [({"error": None}, files[1])]


def test_embedded_workers_keep_the_memory_settings_of_glibc():
    with engine.cluster(workers=1) as client:
        assert list(client.run(os.environ.get, "MALLOC_TRIM_THRESHOLD_").values()) == [None]


def _intervals_ms(dask_worker=None, dask_scheduler=None) -> dict:
    server = dask_worker or dask_scheduler
    return {name: callback.callback_time for name, callback in server.periodic_callbacks.items()
            if name in ("tick", "monitor", "memory_monitor")}


def _saturation(dask_scheduler=None) -> float:
    return dask_scheduler.WORKER_SATURATION


def test_embedded_cluster_spaces_out_its_housekeeping_and_queues_tasks():
    with engine.cluster(workers=1) as client:
        (worker,) = client.run(_intervals_ms).values()
        scheduler = client.run_on_scheduler(_intervals_ms)
        saturation = client.run_on_scheduler(_saturation)
    assert worker == {"tick": 1000, "monitor": 5000, "memory_monitor": 1000}
    assert scheduler == {"tick": 1000, "monitor": 5000}
    assert saturation == engine.TASKS_IN_FLIGHT == 2.0
