"""Speed and memory of ``parse_systrace`` on a large generated trace.

Generates (into a temporary directory) the 78 MB trace of
``tests/support/gen_systrace.py --seed 11 --scenario mixed --runs 40 --execs 400`` (about 770,000
marks), times the default summary in a subprocess (wall seconds, and peak RSS from
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``), prints seconds, MB/s and peak RSS,
writes ``benchmarks/results/parse_systrace_speed.json`` and prints a final JSON line.

``--repeat N`` keeps the best of N runs. ``--baseline DIR`` also times the
``parse_systrace`` package found in DIR (e.g. ``git archive HEAD~1 parse_systrace | tar
-x -C DIR``), alternating with the current one in the same session (machines here are
shared and loaded: only side-by-side, best-of-N figures compare), and records both.

Example:
    $ python benchmarks/parse_systrace_speed.py
    $ python benchmarks/parse_systrace_speed.py --repeat 5 --baseline /tmp/old_ps
"""
from __future__ import annotations

import argparse
import json
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
TARGET_SECONDS, TARGET_RSS_MB = 1.3, 150.0


def generate(directory: str) -> Path:
    trace = Path(directory) / "big.html"
    subprocess.run([sys.executable, str(GEN), *GEN_ARGS, "-o", str(trace)], check=True)
    return trace


def measure(trace: Path, package_dir: Path = REPO) -> dict:
    """Run the measurement in a fresh helper process, so the generator's RSS is not seen."""
    done = subprocess.run([sys.executable, __file__, "--measure", str(trace),
                           str(package_dir)], stdout=subprocess.PIPE, check=True, cwd=REPO)
    return json.loads(done.stdout)


def measure_here(trace: Path, package_dir: Path) -> dict:
    """Time ``python -m nnscope.parse_systrace``, or for a baseline checkout ``python -m
    parse_systrace`` run from ``package_dir`` (so that its own top-level folder is the one used)."""
    module = "nnscope.parse_systrace" if package_dir.resolve() == REPO.resolve() else "parse_systrace"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", module, str(trace)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=package_dir)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"parse_systrace failed: {done.stderr.decode()[-500:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    size_mb = trace.stat().st_size / 1e6
    return {"seconds": round(seconds, 3), "trace_mb": round(size_mb, 1),
            "mb_per_s": round(size_mb / seconds, 1), "peak_rss_mb": round(peak_kb / 1024, 1),
            "target_seconds": TARGET_SECONDS, "target_peak_rss_mb": TARGET_RSS_MB,
            "generator_args": GEN_ARGS}


def best_of(trace: Path, repeat: int, baseline) -> tuple:
    """Best (fastest) current and baseline results over ``repeat`` alternating rounds."""
    best = {}
    for _ in range(repeat):
        for name, directory in (("baseline", baseline), ("current", REPO)):
            if directory is None:
                continue
            result = measure(trace, Path(directory))
            if name not in best or result["seconds"] < best[name]["seconds"]:
                best[name] = result
    return best["current"], best.get("baseline")


def _line(label: str, result: dict) -> str:
    return (f"{label}: {result['seconds']:.2f} s, {result['mb_per_s']:.1f} MB/s, "
            f"peak RSS {result['peak_rss_mb']:.0f} MB ({result['trace_mb']} MB trace)")


def main() -> int:
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure_here(Path(sys.argv[2]), Path(sys.argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs (default 1)")
    parser.add_argument("--baseline", help="directory holding an older parse_systrace package")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        trace = generate(directory)
        result, baseline = best_of(trace, args.repeat, args.baseline)
    if baseline is not None:
        print(_line("baseline     ", baseline))
        result = dict(result, repeat=args.repeat, baseline=baseline,
                      speedup=round(baseline["seconds"] / result["seconds"], 2))
    print(_line("parse_systrace", result))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
