"""``nnscope bench``'s progress bar (tqdm): shown after one second, only on a terminal.

Example:
    >>> with bar(100, "bench") as progress:  # prints nothing here: a doctest's output is no terminal
    ...     label(progress, "tiny_add on sample-all")   # "tiny_add on sample-all:  1%| ... 1/100 executions"
    ...     progress.update(1)
"""
from __future__ import annotations

import sys

from tqdm import tqdm

SHOW_AFTER_S = 1.0
"""Runs shorter than this never draw a bar."""


def bar(total: int | None, description: str, unit: str = "executions") -> tqdm:
    """A tqdm bar (a context manager) on stderr; disabled when stdout is not a TTY."""
    return tqdm(total=total, desc=description, delay=SHOW_AFTER_S, leave=False,
                disable=not sys.stdout.isatty(), file=sys.stderr, unit=f" {unit}")


def label(progress: tqdm, description: str) -> None:
    """Name what the bar counts now (tqdm adds the one ": " after it)."""
    progress.set_description_str(description)
