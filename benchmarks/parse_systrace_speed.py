"""Speed and memory of ``parse_systrace`` on a large generated trace.

Generates (into a temporary directory) the 78 MB trace of
``gen_systrace.py --seed 11 --scenario mixed --runs 40 --execs 400`` (about 770,000
marks), times the default summary in a subprocess (wall seconds, and peak RSS from
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``), prints seconds, MB/s and peak RSS,
writes ``benchmarks/results/parse_systrace_speed.json`` and prints a final JSON line.

Example:
    $ python benchmarks/parse_systrace_speed.py
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NNSCOPE_SHARED", REPO.parent / "shared"))
GEN = SHARED / "tools" / "gen_systrace.py"
RESULTS = REPO / "benchmarks" / "results" / "parse_systrace_speed.json"
GEN_ARGS = ["--seed", "11", "--scenario", "mixed", "--runs", "40", "--execs", "400"]
TARGET_SECONDS, TARGET_RSS_MB = 1.3, 150.0


def generate(directory: str) -> Path:
    trace = Path(directory) / "big.html"
    subprocess.run([sys.executable, str(GEN), *GEN_ARGS, "-o", str(trace)], check=True)
    return trace


def measure(trace: Path) -> dict:
    """Run the measurement in a fresh helper process, so the generator's RSS is not seen."""
    done = subprocess.run([sys.executable, __file__, "--measure", str(trace)],
                          stdout=subprocess.PIPE, check=True, cwd=REPO)
    return json.loads(done.stdout)


def measure_here(trace: Path) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "parse_systrace", str(trace)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"parse_systrace failed: {done.stderr.decode()[-500:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    size_mb = trace.stat().st_size / 1e6
    return {"seconds": round(seconds, 3), "trace_mb": round(size_mb, 1),
            "mb_per_s": round(size_mb / seconds, 1), "peak_rss_mb": round(peak_kb / 1024, 1),
            "target_seconds": TARGET_SECONDS, "target_peak_rss_mb": TARGET_RSS_MB,
            "generator_args": GEN_ARGS}


def main() -> int:
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure_here(Path(sys.argv[2]))))
        return 0
    with tempfile.TemporaryDirectory() as directory:
        trace = generate(directory)
        result = measure(trace)
    print(f"parse_systrace: {result['seconds']:.2f} s, {result['mb_per_s']:.1f} MB/s, "
          f"peak RSS {result['peak_rss_mb']:.0f} MB ({result['trace_mb']} MB trace)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
