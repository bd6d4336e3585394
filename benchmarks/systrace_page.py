"""Cost of the ``.html`` systrace export as a report page, next to the bare systrace page.

Records a real traced run (MobileNet on ``sample-all``, ``--executions`` executions, driver
process included), then exports the same trace alternately with the bare exporter
(``systrace-html-bare``: the trace-data block only) and the page exporter (``systrace-html``:
the dashboard report around the same block), best of ``--repeat`` each, in wall seconds.
Prints the figures, writes ``benchmarks/results/systrace_page.json`` and prints the same JSON
object as the last line.

Example:
    $ python benchmarks/systrace_page.py --executions 200 --repeat 3
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import write_results  # noqa: E402


def record(executions: int):
    """The trace of ``executions`` MobileNet executions on sample-all."""
    from nnscope import tracing  # noqa: PLC0415
    from nnscope.runtime import builtin_models, manager  # noqa: PLC0415
    from nnscope.runtime.cli._backend import compute_arrays  # noqa: PLC0415
    from nnscope.runtime.compilation import Compilation  # noqa: PLC0415
    from nnscope.tracing import Phase  # noqa: PLC0415

    model = builtin_models.mobilenet()
    session = tracing.TraceSession()
    session.start()
    try:
        with tracing.application(Phase.OVERALL, "systrace_page"):
            compilation = Compilation(model, [manager.get_device("sample-all")])
            compilation.finish()
            inputs = builtin_models.sample_input(model)
            for _ in range(executions):
                with tracing.application(Phase.EXECUTION, "execution"):
                    compute_arrays(compilation, inputs)
    finally:
        manager.shutdown()
        session.stop()
    return session.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=200, help="executions traced (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="exports of each kind, best kept (default 3)")
    args = parser.parse_args()
    from nnscope.tracing.exporters import ExportResult, get_exporter  # noqa: PLC0415

    trace = record(args.executions)
    best = {"systrace-html-bare": float("inf"), "systrace-html": float("inf")}
    sizes = {}
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(args.repeat):
            for name in best:
                path = os.path.join(directory, f"{name}.html")
                started = time.perf_counter()
                assert get_exporter(name)(path).export(trace) is ExportResult.SUCCESS
                best[name] = min(best[name], time.perf_counter() - started)
                sizes[name] = os.path.getsize(path)
    results = dict(executions=args.executions, spans=trace.span_count(),
                   bare_export_s=best["systrace-html-bare"], page_export_s=best["systrace-html"],
                   bare_bytes=sizes["systrace-html-bare"], page_bytes=sizes["systrace-html"])
    print(f"{results['spans']:,} spans: bare page {results['bare_export_s']:.3f} s "
          f"({results['bare_bytes']:,} B), report page {results['page_export_s']:.3f} s "
          f"({results['page_bytes']:,} B)")
    write_results("systrace_page", results)


if __name__ == "__main__":
    main()
