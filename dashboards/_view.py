"""View model: the report data turned into ready-to-lay-out tables and chart series.

All number formatting lives here (so it is tested in Python and the page's script only
lays things out). Cells follow the established tool's text tables: two decimals, ``-``
for zero, ``n/a`` for a missing value, ``*`` on totals that ignore missing values.

Example:
    >>> cell(0.0)["t"], cell(None)["t"], cell(12.345)["t"], cell(2.5, star=True)["s"]
    ('-', 'n/a', '12.35', True)
"""
from __future__ import annotations

LAYERS = (("LA", "Application"), ("LR", "Runtime"), ("LI", "IPC"), ("LD", "Driver"),
          ("LC", "CPU"))
MAIN_PHASES = (("PI", "Initialization"), ("PP", "Preparation"), ("PC", "Compilation"),
               ("PE", "Execution"), ("PT", "Termination"))
ALL_COLUMNS = (("PI", "Initialization"), ("PP", "Preparation"), ("PC", "Compilation"),
               ("PIO", "I/O"), ("PEO", "Compute"), ("PR", "Results"), ("PE", "Ex. total"),
               ("PT", "Termination"), ("PO", "Total"))
EXEC_COLUMNS = (("PIO", "I/O"), ("PEO", "Compute"), ("PR", "Results"), ("PE", "Total"))
#: Phases whose CPU cell decides whether the CPU row is shown (as parse_systrace does).
CPU_PHASES = ("PI", "PP", "PC", "PE", "PT", "PIO", "PR")
BENCH_PHASES = ("PE", "PIO", "PTR", "PCO", "PR")
MODES = (("self", "self-times"), ("total", "total time"))


def cell(value, star: bool = False, percent: bool = False) -> dict:
    """One table cell: text ``t``, kind ``k`` (num/zero/na/neg) and star flag ``s``."""
    if value is None or value != value:
        return dict(t="n/a", k="na", s=star)
    text = f"{value:.2f}"
    if text == "0.00":
        return dict(t="-", k="zero", s=star)
    return dict(t=text + ("%" if percent else ""), k="neg" if value < 0 else "num", s=star)


def cpu_shown(run: dict, total: bool, per_execution: bool) -> bool:
    """Whether the CPU row appears: some CPU figure of the chosen times is positive."""
    use = dict(run["times" if total else "self_times"])
    if per_execution and isinstance(use.get("PBM"), dict):
        use.update({phase: use["PBM"][phase] for phase in BENCH_PHASES})
    return any((use[phase]["LC"] or 0.0) > 0.0 for phase in CPU_PHASES)


def _layer_rows(shown_cpu: bool) -> list:
    return [(code, name) for code, name in LAYERS if code != "LC" or shown_cpu]


def all_phases_table(run: dict, inputs: dict, total: bool) -> dict:
    """The full table: layers x (phases, execution split, total)."""
    rows = []
    for code, name in _layer_rows(cpu_shown(run, total, False)):
        cells = [cell(inputs[f"{code}_{key}"], star=code == "LA" and key == "PO")
                 for key, _ in ALL_COLUMNS]
        rows.append(dict(label=name, layer=code, cells=cells))
    rows.append(dict(label="Total", layer="LT", total=True,
                     cells=[cell(inputs[f"LT_{key}"], star=True) for key, _ in ALL_COLUMNS]))
    return dict(columns=[label for _, label in ALL_COLUMNS], group=("Execution", 3, 4),
                rows=rows)


def per_execution_table(run: dict, inputs: dict, total: bool) -> dict:
    """Execution only, divided by the execution count, with each layer's percentage."""
    rows = []
    for code, name in _layer_rows(cpu_shown(run, total, True)):
        cells = [cell(inputs[f"{code}_{key}"]) for key, _ in EXEC_COLUMNS]
        cells.append(cell(inputs[f"{code}_PEp"], percent=True))
        rows.append(dict(label=name, layer=code, cells=cells))
    cells = [cell(inputs[f"LT_{key}"], star=key != "PE") for key, _ in EXEC_COLUMNS]
    cells.append(dict(t="100%", k="num", s=False))
    rows.append(dict(label="Total", layer="LT", total=True, cells=cells))
    columns = [label for _, label in EXEC_COLUMNS] + ["Percentage"]
    return dict(columns=columns, group=None, rows=rows)


def _sub(values: dict, key: str):
    return values.get(key) if values else None


def _minus(a, *rest):
    if a is None or any(value is None for value in rest):
        return None
    return a - sum(rest)


def warmup_benchmark_table(run: dict, total: bool) -> dict:
    """Warmup next to benchmark: I/O, compute, results, total and ms per execution."""
    use = run["times" if total else "self_times"]
    counts = run["execution_counts"]
    rows = []
    for code, name in _layer_rows(cpu_shown(run, total, False)) + [("LT", "Total")]:
        cells = []
        for part in ("PWU", "PBM"):
            get = {phase: _sub(use[part].get(phase), code) for phase in BENCH_PHASES}
            per = get["PE"] / counts[part] if counts[part] and get["PE"] is not None else None
            cells += [cell(get["PIO"]), cell(_minus(get["PE"], get["PIO"], get["PR"])),
                      cell(get["PR"]), cell(get["PE"]), cell(per)]
        rows.append(dict(label=name, layer=code, total=code == "LT", cells=cells))
    columns = ["I/O", "Compute", "Results", "Total", "ms / exec"] * 2
    return dict(columns=columns, groups=[(f"Warmup ({counts['PWU']} exec.)", 0, 5),
                                         (f"Benchmark ({counts['PBM']} exec.)", 5, 5)],
                rows=rows)


def chart_series(run: dict) -> list:
    """Self-times per main phase, one segment per layer (missing or negative as 0)."""
    series = []
    for phase, label in MAIN_PHASES:
        values = run["self_times"][phase]
        segments = [dict(layer=code, value=max(values[code] or 0.0, 0.0))
                    for code, _ in LAYERS]
        series.append(dict(label=label, segments=segments, total=values["LT"]))
    return series


def phases_sum(series: list) -> str:
    """The sum of the phase bars' totals, as their labels round (two decimals): what "Where did
    the time go" adds up to, time on several threads at once counted on each."""
    return f"{sum(bar['total'] or 0.0 for bar in series):.2f}"


def execution_series(run: dict) -> list:
    """Per-execution self-time by layer: one bar, or warmup and benchmark bars."""
    counts, self_times = run["execution_counts"], run["self_times"]
    parts = [("Execution", self_times, counts["PO"])]
    if isinstance(self_times.get("PBM"), dict):
        parts = [(f"Warmup ({counts['PWU']}×)", self_times["PWU"], counts["PWU"]),
                 (f"Benchmark ({counts['PBM']}×)", self_times["PBM"], counts["PBM"])]
    series = []
    for label, values, count in parts:
        divide = count or 1
        segments = [dict(layer=code, value=max(values["PE"][code] or 0.0, 0.0) / divide)
                    for code, _ in LAYERS]
        series.append(dict(label=label, segments=segments,
                           total=(values["PE"]["LT"] or 0.0) / divide))
    return series


def run_view(run: dict, variants: dict, index: int) -> dict:
    """Everything shown for one run."""
    inputs = dict(self=run["template_inputs"], total=variants["total"][index])
    per_exec = dict(self=variants["per_execution"][index],
                    total=variants["total_per_execution"][index])
    both = isinstance(run["times"].get("PBM"), dict)
    counts = run["execution_counts"]
    view = dict(mark=run["starting_mark"], title=run_title(run["starting_mark"]),
                counts=counts, both=both,
                executions=counts["PBM"] if both else counts["PO"],
                ms_per_execution=cell(per_exec["self"]["LT_PE"])["t"],
                tables={}, per_execution={}, warmup_benchmark={},
                chart=chart_series(run), execution_chart=execution_series(run))
    view["chart_sum"] = phases_sum(view["chart"])
    for mode, _ in MODES:
        total = mode == "total"
        view["tables"][mode] = all_phases_table(run, inputs[mode], total)
        view["per_execution"][mode] = per_execution_table(run, per_exec[mode], total)
        if both:
            view["warmup_benchmark"][mode] = warmup_benchmark_table(run, total)
    return view


def run_title(mark: str) -> str:
    """``B|123|[NN_LA_PO]mobilenet`` -> ``mobilenet`` (the mark itself if no name)."""
    name = mark.rpartition("]")[2].strip()
    return name or mark or "(no starting mark)"


def build_view(report: dict) -> dict:
    """The page's data: meta plus one view per complete run."""
    runs = [run_view(run, report["variants"], index)
            for index, run in enumerate(report["summary"])]
    return dict(meta=report["meta"], runs=runs, layers=[list(pair) for pair in LAYERS],
                modes=[list(pair) for pair in MODES])
