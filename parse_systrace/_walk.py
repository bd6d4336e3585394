"""The summing walk of :func:`parse_systrace._tree.calculate`, in as few passes as possible.

Most trees have no ignored nodes, no ``[SW]`` placeholders and no misplaced nodes, and
for them steps 1-3 of section 5 change nothing: one walk validates nesting and sums the
buckets (steps 4-6), and gives up (:class:`_Misplaced`) at the first misplaced node. Trees
that need steps 1-3 get one preparing walk (:func:`prepare`: child lists rebuilt without
ignored nodes and placeholders, misplaced nodes collected in pre-order), the relocation,
and then the summing walk. Per-node decisions that only depend on the node's and its
parent's (layer, phase) are cached per walk; buckets are summed under tuple keys.

Example:
    >>> from parse_systrace import _tree
    >>> root = _tree.new_root()
    >>> pe = _tree.add(root, 1.0, "[NN_LA_PE]run", "LA", "PE", "PO", False, 1)
    >>> pe[_tree.E] = 1.5
    >>> calculate(root, 0, 0)
    {'PO_LA_PE': 500.0}
"""
from __future__ import annotations

from parse_systrace import _tree
from parse_systrace._tree import (A, C, E, IGNORE, L, M, P, PAR, PE_SUBPHASES, S, SUB,
                                  SUBPHASES)

_NO_SUB = ()
_LR_LI = ("LR", "LI")
_PE_AND_SUBPHASES = ("PE",) + PE_SUBPHASES
_MISPLACED = object()  # a cached relation: the node must be relocated (step 2)


class _Misplaced(Exception):
    """The walk met a node that step 2 relocates: the tree needs the full treatment."""


def calculate(root: list, ignored: int = 1, placeholders: int = 1) -> dict:
    """Transform a finished tree (in place) and return ``{"<app>_<layer>_<phase>": ms}``."""
    if ignored or placeholders:
        found = prepare(root, ignored, placeholders)
    else:
        try:
            return accumulate(root, detect=True)
        except _Misplaced:
            found = prepare(root, 0, 0)
    if found:
        _tree.insert_missing_la(_tree.relocate(found))
    return accumulate(root, detect=False)


def _misplaced(layer, phase, parent_layer, parent_phase) -> bool:
    """Step 2's test for a node that is not flagged subtract (root: parent layer None)."""
    return (phase == "PI" and parent_phase != "PI") or (
        parent_layer == "LA" and layer in _LR_LI and parent_phase != phase
        and parent_phase != "PO" and phase not in _PE_AND_SUBPHASES)


def prepare(root: list, ignored: int, placeholders: int) -> list:
    """Step 1 (rebuild child lists without ignored nodes, then placeholders) and step 2's
    pre-order collection of misplaced nodes, in one walk; returns those nodes."""
    found: list = []

    def visit(node: list, phase) -> None:
        layer, children = node[L], node[C]
        if children and (ignored or placeholders):
            children = _rebuilt(node, ignored, placeholders)
        for child in children:
            child_phase = child[P]
            if child_phase == "PU":
                child_phase = phase
            if child[SUB] or _misplaced(child[L], child_phase, layer, phase):
                found.append(child)
            visit(child, child_phase)

    visit(root, None)
    return found


def _rebuilt(node: list, ignored: int, placeholders: int) -> list:
    """The node's children once ignored nodes, then placeholders, are removed (each
    removed node's children move to the end of its parent's list, in removal order)."""
    children = node[C]
    new = _without_ignored(children) if ignored else children
    if placeholders:
        new = _without_placeholders(new, ignored)
    if new is not children:
        node[C] = new
        for child in new:
            child[PAR] = node
    return new


def _without_ignored(children: list) -> list:
    kept = [child for child in children if child[L] != IGNORE]
    if len(kept) == len(children):
        return children
    for child in children:
        if child[L] == IGNORE:
            kept.extend(_without_ignored(child[C]))
    return kept


def _without_placeholders(children: list, ignored: int) -> list:
    kept = [child for child in children if child[M] is not None]
    if len(kept) == len(children):
        return children
    for child in children:
        if child[M] is None:
            grandchildren = _without_ignored(child[C]) if ignored else child[C]
            kept.extend(_without_placeholders(grandchildren, ignored))
    return kept


def _relation(node: list, phase, parent_layer, parent_phase, detect: bool):
    """Whether the node is added detail (or ``_MISPLACED`` when ``detect``); validates
    nesting (step 4). Depends only on the node's and its parent's layer and phase."""
    layer = node[L]
    if detect and _misplaced(layer, phase, parent_layer, parent_phase):
        return _MISPLACED
    if parent_layer is None:
        return False
    _tree.check_nesting(node)
    return (layer == parent_layer
            and phase not in SUBPHASES.get(parent_phase, _NO_SUB)
            and not (phase == "PI" and parent_phase != "PI"))


def _subtracted(node: list, parent_layer, parent_phase) -> float:
    """subtracted_ms with the parent's layer and phase known (no parent lookups)."""
    if node[SUB]:
        return (node[E] - node[S]) * 1000.0
    phase = node[P]
    if phase == "PU":
        phase = parent_phase
    layer = node[L]
    if (layer != parent_layer or phase in SUBPHASES.get(parent_phase, _NO_SUB)
            or (phase == "PI" and parent_phase != "PI")):
        return 0.0
    subtract = 0.0
    for child in node[C]:
        subtract = subtract + _subtracted(child, layer, phase)
    return subtract


def accumulate(root: list, detect: bool) -> dict:
    """Steps 4-6: validate and sum elapsed-less-subtracted times into buckets.

    With ``detect``, raise :class:`_Misplaced` at the first node step 2 would move.
    """
    stats: dict = {}
    in_pe: dict = {}
    relations: dict = {}

    def visit(node: list, phase, parent_layer, parent_phase) -> None:
        layer, children = node[L], node[C]
        if node[SUB]:
            if detect:
                raise _Misplaced
        else:
            key = (layer, phase, parent_layer, parent_phase)
            added = relations.get(key)
            if added is None:
                added = relations[key] = _relation(node, phase, parent_layer, parent_phase,
                                                   detect)
            if added is _MISPLACED:
                raise _Misplaced
            if not added:
                value = (node[E] - node[S]) * 1000.0
                for child in children:
                    if child[SUB] or child[L] == layer:
                        value = value - _subtracted(child, layer, phase)
                key = (node[A], layer, phase)
                stats[key] = stats.get(key, 0.0) + value
                if phase in PE_SUBPHASES and not in_pe.get(layer):
                    key = (node[A], layer, "PE")
                    stats[key] = stats.get(key, 0.0) + value
        if not children:
            return
        if phase == "PE":
            in_pe[layer] = in_pe.get(layer, 0) + 1
        for child in children:
            child_phase = child[P]
            visit(child, phase if child_phase == "PU" else child_phase, layer, phase)
        if phase == "PE":
            in_pe[layer] -= 1

    for top in root[C]:
        visit(top, top[P] if top[P] != "PU" else None, None, None)
    return {f"{app}_{layer}_{phase}": value for (app, layer, phase), value in stats.items()}
