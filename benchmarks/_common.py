"""Shared by the benchmark scripts, which run as ``python benchmarks/<name>.py`` (this
directory is then first on ``sys.path``)."""
from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def write_results(name: str, results: dict) -> None:
    """Write ``results`` to ``benchmarks/results/<name>.json`` and print the same JSON object
    as one line (the benchmark's last line of output)."""
    out = RESULTS / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results))
