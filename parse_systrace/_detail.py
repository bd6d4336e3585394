"""``--print-detail``: each thread's buckets and its transformed call tree, indented.

Free format (the established tool's is a debug dump); one block per thread:
``thread <tid> (process <tgid>, app|driver)``, its non-zero buckets, then the tree with
each node's bucket and elapsed-less-subtracted time in ms.

Example:
    >>> from nnscope.parse_systrace.summary import RunSummary
    >>> render_detail(RunSummary())
    ''
"""
from __future__ import annotations

from nnscope.parse_systrace import _tree


def render_detail(run) -> str:
    lines = []
    for thread in run.details:
        kind = "driver" if thread.is_driver else "app"
        lines.append(f"thread {thread.tid} (process {thread.tgid}, {kind})")
        for key in sorted(thread.stats):
            lines.append(f"  bucket {key:<14} {thread.stats[key]:12.3f} ms")
        lines.append("  call tree:")
        for child in thread.tree[_tree.C]:
            _node_lines(child, 2, lines)
    return "\n".join(lines) + "\n" if lines else ""


def _node_lines(node: list, depth: int, lines: list) -> None:
    phase = _tree.phase_of(node)
    if node[_tree.SUB]:
        role = "subtracted"
    elif _tree.is_added_detail(node):
        role = "detail"
    else:
        role = f"{node[_tree.A]}_{node[_tree.L]}_{phase}"
    elapsed = _tree.elapsed_less_subtracted_ms(node)
    lines.append(f"{'  ' * depth}{node[_tree.M]}  [{role}] {elapsed:.3f} ms")
    for child in node[_tree.C]:
        _node_lines(child, depth + 1, lines)
