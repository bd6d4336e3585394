"""Speed and memory of ``parse_systrace fleet`` on a generated device lab (issue 35).

Generates (once; ``--lab DIR`` keeps and reuses it) a lab of ``tests/support/fleet_gen.py``:
3 devices x 2 builds x 3 models, ``--traces-per-group`` traces each in mixed formats (systrace
HTML, ftrace text, Chrome JSON, Perfetto, gzip), by default 2,016 traces and more than 1 GB.
Then, each build in a fresh helper process on the embedded engine (``engine.cluster``), it
measures:

- a fresh build with 1 and with 2 workers: wall seconds (cluster start apart), traces/s and MB/s;
- its reference, the sum of the one-trace times of :func:`parse_systrace.summarize` on the same
  files in one process (what the workers would do with no engine at all), taken around the build:
  every other file (in the order of size) just before it, the rest just after it, so the build and
  its reference meet the same spell of a shared machine (whose speed drifts by up to 30 % within
  minutes);
- the engine's cost: the build's time over (its reference / workers); and in CPU seconds
  (workers, and the client with the embedded scheduler) over the reference's CPU seconds;
- an incremental re-run that adds 10 new traces, against the first 2-worker build (the best of
  two, each on a fresh copy of that build's dataset: one stalled stat or read of the 2,026 files
  once took it from 0.5 to 6.5 s);
- the resident memory of the client and of each worker at 25, 50, 75 and 100 % of a build
  (bounded: flat while the number of traces done grows), and their peaks.

Prints one line per figure, writes ``benchmarks/results/fleet.json`` and prints it as a final
JSON line. The machines here are shared: figures vary with the other load, so ``--repeat N`` runs
N rounds (1 worker, then 2 workers, each between its reference halves) and keeps, for each number
of workers, the round with the lowest engine cost (all rounds' costs are printed and kept).

Example:
    $ python benchmarks/fleet.py --lab /tmp/lab --repeat 2
    $ python benchmarks/fleet.py --traces-per-group 20 --execs 20   # a quick, small run
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "fleet.json"
PATTERN = "{device}/{build}/{model}/*"


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generate(lab: Path, per_group: int, execs: int) -> None:
    """The lab (``lab/main``) and the 10 traces of the re-run (``lab/late``), unless present."""
    if not (lab / "main").is_dir():
        subprocess.run([sys.executable, "-m", "tests.support.fleet_gen", str(lab / "main"),
                        "--traces-per-group", str(per_group), "--execs", str(execs), "--no-broken"],
                       check=True, cwd=REPO)
    if not (lab / "late").is_dir():
        code = ("from tests.support.fleet_gen import generate_fleet; generate_fleet("
                f"{str(lab / 'late')!r}, devices=('pixel6',), builds=('b102',), models=('asr',), "
                f"traces_per_group=10, execs={execs}, broken=False)")
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def files_of(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file())


def measure_serial(folder: Path, first: int = 0, step: int = 1) -> dict:
    """Sum of the one-trace summarize() times, in this process, of every ``step``-th file from
    ``first`` on in the order of size (halves alike in sizes and formats), read in path order."""
    from nnscope.parse_systrace import summarize

    by_size = sorted(files_of(folder), key=lambda path: (path.stat().st_size, path))
    total, size, files, cpu = 0.0, 0, sorted(by_size[first::step]), _cpu_s()
    for path in files:
        start = time.perf_counter()
        summarize(str(path))
        total += time.perf_counter() - start
        size += path.stat().st_size
    return {"files": len(files), "mb": round(size / 1e6, 1), "seconds_sum": round(total, 3),
            "cpu_s": round(_cpu_s() - cpu, 3), "peak_rss_mb": round(_peak_mb(), 1)}


def measure_build(dataset: Path, workers: int, inputs: list[str], total: int) -> dict:
    """One build on an embedded cluster of ``workers``, with memory samples."""
    from nnscope.parse_systrace.fleet import build, engine

    start = time.perf_counter()
    with engine.cluster(workers=workers) as client:
        started = time.perf_counter() - start
        samples, marks = [], {round(total * share) for share in (0.25, 0.5, 0.75)}

        def sample(counts: dict) -> None:
            if counts["done"] in marks:
                samples.append(dict(done=counts["done"], client_mb=round(_rss_mb(), 1),
                                    workers_mb=sorted(round(v, 1) for v in client.run(_rss_mb).values())))

        cpu, workers_cpu = _cpu_s(), client.run(_cpu_s)
        report = build(dataset, inputs, pattern=PATTERN, scheduler=client.scheduler.address,
                       progress=False, on_result=sample)
        cpu_s = {"client": round(_cpu_s() - cpu, 3), "workers": round(sum(
            now - workers_cpu[worker] for worker, now in client.run(_cpu_s).items()), 3)}
        samples.append(dict(done=report.files - report.skipped, client_mb=round(_rss_mb(), 1),
                            workers_mb=sorted(round(v, 1) for v in client.run(_rss_mb).values())))
        peaks = sorted(round(v, 1) for v in client.run(_peak_mb).values())
    return {"workers": workers, "cluster_start_s": round(started, 3), "seconds": report.seconds,
            "parsed": report.parsed, "skipped": report.skipped, "failed": report.failed,
            "rss_samples": samples, "client_peak_rss_mb": round(_peak_mb(), 1),
            "worker_peak_rss_mb": peaks, "cpu_s": cpu_s}


def _reference(folder: str, half: int) -> dict:
    """One-trace times of every other file by size (``half`` 0: the first, 1: the second)."""
    return _helper("--serial", folder, str(half), "2")


def lab_of(folder: str) -> dict:
    """The lab's number of files and megabytes."""
    files = files_of(Path(folder))
    return {"files": len(files), "mb": round(sum(path.stat().st_size for path in files) / 1e6, 1)}


def _build(scratch: Path, workers: int, folder: str, totals: dict) -> dict:
    """A fresh build of ``folder`` (its ``totals``: :func:`lab_of`) between the two halves of
    its reference."""
    dataset = scratch / f"w{workers}.fleet"
    shutil.rmtree(dataset, ignore_errors=True)
    before = _reference(folder, 0)
    built = _helper("--build", str(dataset), str(workers), str(totals["files"]), folder)
    after = _reference(folder, 1)
    reference = {name: round(before[name] + after[name], 3) for name in ("seconds_sum", "cpu_s")}
    built.update(reference=reference, traces_per_s=round(built["parsed"] / built["seconds"], 1),
                 mb_per_s=round(totals["mb"] / built["seconds"], 1),
                 engine_cost=round(built["seconds"] / (reference["seconds_sum"] / workers), 3),
                 engine_cpu_cost=round(sum(built["cpu_s"].values()) / reference["cpu_s"], 3))
    print(f"{workers} worker(s): {built['seconds']:.1f} s (+{built['cluster_start_s']:.1f} s "
          f"cluster start), {built['traces_per_s']} traces/s, {built['mb_per_s']} MB/s; one-trace "
          f"times around it {before['seconds_sum']:.1f} + {after['seconds_sum']:.1f} s: engine "
          f"cost {built['engine_cost']}x, in CPU seconds {built['engine_cpu_cost']}x; client peak "
          f"RSS {built['client_peak_rss_mb']} MB, worker peaks {built['worker_peak_rss_mb']} MB")
    return built


def _rerun(scratch: Path, main_folder: str, late: str) -> dict:
    """The 2-worker build again, on a copy of its dataset, with the 10 new traces added."""
    copy = scratch / "rerun.fleet"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(scratch / "w2.fleet", copy)
    return _helper("--build", str(copy), "2", "10", main_folder, late)


def _helper(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], stdout=subprocess.PIPE, check=True, cwd=REPO)
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def main() -> int:
    if sys.argv[1:2] == ["--serial"]:
        folder, first, step = sys.argv[2], *map(int, sys.argv[3:5])
        print(json.dumps(measure_serial(Path(folder), first, step)))
        return 0
    if sys.argv[1:2] == ["--build"]:
        dataset, workers, total, *inputs = sys.argv[2:]
        print(json.dumps(measure_build(Path(dataset), int(workers), inputs, int(total))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", help="keep (and reuse) the generated lab in this folder")
    parser.add_argument("--traces-per-group", type=int, default=112)
    parser.add_argument("--execs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the best of each is kept")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="fleet-bench-")
    lab = Path(args.lab) if args.lab else Path(scratch) / "lab"
    try:
        generate(lab, args.traces_per_group, args.execs)
        result = run(lab, Path(scratch), args.repeat)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


def run(lab: Path, scratch: Path, repeat: int = 1) -> dict:
    main_folder, late = str(lab / "main"), str(lab / "late")
    result = {"builds": {}, "load_average_before": os.getloadavg()[0], "repeat": repeat}
    builds, costs = result["builds"], {1: [], 2: []}
    result["lab"] = totals = lab_of(main_folder)
    for _ in range(repeat):  # side by side: each build between the halves of its reference
        for workers in (1, 2):
            built = _build(scratch, workers, main_folder, totals)
            costs[workers].append(built["engine_cost"])
            if workers not in builds or built["engine_cost"] < builds[workers]["engine_cost"]:
                builds[workers] = built
    result["costs"] = costs
    print(f"lab: {totals['files']} traces, {totals['mb']} MB. Engine cost, each "
          f"build against the one-trace times around it, best of {repeat} (target <= 1.15):")
    for workers, built in builds.items():
        spent, reference = built["cpu_s"], built["reference"]
        print(f"  {workers} worker(s): {built['seconds']:.1f} s against "
              f"{reference['seconds_sum']:.1f} / {workers} s: {built['engine_cost']}x (all rounds: "
              f"{costs[workers]}); CPU: workers {spent['workers']:.1f} s + client and scheduler "
              f"{spent['client']:.1f} s against {reference['cpu_s']:.1f} s: "
              f"{built['engine_cpu_cost']}x")
    result["speedup_2_over_1"] = round(builds[1]["seconds"] / builds[2]["seconds"], 2)
    print(f"2 workers over 1: {result['speedup_2_over_1']}x (target >= 1.7)")
    rerun = min((_rerun(scratch, main_folder, late) for _ in range(2)),
                key=lambda build: build["seconds"])
    rerun["share_of_first"] = round(rerun["seconds"] / builds[2]["seconds"], 4)
    result["rerun"] = rerun
    print(f"re-run with 10 new traces: {rerun['seconds']:.2f} s (+{rerun['cluster_start_s']:.1f} s "
          f"cluster start) parsed {rerun['parsed']}, skipped {rerun['skipped']}: "
          f"{rerun['share_of_first']:.1%} of the first run (target <= 5 %)")
    result["load_average_after"] = os.getloadavg()[0]
    print(f"1-minute load average: {result['load_average_before']:.1f} before, "
          f"{result['load_average_after']:.1f} after (2 CPUs: above 2, others share them)")
    for workers, built in builds.items():
        for sample in built["rss_samples"]:
            print(f"  {workers} worker(s), {sample['done']} traces done: client {sample['client_mb']} MB, "
                  f"workers {sample['workers_mb']} MB")
    return result


if __name__ == "__main__":
    sys.exit(main())
