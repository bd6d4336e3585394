"""Section 5 on a finished call tree (:func:`calculate`): steps 1-6 in a single walk.

One pre-order walk over the tree does everything the semantics describe as steps done
one after the other, and gives the same result to the bit:

- step 1: a node's child list is rebuilt without ignored nodes, then placeholders, when
  the walk reaches it (:func:`_rebuilt`; only for the nodes that the tree builder saw
  get such a child, or every node when that is not known);
- step 2: before a node's own time is computed, its children (and, through added
  detail, the descendants its time depends on) that step 2 relocates are flagged
  (:func:`_flag_misplaced`; flagging changes how much they subtract); each is copied
  upwards when the walk reaches it (pre-order, like step 2's collection). A copy goes to
  the end of an ancestor's child list, still being walked, so it is summed where the
  sequential steps would sum it; it is childless, so the ancestor's time is unchanged;
- step 3 is applied to each copy as it is made; steps 4-6 as each node is reached.

Per-node decisions that only depend on the node's and its parent's (layer, phase) are
cached per walk, as a plan per parent (layer, phase) and child (layer, phase) that holds
the child's bucket (``{app phase: ms}``): no key is built per node. A node's subtracted
time only looks at children that can subtract (same layer, or flagged subtract). With
``unlink``, each node drops its parent reference once its subtree is done, so the
finished tree has no cycles.

Example:
    >>> from nnscope.parse_systrace import _tree
    >>> root = _tree.new_root()
    >>> pe = _tree.add(root, 1.0, "[NN_LA_PE]run", "LA", "PE", "PO", False, 1)
    >>> pe[_tree.E] = 1.5
    >>> calculate(root, 0, 0)
    {'PO_LA_PE': 500.0}
"""
from __future__ import annotations

from nnscope.parse_systrace import _tree
from nnscope.parse_systrace._tree import (A, C, E, IGNORE, L, M, MOVED, P, PAR, PE_SUBPHASES, S, SUB,
                                  SUBPHASES)

_NO_SUB = ()
_LR_LI = ("LR", "LI")
_PE_AND_SUBPHASES = ("PE",) + PE_SUBPHASES


def _flag_misplaced(children: list, layer, phase) -> None:
    """Flag :data:`MOVED` the children step 2 relocates (PI under non-PI, LR/LI under an
    LA node of another phase); [SUB] nodes are relocated anyway, copies (None) never."""
    la_rule = layer == "LA" and phase != "PO"
    for child in children:
        child_phase = child[P]
        if child[SUB] is False and (
                (child_phase == "PI" and phase != "PI")
                or (la_rule and child[L] in _LR_LI and child_phase != phase
                    and child_phase != "PU" and child_phase not in _PE_AND_SUBPHASES)):
            child[SUB] = MOVED


def _rebuilt(node: list, ignored: int, placeholders: int, parents=None) -> list:
    """The node's children once ignored nodes, then placeholders, are removed (each
    removed node's children move to the end of its parent's list, in removal order).
    ``parents`` (see :func:`calculate`) loses the node: it is not rebuilt again."""
    children = node[C]
    new = _without_ignored(children) if ignored else children
    if placeholders:
        new = _without_placeholders(new, ignored, parents)
    if parents is not None:
        parents.discard(id(node))
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


def _without_placeholders(children: list, ignored: int, parents=None) -> list:
    """``children`` less placeholders, each replaced at the end by its own children (less
    ignored nodes and placeholders: only looked for below a placeholder in ``parents``)."""
    kept = [child for child in children if child[M] is not None]
    if len(kept) == len(children):
        return children
    for child in children:
        if child[M] is None:
            grandchildren = _without_ignored(child[C]) if ignored else child[C]
            if parents is None or id(child) in parents:
                grandchildren = _without_placeholders(grandchildren, ignored, parents)
            kept.extend(grandchildren)
    return kept


def _relation(node: list, phase, parent_layer, parent_phase) -> bool:
    """Whether the node is added detail; validates nesting (step 4). Depends only on the
    node's and its parent's layer and phase."""
    if parent_layer is None:
        return False
    _tree.check_nesting(node)
    return (node[L] == parent_layer
            and phase not in SUBPHASES.get(parent_phase, _NO_SUB)
            and not (phase == "PI" and parent_phase != "PI"))


def calculate(root: list, ignored: int = 1, placeholders: int = 1, parents=None,
              unlink: bool = False) -> dict:
    """Transform a finished tree (in place) and return ``{"<app>_<layer>_<phase>": ms}``.

    ``ignored`` / ``placeholders``: how many such nodes the tree has (0 skips step 1);
    ``parents``: the ids of the nodes that have such children, a placeholder that has
    included (None: any node may), taken out of the set as they are rebuilt;
    ``unlink``: drop each node's parent reference once its subtree is done (the tree is
    then free of cycles, see :func:`parse_systrace._tree.unlink`).
    """
    stats: dict = {}  # (layer, phase) -> {app phase: ms}
    in_pe: dict = {}
    plan_sets: dict = {}  # a parent's (layer, phase) -> {a child's (layer, phase): plan}
    rebuild = ignored or placeholders

    def plan(node: list, node_phase, layer, phase):
        """How a node of this (layer, phase) under a parent of ``layer``/``phase`` counts:
        False (added detail) or ``(its bucket, the PE bucket it also adds to or None)``;
        validates the nesting (:func:`_relation`) the first time."""
        if _relation(node, node_phase, layer, phase):
            return False
        node_layer = node[L]
        bucket = stats.setdefault((node_layer, node_phase), {})
        if node_phase not in PE_SUBPHASES:
            return bucket, None
        return bucket, stats.setdefault((node_layer, "PE"), {})

    def children_of(node: list) -> list:
        """The node's children after step 1."""
        if rebuild and (parents is None or id(node) in parents):
            return _rebuilt(node, ignored, placeholders, parents)
        return node[C]

    def subtracted(node: list, parent_layer, parent_phase) -> float:
        if node[SUB]:
            return (node[E] - node[S]) * 1000.0
        phase = node[P]
        if phase == "PU":
            phase = parent_phase
        layer = node[L]
        if (layer != parent_layer or phase in SUBPHASES.get(parent_phase, _NO_SUB)
                or (phase == "PI" and parent_phase != "PI")):
            return 0.0
        children = children_of(node)
        _flag_misplaced(children, layer, phase)
        subtract = 0.0
        for child in children:
            if child[SUB] or child[L] == layer:  # else it subtracts 0.0
                subtract = subtract + subtracted(child, layer, phase)
        return subtract

    def walk(nodes, layer, phase) -> None:
        """Pre-order over ``nodes`` (children of a node of ``layer``/``phase``) with an
        explicit stack: no call per node; a list still grows while it is walked."""
        frames: list = []
        plans = plan_sets.setdefault((layer, phase), {})
        while True:
            for node in nodes:
                node_layer, node_phase, children = node[L], node[P], node[C]
                if node_phase == "PU":
                    node_phase = phase
                if children:
                    if rebuild and (parents is None or id(node) in parents):
                        children = _rebuilt(node, ignored, placeholders, parents)
                    if node_phase != "PI" or node_layer == "LA":
                        _flag_misplaced(children, node_layer, node_phase)
                if node[SUB]:
                    _tree.insert_missing_la(_tree.relocate(node))
                else:
                    try:
                        counts = plans[node_layer, node_phase]
                    except KeyError:
                        counts = plans[node_layer, node_phase] = plan(node, node_phase,
                                                                      layer, phase)
                    if counts:
                        value = (node[E] - node[S]) * 1000.0
                        if children:
                            for child in children:
                                if child[SUB] or child[L] == node_layer:
                                    value = value - subtracted(child, node_layer, node_phase)
                        bucket, pe_bucket = counts
                        app = node[A]
                        try:
                            bucket[app] = bucket[app] + value
                        except KeyError:
                            bucket[app] = 0.0 + value
                        if pe_bucket is not None and not in_pe.get(node_layer):
                            pe_bucket[app] = pe_bucket.get(app, 0.0) + value
                if children:  # descend; the rest of ``nodes`` waits in ``frames``
                    if node_phase == "PE":
                        in_pe[node_layer] = in_pe.get(node_layer, 0) + 1
                    frames.append((nodes, layer, phase, node, plans))
                    nodes, layer, phase = iter(children), node_layer, node_phase
                    plans = plan_sets.get((layer, phase))
                    if plans is None:
                        plans = plan_sets[layer, phase] = {}
                    break
                if unlink:
                    node[PAR] = None
            else:  # ``nodes`` done: leave their parent
                if not frames:
                    return
                if phase == "PE":
                    in_pe[layer] -= 1
                nodes, layer, phase, node, plans = frames.pop()
                if unlink:
                    node[PAR] = None

    tops = children_of(root)
    _flag_misplaced(tops, None, None)
    try:
        walk(iter(tops), None, None)
    finally:
        del subtracted  # the recursive closure's cycle (the gc may be off)
    return {f"{app}_{layer}_{phase}": value for (layer, phase), bucket in stats.items()
            for app, value in bucket.items()}
