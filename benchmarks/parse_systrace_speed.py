"""Speed and memory of ``parse_systrace`` on a large generated trace, beside the AOSP parser.

Generates (into a temporary directory) the 78 MB trace of
``tests/support/gen_systrace.py --seed 11 --scenario mixed --runs 40 --execs 400`` (about 770,000
marks) and times the default summary, each in a fresh subprocess (wall seconds, and peak RSS
from ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``):

- ``one core``: ``python -m nnscope.parse_systrace`` allowed one CPU (``sched_setaffinity``, as
  ``taskset -c``), which keeps it serial: the path of a fleet worker;
- ``two cores``: the same, allowed two CPUs (a large trace is read by two processes);
- ``aosp`` (with ``--aosp DIR``): the established tool, AOSP's
  ``frameworks/ml/nn/tools/systrace_parser`` (``DIR`` holds its ``parse_systrace.py`` and
  ``parser/``; it is not shipped here), run as ``python parse_systrace.py TRACE`` from ``DIR``
  on one CPU. Its stdout must equal ours byte for byte (else the benchmark fails).

Every timed program's modules are first compiled to bytecode (``compileall``), as ``pip
install`` does: where ``PYTHONDONTWRITEBYTECODE`` is set (as on our CI machines), each run
would otherwise compile them again from source (about 40 ms of ours, some 10 of AOSP's).
Each round runs every variant once, in turn, and the best of ``--repeat`` rounds is kept
(machines here are shared and loaded: only side-by-side, best-of-N figures compare). Prints
seconds, MB/s and peak RSS per variant and the speed-ups over the AOSP parser (targets of
issue 35: at least 10x on one core, 20x on two), writes
``benchmarks/results/parse_systrace_speed.json`` and prints it as a final JSON line.
``--baseline DIR`` also times, on one and two cores in the same rounds, an older checkout whose
``DIR/nnscope`` holds its ``parse_systrace`` and ``tracing`` (``mkdir -p DIR/nnscope && touch
DIR/nnscope/__init__.py && git archive REV parse_systrace tracing | tar -x -C DIR/nnscope``), run
as ``python -m nnscope.parse_systrace`` with ``PYTHONPATH=DIR`` (ahead of the installed package).

Example:
    $ python benchmarks/parse_systrace_speed.py --aosp /tmp/aosp/nn/tools/systrace_parser --repeat 3
    $ python benchmarks/parse_systrace_speed.py --repeat 5 --baseline /tmp/old
"""
from __future__ import annotations

import argparse
import compileall
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GEN = REPO / "tests" / "support" / "gen_systrace.py"
RESULTS = REPO / "benchmarks" / "results" / "parse_systrace_speed.json"
GEN_ARGS = ["--seed", "11", "--scenario", "mixed", "--runs", "40", "--execs", "400"]
TARGET_ONE_CORE, TARGET_TWO_CORES = 10.0, 20.0


def generate(directory: str) -> Path:
    trace = Path(directory) / "big.html"
    subprocess.run([sys.executable, str(GEN), *GEN_ARGS, "-o", str(trace)], check=True)
    return trace


def variants(aosp, baseline) -> dict:
    """name -> (command, working directory, CPUs allowed, PYTHONPATH or None) of everything timed
    in a round."""
    cpus = sorted(os.sched_getaffinity(0))
    one, two = cpus[:1], cpus[:2]
    ours = [sys.executable, "-m", "nnscope.parse_systrace"]
    found = {}
    if aosp is not None:
        found["aosp"] = ([sys.executable, "parse_systrace.py"], Path(aosp), one, None)
    if baseline is not None:
        found["baseline one core"] = (ours, REPO, one, str(Path(baseline).resolve()))
        found["baseline two cores"] = (ours, REPO, two, str(Path(baseline).resolve()))
    found["one core"] = (ours, REPO, one, None)
    if len(two) == 2:
        found["two cores"] = (ours, REPO, two, None)
    return found


def compile_bytecode(aosp, baseline) -> None:
    """Bytecode for every timed program's modules (ours, AOSP's, the baseline's)."""
    import nnscope.parse_systrace
    import nnscope.tracing
    folders = [Path(nnscope.parse_systrace.__file__).parent, Path(nnscope.tracing.__file__).parent]
    folders += [Path(folder) for folder in (aosp, baseline) if folder is not None]
    for folder in folders:
        compileall.compile_dir(str(folder), quiet=1)


def measure(trace: Path, command: list, directory: Path, cpus: list, path=None) -> dict:
    """Run the measurement in a fresh helper process, so no earlier child's RSS is seen."""
    env = dict(os.environ, PYTHONPATH=path) if path else None
    done = subprocess.run([sys.executable, __file__, "--measure", str(trace), str(directory),
                           ",".join(map(str, cpus)), *command], stdout=subprocess.PIPE,
                          check=True, cwd=REPO, env=env)
    return json.loads(done.stdout)


def measure_here(trace: Path, directory: Path, cpus: list, command: list) -> dict:
    """Time ``command TRACE`` run from ``directory`` on ``cpus``; its stdout's hash."""
    start = time.perf_counter()
    done = subprocess.run([*command, str(trace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=directory, preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-500:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    size_mb = trace.stat().st_size / 1e6
    return {"seconds": round(seconds, 3), "trace_mb": round(size_mb, 1),
            "mb_per_s": round(size_mb / seconds, 1), "peak_rss_mb": round(peak_kb / 1024, 1),
            "cpus": len(cpus), "stdout_sha256": hashlib.sha256(done.stdout).hexdigest()}


def best_of(trace: Path, repeat: int, timed: dict) -> dict:
    """Best (fastest) result of each variant over ``repeat`` rounds, each round all in turn."""
    best: dict = {}
    for _ in range(repeat):
        for name, (command, directory, cpus, path) in timed.items():
            result = measure(trace, command, directory, cpus, path)
            if name not in best or result["seconds"] < best[name]["seconds"]:
                best[name] = result
    return best


def speedups(best: dict) -> dict:
    """Speed-ups over the AOSP parser (its seconds over ours), and whether they meet the
    targets; raises when an output differs from the AOSP parser's."""
    aosp = best.get("aosp")
    if aosp is None:
        return {}
    for name, result in best.items():
        if not name.startswith("baseline") and result["stdout_sha256"] != aosp["stdout_sha256"]:
            raise SystemExit(f"{name}: the output differs from the AOSP parser's")
    found = {}
    for name, target in (("one core", TARGET_ONE_CORE), ("two cores", TARGET_TWO_CORES)):
        if name in best:
            ratio = round(aosp["seconds"] / best[name]["seconds"], 2)
            found[name] = {"speedup": ratio, "target": target, "met": ratio >= target}
    return found


def _line(label: str, result: dict) -> str:
    return (f"{label:<19}: {result['seconds']:.2f} s, {result['mb_per_s']:.1f} MB/s, "
            f"peak RSS {result['peak_rss_mb']:.0f} MB ({result['trace_mb']} MB trace)")


def main() -> int:
    if sys.argv[1:2] == ["--measure"]:
        trace, directory, cpus, *command = sys.argv[2:]
        print(json.dumps(measure_here(Path(trace), Path(directory),
                                      [int(cpu) for cpu in cpus.split(",")], command)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="best of N rounds (default 1)")
    parser.add_argument("--aosp", help="folder of AOSP's systrace_parser (parse_systrace.py)")
    parser.add_argument("--baseline", help="folder whose nnscope/ holds an older parse_systrace and tracing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        trace = generate(directory)
        compile_bytecode(args.aosp, args.baseline)
        best = best_of(trace, args.repeat, variants(args.aosp, args.baseline))
    for name, result in best.items():
        print(_line(name, result))
    ratios = speedups(best)
    for name, ratio in ratios.items():
        print(f"{name} over the AOSP parser: {ratio['speedup']:.1f}x (target >= {ratio['target']:.0f}x)")
    for name in ("one core", "two cores"):
        if f"baseline {name}" in best and name in best:
            print(f"{name} over the baseline: "
                  f"{best[f'baseline {name}']['seconds'] / best[name]['seconds']:.2f}x")
    result = dict(best, repeat=args.repeat, generator_args=GEN_ARGS, speedup_over_aosp=ratios,
                  load_average=os.getloadavg()[0])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
