"""Per-thread call trees: build from marks, transform, validate and sum into buckets.

A node is a plain list ``[start, end, layer, phase, app_phase, subtract, children,
parent, mark, where]`` (see the ``S``..``W`` indices; ``children`` is the shared empty tuple
until :func:`append` gives the node its first child: most nodes are leaves, and an empty list
each cost an allocation and a free per node); the root has ``mark`` ``ROOT`` and
placeholders pushed by ``[SW]`` have ``mark`` ``None``. Times are float seconds.
:func:`parse_systrace._walk.calculate` applies section 5 of the semantics in order (remove
ignored nodes and placeholders, relocate misplaced nodes, insert missing LA levels, validate
nesting) and returns the bucket sums ``{"<app>_<layer>_<phase>": ms}``; the per-step node
operations it uses live here.

Example:
    >>> from nnscope.parse_systrace._walk import calculate
    >>> root = new_root()
    >>> pe = add(root, 1.0, "[NN_LA_PE]run", "LA", "PE", "PO", False, 1)
    >>> io = add(pe, 1.001, "[NN_LR_PIO]set", "LR", "PIO", "PO", False, 2)
    >>> io[E], pe[E] = 1.003, 1.010
    >>> sorted(calculate(root).items())
    [('PO_LA_PE', 10.000000000000009), ('PO_LR_PE', 2.0000000000000018), ('PO_LR_PIO', 2.0000000000000018)]
"""
from __future__ import annotations

from nnscope.parse_systrace.errors import TraceFormatError, line_where

S, E, L, P, A, SUB, C, PAR, M, W = range(10)
ROOT = "<root>"
#: ``node[SUB]`` of a node that step 2 relocates without a ``[SUB]`` mark (truthy).
MOVED = "moved"
IGNORE = "LX"
#: Phase nesting: which phases a phase contains (the established tool's table).
SUBPHASES = {"PE": ("PIO", "PTR", "PCO", "PR"),
             "PO": ("PWU", "PBM", "PI", "PP", "PC", "PE", "PT"),
             "PWU": ("PE",), "PBM": ("PE",)}
PE_SUBPHASES = SUBPHASES["PE"]
LAYER_ORDER = {"LA": ("LR",), "LR": ("LI", "LC"), "LI": ("LD",)}
_NO_SUB = ()


def new_root() -> list:
    """An empty tree: the root node."""
    return [None, None, None, None, None, False, [], None, ROOT, 0]


def add(parent: list, start, mark, layer, phase, app_phase, subtract, where) -> list:
    """Append and return a new child of ``parent``."""
    node = [start, None, layer, phase, app_phase, subtract, (), parent, mark, where]
    append(parent, node)
    return node


def append(parent: list, node: list) -> None:
    """Add ``node`` as ``parent``'s last child (a childless node's children are ``()``)."""
    children = parent[C]
    if children:
        children.append(node)
    else:
        parent[C] = [node]


def unlink(root: list) -> None:
    """Drop every parent reference below ``root``, so the tree is freed without the gc."""
    stack = [root]
    while stack:
        children = stack.pop()[C]
        for child in children:
            child[PAR] = None
        stack.extend(children)


def phase_of(node: list):
    """The node's phase, resolving PU to the parent's phase (None for the root)."""
    phase = node[P]
    while phase == "PU":
        node = node[PAR]
        phase = node[P]
    return phase


def is_added_detail(node: list) -> bool:
    """Same layer as the parent, not a subphase, not moved-out PI, not subtract."""
    parent = node[PAR]
    if parent is None or parent[M] is ROOT or node[L] != parent[L] or node[SUB]:
        return False
    phase, parent_phase = phase_of(node), phase_of(parent)
    if phase in SUBPHASES.get(parent_phase, _NO_SUB):
        return False
    return not (phase == "PI" and parent_phase != "PI")


def elapsed_ms(node: list) -> float:
    return (node[E] - node[S]) * 1000.0


def subtracted_ms(node: list) -> float:
    subtract = 0.0
    if is_added_detail(node):
        for child in node[C]:
            subtract = subtract + subtracted_ms(child)
    elif node[SUB]:
        subtract = elapsed_ms(node)
    return subtract


def elapsed_less_subtracted_ms(node: list) -> float:
    value = elapsed_ms(node)
    for child in node[C]:
        value = value - subtracted_ms(child)
    return value


def relocate(node: list) -> list:
    """Step 2 for one node ([SUB], PI under non-PI, LR/LI under an LA node of another
    phase): append its copy upwards, flag the node subtract and return the copy.

    Call in pre-order, once the node's ancestors are final; ``node[SUB]`` is ``True`` for
    a ``[SUB]`` mark, :data:`MOVED` for the others. The copy's ``SUB`` is ``None``: it is
    never examined for relocation again.
    """
    target = node[PAR]
    if node[SUB] is True:
        while ((target[L] != node[L] or is_added_detail(target))
               and target[M] is not ROOT):
            target = target[PAR]
    elif phase_of(node) == "PI":
        while target[M] is not ROOT:
            target = target[PAR]
    else:
        target = target[PAR]
    if target[M] is not ROOT:
        target = target[PAR]
    copy = add(target, node[S], node[M], node[L], phase_of(node), node[A], None, node[W])
    copy[E] = node[E]
    node[SUB] = True
    return copy


def _needs_la(node: list) -> bool:
    if node[L] not in ("LR", "LI") or node[SUB] or is_added_detail(node):
        return False
    parent = node[PAR]
    phase, parent_phase = phase_of(node), phase_of(parent)
    return (parent[L] == "LA" and parent_phase != "PO" and parent_phase != phase
            and phase != "PE" and phase not in PE_SUBPHASES)


def insert_missing_la(node: list) -> None:
    """Step 3 for a copy made by step 2 (after step 2 every original node that qualifies is
    flagged subtract, so only those copies are candidates): an LR/LI node under an LA
    node of another phase gets its own LA parent."""
    if not _needs_la(node):
        return
    parent, phase = node[PAR], phase_of(node)
    new = [node[S], None, "LA", phase, node[A], False, [node], parent, node[M], node[W]]
    new[E] = node[S] + elapsed_less_subtracted_ms(node) / 1000.0
    siblings = parent[C]
    siblings[next(i for i in range(len(siblings) - 1, -1, -1) if siblings[i] is node)] = new
    node[PAR] = new


def check_nesting(node: list) -> None:
    """Step 4: raise TraceFormatError when the node breaks the nesting contract."""
    parent = node[PAR]
    if parent is None or parent[M] is ROOT or node[SUB]:
        return
    phase, parent_phase = phase_of(node), phase_of(parent)
    parent_subs = SUBPHASES.get(parent_phase, _NO_SUB)
    if not (phase == parent_phase or phase in ("PU", "PI") or phase in parent_subs
            or (phase in PE_SUBPHASES and "PE" in parent_subs)):
        _nesting_error(node, f"phase {phase} inside phase {parent_phase}")
    layer, parent_layer = node[L], parent[L]
    if not (layer == "LU" or layer == parent_layer
            or layer in LAYER_ORDER.get(parent_layer, _NO_SUB)):
        _nesting_error(node, f"layer {layer} inside layer {parent_layer}")


def _nesting_error(node: list, what: str) -> None:
    raise TraceFormatError(line_where(node[W]),
                           f"nesting violation: {what} ({node[M]!r} in {node[PAR][M]!r})")
