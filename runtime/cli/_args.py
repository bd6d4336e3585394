"""argparse value types shared by the ``nnscope`` subcommands: one clear line for a bad value.

Example:
    >>> count("3"), positive_float("0.5")
    (3, 0.5)
    >>> description("``nnscope run``: build a model.")
    'Build a model.'
"""
from __future__ import annotations

import argparse
import math


def _parsed(text: str, parse, what: str):
    try:
        return parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def count(text: str) -> int:
    """A whole number >= 0."""
    value = _parsed(text, int, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    value = count(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be >= 1, got 0")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _parsed(text, float, "a number")
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def description(doc: str) -> str:
    """A subcommand's ``--help`` description: its module docstring's first paragraph, as plain
    text (``"``nnscope run``: build..."`` -> ``"Build..."``)."""
    text = " ".join(doc.split("\n\n")[0].split())
    if text.startswith("``") and "``: " in text:
        text = text.split("``: ", 1)[1]
    text = text.replace("``", "")
    return text[:1].upper() + text[1:]
