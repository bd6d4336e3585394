"""The Device / PreparedModel interface is complete (STYLE.md point 12, issue 26 section 1).

Read with ``ast`` over every module of ``runtime/``:

- no ``isinstance``/``issubclass`` test of a Device or PreparedModel subclass outside the module
  that defines the class (the runtime asks the interface, not the kind);
- no ``getattr``/``hasattr`` probe, on a device, driver or prepared model (told by the
  receiver's name), of a member that a Device or PreparedModel class defines, outside that
  class's module (a probe means a method is missing from the interface);
- no ``obj._name`` where ``obj`` is not ``self``/``cls`` and ``_name`` is a private member that
  only classes of *other* modules define (a friend module reaching into a class).
"""
from __future__ import annotations

import ast
import re

from tests.support.paths import REPO

_ROOTS = ("Device", "PreparedModel")
_RECEIVER = re.compile(r"device|prepared|driver", re.IGNORECASE)



def _modules() -> dict[str, ast.Module]:
    return {str(path.relative_to(REPO)): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted((REPO / "runtime").rglob("*.py"))}


def _base_names(node: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
            if isinstance(b, (ast.Name, ast.Attribute))]


def _class_members(node: ast.ClassDef) -> set[str]:
    """Names a class defines: methods, class attributes and ``self.x``/``cls.x`` assignments."""
    members = set()
    for item in ast.walk(node):
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            members.add(item.name)
        targets = item.targets if isinstance(item, ast.Assign) else \
            [item.target] if isinstance(item, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name) and item in node.body:
                    members.add(leaf.id)
                elif isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) \
                        and leaf.value.id in ("self", "cls"):
                    members.add(leaf.attr)
    return members


class _Index:
    """The classes of ``runtime/``: where each is defined, its bases and its members."""

    def __init__(self, modules: dict[str, ast.Module]):
        self.classes: dict[str, tuple[str, list[str], set[str]]] = {}
        self.members_by_module: dict[str, set[str]] = {}
        for path, tree in modules.items():
            own = self.members_by_module.setdefault(path, set())
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    members = _class_members(node)
                    own.update(members)
                    self.classes.setdefault(node.name, (path, _base_names(node), members))
        self.device_classes = {name for name in self.classes if self._is_device(name, set())}

    def _is_device(self, name: str, seen: set) -> bool:
        if name in _ROOTS:
            return True
        if name in seen or name not in self.classes:
            return False
        seen.add(name)
        return any(self._is_device(base, seen) for base in self.classes[name][1])

    def device_members(self) -> dict[str, set[str]]:
        """Member name -> modules of the Device/PreparedModel classes that define it."""
        found: dict[str, set[str]] = {}
        for name in self.device_classes:
            path, _, members = self.classes[name]
            for member in members:
                found.setdefault(member, set()).add(path)
        return found


def _kind_tests(path: str, tree: ast.Module, index: _Index) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            for kind in kinds:
                name = kind.id if isinstance(kind, ast.Name) else getattr(kind, "attr", None)
                if name in index.device_classes and index.classes[name][0] != path:
                    problems.append(f"{path}: {node.func.id}(..., {name})")
    return problems


def _probes(path: str, tree: ast.Module, members: dict[str, set[str]]) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            continue
        receiver, attr = ast.unparse(node.args[0]), node.args[1].value
        if _RECEIVER.search(receiver) and attr in members and path not in members[attr]:
            problems.append(f"{path}: {node.func.id}({receiver}, {attr!r})")
    return problems


def _private_reaches(path: str, tree: ast.Module, index: _Index) -> list[str]:
    elsewhere = {}
    for other, members in index.members_by_module.items():
        if other != path:
            for member in members:
                elsewhere.setdefault(member, other)
    own = index.members_by_module[path]
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or attr.startswith("__") or attr in own or attr not in elsewhere:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        problems.append(f"{path}: {ast.unparse(node)}")
    return problems


def _all_problems() -> tuple[set[str], set[str], set[str]]:
    modules = _modules()
    index = _Index(modules)
    members = index.device_members()
    kinds, probes, reaches = [], [], []
    for path, tree in modules.items():
        kinds += _kind_tests(path, tree, index)
        probes += _probes(path, tree, members)
        reaches += _private_reaches(path, tree, index)
    return set(kinds), set(probes), set(reaches)


def test_the_index_sees_the_device_classes():
    index = _Index(_modules())
    assert {"CpuDevice", "CpuPreparedModel", "RemoteDevice", "RemotePreparedModel"} <= index.device_classes
    assert "Execution" not in index.device_classes


def _check(found: set[str], advice: str) -> None:
    assert not found, f"{advice}:\n" + "\n".join(sorted(found))


def test_no_kind_tests_of_devices_or_prepared_models_outside_their_modules():
    _check(_all_problems()[0], "ask the interface instead")


def test_no_getattr_probes_of_device_members():
    _check(_all_problems()[1], "put the member on Device/PreparedModel")


def test_no_access_to_another_modules_private_members():
    _check(_all_problems()[2], "a method is missing")


def test_the_checks_catch_what_they_forbid():
    """Each check fails on a module written to break it."""
    bad = ast.parse(
        "from nnscope.runtime.drivers.ipc import RemoteDevice\n"
        "def f(device, execution):\n"
        "    isinstance(device, RemoteDevice)\n"
        "    getattr(device.prepared, 'configure_execution_burst', None)\n"
        "    return execution._plan\n")
    modules = _modules()
    modules["runtime/_bad.py"] = bad
    index = _Index(modules)
    assert _kind_tests("runtime/_bad.py", bad, index)
    index_members = index.device_members()
    index_members.setdefault("configure_execution_burst", {"runtime/drivers/ipc/prepared.py"})
    assert _probes("runtime/_bad.py", bad, index_members)
    assert _private_reaches("runtime/_bad.py", bad, index)
