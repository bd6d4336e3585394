"""Test helpers for dashboards: read the JSON blocks and the rendered tables of a page.

:func:`json_block` returns a ``<script type="application/json">`` block by id (from a
rendered page or a browser's DOM dump); :func:`dom_tables` the tables as
``{(kind, mode): [(label, [cell text ...]), ...]}``; :func:`golden_tables` the same rows
from a parse_systrace golden text file, one list per run.

Example:
    >>> golden_rows("Application   n/a   1.25*\\nTotal  -*  3.00*")
    [('Application', ['n/a', '1.25*']), ('Total', ['-*', '3.00*'])]
"""
from __future__ import annotations

import json
from html.parser import HTMLParser

LABELS = ("Application", "Runtime", "IPC", "Driver", "CPU", "Total")
#: golden file suffix -> (table kind, mode) in the page
GOLDEN_KINDS = {"default": ("all", "self"), "total-times": ("all", "total"),
                "per-execution": ("per-execution", "self"),
                "total-times.per-execution": ("per-execution", "total")}


def json_block(page: str, block_id: str):
    """The parsed JSON of ``<script ... id="block_id">``."""
    start = page.index(f'id="{block_id}"')
    start = page.index(">", start) + 1
    return json.loads(page[start:page.index("</script>", start)])


def view_rows(table: dict) -> list:
    """``(label, [text + '*' if starred])`` rows of one view-model table."""
    return [(row["label"], [cell["t"] + ("*" if cell["s"] else "") for cell in row["cells"]])
            for row in table["rows"]]


def golden_rows(text: str) -> list:
    """The layer rows of one golden table (label and its cells)."""
    rows = []
    for line in text.splitlines():
        words = line.split()
        if words and words[0] in LABELS and len(words) > 1:
            rows.append((words[0], words[1:]))
    return rows


def golden_tables(text: str) -> list:
    """One list of rows per run of a golden text file (runs start with ``B|``)."""
    runs = []
    for part in text.split("\nB|")[0:]:
        rows = golden_rows(part)
        if rows:
            runs.append(rows)
    return runs


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables, self.current, self.row, self.cell = [], None, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and "summary" in (attrs.get("class") or ""):
            self.current = dict(kind=attrs.get("data-kind"), mode=attrs.get("data-mode"),
                                rows=[], body=False)
            self.tables.append(self.current)
        elif self.current is not None and tag == "tbody":
            self.current["body"] = True
        elif self.current is not None and self.current["body"] and tag == "tr":
            self.row = []
            self.current["rows"].append(self.row)
        elif self.row is not None and tag in ("th", "td"):
            self.cell = []
            self.row.append(self.cell)

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self.cell = None
        elif tag == "tr":
            self.row = self.cell = None
        elif tag == "table":
            self.current = self.row = self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def dom_tables(page: str) -> dict:
    """``{(kind, mode): [rows of the k-th table of that kind and mode, ...]}``."""
    parser = _Tables()
    parser.feed(page)
    found = {}
    for table in parser.tables:
        rows = [("".join(row[0]).strip(), ["".join(cell).strip() for cell in row[1:]])
                for row in table["rows"]]
        found.setdefault((table["kind"], table["mode"]), []).append(rows)
    return found
