"""The import graph of our packages, read with ``ast``: no cycles (imports inside functions count;
``if TYPE_CHECKING:`` blocks do not), and the dependency direction of the package map
(``tracing``, ``vlog`` and ``timing`` import nothing of ours; ``parse_systrace`` only
``tracing.naming``). Modules are named as installed: ``./runtime/model.py`` is ``nnscope.runtime.model``."""
from __future__ import annotations

import ast

from tests.support.modules import containing_package, imported_base, modules as _modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(path, name: str, modules) -> set[str]:
    """The modules of ours that module ``name`` (at ``path``) imports, wherever in its body."""
    found: set[str] = set()
    package = containing_package(name, path.name == "__init__.py")

    def visit(node) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = imported_base(node, package)
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    resolved = set()
    for target in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(path, name, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _package(module: str) -> str:
    """``nnscope.runtime.model`` -> ``runtime``."""
    return module.split(".")[1]


def test_the_graph_has_edges():
    assert "nnscope.runtime.model" in import_graph()["nnscope.runtime.compilation"]


def test_packages_import_only_downwards():
    graph = import_graph()
    allowed = {"tracing": ("nnscope.tracing",), "vlog": ("nnscope.vlog",), "timing": ("nnscope.timing",),
               "parse_systrace": ("nnscope.parse_systrace", "nnscope.tracing.naming")}
    wrong = {name: sorted(t for t in targets if not t.startswith(allowed[_package(name)]))
             for name, targets in graph.items() if _package(name) in allowed}
    assert {name: targets for name, targets in wrong.items() if targets} == {}


def _runtime_core(name: str) -> bool:
    """A module of the runtime core: ``nnscope.runtime.<module>`` itself, no subpackage."""
    return name.startswith("nnscope.runtime.") and name.count(".") == 2


def test_the_runtime_core_imports_no_ipc_module():
    """The runtime sees devices only through ``runtime.drivers.base`` (AOSP's ``Manager.h``):
    what only the IPC proxy needs lives in ``runtime.drivers.ipc``."""
    graph = import_graph()
    core = {name: sorted(t for t in targets if t.startswith("nnscope.runtime.drivers.ipc"))
            for name, targets in graph.items() if _runtime_core(name)}
    assert len(core) > 20
    assert {name: targets for name, targets in core.items() if targets} == {}


def test_the_core_rule_sees_an_ipc_import():
    assert _runtime_core("nnscope.runtime._steps") and not _runtime_core("nnscope.runtime.drivers.cpu")
