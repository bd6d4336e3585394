"""The ``debug.nn.vlog`` grammar: a tag list turned into a bitmask.

Mirrors AOSP's ``initVLogMask`` (``nn/common/Utils.cpp``): tags are separated by
whitespace, commas or colons in any mix; ``1`` and ``all`` switch on every tag of
:data:`TAGS`; an empty value switches everything off. Unlike AOSP, matching ignores case and
empty tokens (from doubled separators) are skipped instead of reported, and the finer tags of
:data:`FINE_TAGS` (one line per operation, hundreds per compilation) are on only when named.

Example:
    >>> parse("model, execution")
    Parsed(mask=5, unknown=())
    >>> parse("ALL").mask == ALL_MASK
    True
    >>> parse("model:Bogus")
    Parsed(mask=1, unknown=('Bogus',))
    >>> parse("all").mask & BITS["partition"], parse("all partition").mask & BITS["partition"]
    (0, 64)
"""
from __future__ import annotations

import re
from typing import NamedTuple

#: The vlog tags, in bit order (bit i is ``1 << i``), as in AOSP's ``VLogFlags``.
TAGS = ("model", "compilation", "execution", "cpuexe", "manager", "driver")
#: Finer tags, not in AOSP and not switched on by ``1``/``all``: each is on only when named.
#: ``partition``: the partitioner's per-operation lines (``Device X can't do operation PAD``,
#: ``findBestDeviceForEachOperation(PAD) = 1 (...)``), which ``compilation`` sums up as one
#: line per device per compilation.
FINE_TAGS = ("partition",)

BITS = {tag: 1 << index for index, tag in enumerate(TAGS + FINE_TAGS)}
ALL_MASK = (1 << len(TAGS)) - 1
_EVERYTHING = frozenset({"1", "all"})
_SEPARATORS = re.compile(r"[\s,:]+")


class Parsed(NamedTuple):
    """A parsed setting: the mask of known tags and the unknown tokens, in order."""

    mask: int
    unknown: tuple[str, ...]


def parse(value: str | None) -> Parsed:
    """Parses an ``NN_VLOG`` value.

    Args:
        value: The setting, e.g. ``"model compilation"``; None or blank means off.

    Returns:
        The mask of the known tags and the unknown tokens (each once, in order).
    """
    mask = 0
    unknown: list[str] = []
    for token in _SEPARATORS.split(value or ""):
        name = token.lower()
        if not name:
            continue
        if name in _EVERYTHING:
            mask = ALL_MASK
        elif name in BITS:
            mask |= BITS[name]
        elif token not in unknown:
            unknown.append(token)
    return Parsed(mask, tuple(unknown))


def unknown_tag_message(unknown: tuple[str, ...]) -> str:
    """Builds the one warning for unknown tags, naming them and the valid ones."""
    names = ", ".join(repr(token) for token in unknown)
    valid = ", ".join(("1", "all") + TAGS + FINE_TAGS)
    return f"NN_VLOG: ignoring unknown tag(s) {names}; valid tags: {valid}"
