"""The fleet page: the distributions per group of a fleet summary, and a comparison.

Reads the JSON of ``parse_systrace fleet summary --json`` (a list of records: group keys,
``phase``, ``layer``, ``count``, ``median``, ``p90``, ``spread``, ``min``, ``p10``, ``p25``,
``p75``, ``max``) and, optionally, of ``parse_systrace fleet compare --json`` (``a``, ``b``,
``by``, ``method``, ``cells``). Either file can be the page's input: :func:`is_fleet_file`
tells them apart from traces and bench reports by content. The page is drawn here as inline
SVG (no script needed): per phase and layer, one box per group (box p25 to p75, whiskers p10
to p90, a tick at the median, dots at min and max, all runs' self-times in ms); then the
comparison's significant cells as a forest plot (change and interval, %) and every cell in a
table.

Example:
    >>> summary = [{"device": "pixel6", "phase": "PE", "layer": "LD", "count": 3, "median": 2.0,
    ...             "p90": 2.8, "spread": 0.5, "min": 1.5, "p10": 1.6, "p25": 1.8, "p75": 2.3,
    ...             "max": 3.0}]
    >>> page = render_fleet_page(summary, None, "lab.json")
    >>> page.startswith("<!DOCTYPE html>"), "pixel6" in page, page.count("<svg")
    (True, True, 1)
"""
from __future__ import annotations

import html
import json

from nnscope.dashboards.renderers.html import page_head

FIGURES = ("phase", "layer", "count", "median", "p90", "spread", "min", "p10", "p25", "p75", "max")
PHASE_NAMES = {"PI": "Initialization", "PP": "Preparation", "PC": "Compilation", "PE": "Execution",
               "PIO": "Execution I/O", "PTR": "Transformation", "PCO": "Computation",
               "PR": "Results", "PT": "Termination", "PO": "Overall"}
LAYER_NAMES = {"LA": "Application", "LR": "Runtime", "LI": "IPC", "LD": "Driver", "LC": "CPU",
               "LT": "Total"}
VERDICT_COLOURS = {"slower": "#ef4444", "faster": "#10b981", "within noise": "#64748b", "n/a": "#94a3b8"}
_SNIFF = 4096
_ROW, _LABEL, _WIDTH = 16, 190, 720

CSS = """<style>
.fleet svg{display:block;margin:.3rem 0 1.2rem;font:11px system-ui,sans-serif}
.fleet table{border-collapse:collapse;font-size:12px}.fleet td,.fleet th{padding:2px 8px;text-align:right}
.fleet td:first-child,.fleet th:first-child{text-align:left}.fleet h3{margin:1rem 0 .2rem}
</style>"""


def is_fleet_file(path) -> bool:
    """Whether ``path`` holds a fleet summary or comparison (JSON naming their fields)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF).lstrip()
    except OSError:
        return False
    summary = head.startswith(b"[") and b'"p90"' in head and b'"spread"' in head
    comparison = head.startswith(b"{") and b'"method"' in head and b'"cells"' in head
    return summary or comparison


def load_fleet(path) -> tuple:
    """(summary records or None, comparison or None) of one fleet JSON file."""
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    if isinstance(document, dict):
        return None, document
    return document, None


def _box_chart(records: list, keys: list) -> str:
    top = max(record["max"] for record in records) or 1.0
    scale = (_WIDTH - _LABEL - 20) / top
    height = _ROW * len(records) + 24

    def x(value: float) -> float:
        return round(_LABEL + value * scale, 1)

    parts = [f'<svg width="{_WIDTH}" height="{height}" role="img">']
    for i, r in enumerate(records):
        y = 4 + i * _ROW
        label = html.escape(" / ".join(str(r[key]) for key in keys) or "all")
        parts.append(f'<text x="{_LABEL - 6}" y="{y + 11}" text-anchor="end">{label}</text>'
                     f'<line x1="{x(r["p10"])}" x2="{x(r["p90"])}" y1="{y + 7}" y2="{y + 7}" stroke="#64748b"/>'
                     f'<rect x="{x(r["p25"])}" y="{y + 2}" width="{max(1.0, x(r["p75"]) - x(r["p25"]))}" '
                     f'height="10" fill="#c7d2fe" stroke="#3559e0"/>'
                     f'<line x1="{x(r["median"])}" x2="{x(r["median"])}" y1="{y}" y2="{y + 14}" '
                     f'stroke="#1e293b" stroke-width="2"/>'
                     f'<circle cx="{x(r["min"])}" cy="{y + 7}" r="1.5"/><circle cx="{x(r["max"])}" '
                     f'cy="{y + 7}" r="1.5"/><title>{label}: median {r["median"]:.3f} ms, p90 '
                     f'{r["p90"]:.3f} ms, spread {r["spread"]:.3f} ms, {r["count"]} runs</title>')
    axis = height - 8
    parts.append(f'<line x1="{_LABEL}" x2="{_WIDTH - 20}" y1="{axis - 8}" y2="{axis - 8}" stroke="#cbd5e1"/>'
                 f'<text x="{_LABEL}" y="{axis + 4}">0</text>'
                 f'<text x="{_WIDTH - 20}" y="{axis + 4}" text-anchor="end">{top:.3g} ms</text></svg>')
    return "".join(parts)


def distributions_html(summary: list) -> str:
    """One box chart per phase and layer that some run spends time in."""
    keys = [name for name in summary[0] if name not in FIGURES] if summary else []
    cells: dict = {}
    for record in summary:
        if record.get("max"):
            cells.setdefault((record["phase"], record["layer"]), []).append(record)
    order = list(PHASE_NAMES)
    sections = []
    for (phase, layer), records in sorted(cells.items(), key=lambda item: (
            order.index(item[0][0]) if item[0][0] in order else 99, list(LAYER_NAMES).index(item[0][1])
            if item[0][1] in LAYER_NAMES else 99)):
        title = f"{PHASE_NAMES.get(phase, phase)} · {LAYER_NAMES.get(layer, layer)} ({phase} {layer})"
        sections.append(f"<h3>{html.escape(title)}</h3>{_box_chart(records, keys)}")
    return "".join(sections)


def _forest(cells: list, by: list) -> str:
    low = min(min(c["ci_low_pct"] for c in cells), 0.0)
    high = max(max(c["ci_high_pct"] for c in cells), 0.0)
    span = (high - low) or 1.0
    scale = (_WIDTH - _LABEL - 20) / span

    def x(value: float) -> float:
        return round(_LABEL + (value - low) * scale, 1)

    height = _ROW * len(cells) + 24
    parts = [f'<svg width="{_WIDTH}" height="{height}" role="img">',
             f'<line x1="{x(0)}" x2="{x(0)}" y1="0" y2="{height - 16}" stroke="#94a3b8" stroke-dasharray="3"/>']
    for i, c in enumerate(cells):
        y = 4 + i * _ROW
        colour = VERDICT_COLOURS.get(c["verdict"], "#64748b")
        label = html.escape(" / ".join(str(c[key]) for key in by) + f" {c['phase']} {c['layer']}")
        parts.append(f'<text x="{_LABEL - 6}" y="{y + 11}" text-anchor="end">{label}</text>'
                     f'<line x1="{x(c["ci_low_pct"])}" x2="{x(c["ci_high_pct"])}" y1="{y + 7}" '
                     f'y2="{y + 7}" stroke="{colour}" stroke-width="2"/>'
                     f'<circle cx="{x(c["change_pct"])}" cy="{y + 7}" r="3.5" fill="{colour}"/>'
                     f'<title>{label}: {c["change_pct"]:+.1f}% ({c["ci_low_pct"]:+.1f}% .. '
                     f'{c["ci_high_pct"]:+.1f}%), {c["verdict"]}</title>')
    parts.append(f'<text x="{_LABEL}" y="{height - 2}">{low:+.0f}%</text><text x="{_WIDTH - 20}" '
                 f'y="{height - 2}" text-anchor="end">{high:+.0f}%</text></svg>')
    return "".join(parts)


def comparison_html(comparison: dict) -> str:
    """The comparison: its sides and method, a forest plot of the changes, the table."""
    by, cells = comparison.get("by", []), comparison.get("cells", [])
    notable = [c for c in cells if c["verdict"] in ("slower", "faster")]
    counts = ", ".join(f"{sum(c['verdict'] == v for c in cells)} {v}" for v in VERDICT_COLOURS)
    head = (f"<p>A = <code>{html.escape(str(comparison.get('a')))}</code>, B = "
            f"<code>{html.escape(str(comparison.get('b')))}</code>: {counts}.</p>"
            f"<p class=\"sub\">{html.escape(comparison.get('method', ''))}</p>")
    forest = _forest(notable, by) if notable else "<p>No significant change.</p>"
    columns = [*by, "phase", "layer", "n_a", "n_b", "median_a", "median_b", "change_pct",
               "ci_low_pct", "ci_high_pct", "verdict"]
    rows = "".join("<tr>" + "".join(f"<td>{_cell(c.get(name))}</td>" for name in columns) + "</tr>"
                   for c in sorted(cells, key=lambda c: c["verdict"] not in ("slower", "faster")))
    table = (f"<details><summary>All {len(cells)} cells</summary><table><tr>"
             + "".join(f"<th>{html.escape(name)}</th>" for name in columns) + f"</tr>{rows}</table></details>")
    return head + forest + table


def _cell(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    return html.escape(str(value))


def render_fleet_page(summary, comparison, title: str = "fleet") -> str:
    """The whole page (``summary`` and ``comparison`` may each be None)."""
    body = [f'<header class="report"><div><h1>NNAPI fleet report</h1>'
            f'<p class="sub mono">{html.escape(title)}</p></div></header>']
    if comparison:
        body.append(f'<section class="fleet"><h2 class="view-title">Comparison</h2>'
                    f"{comparison_html(comparison)}</section>")
    if summary:
        groups = {tuple(v for k, v in r.items() if k not in FIGURES) for r in summary}
        body.append(f'<section class="fleet"><h2 class="view-title">Distributions per group '
                    f'({len(groups)} groups; self-times per run, ms)</h2>{distributions_html(summary)}</section>')
    return (page_head(f"nnscope fleet · {title}") + CSS + '<body><div class="page">' + "".join(body)
            + "<footer>nnscope · fleet report</footer></div></body></html>\n")
