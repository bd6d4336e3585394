"""The process boundary in the folders (STYLE 16), read with ``ast`` as the import-cycle test reads
it (imports inside functions count; ``if TYPE_CHECKING:`` blocks do not): a module of
``runtime/drivers/ipc/client`` (the application's process) imports nothing of ``service`` (the
driver's process) nor the reverse, and ``wire`` (both) imports neither. None of the three imports
the rest of ``runtime.drivers.ipc`` (its ``__init__`` re-exports the client; ``bench`` starts both)."""
from __future__ import annotations

import importlib

from tests.test_import_graph import import_graph

IPC = "nnscope.runtime.drivers.ipc"
#: What each side may import under ``runtime.drivers.ipc`` besides itself.
MAY_IMPORT = {"client": {"wire"}, "service": {"wire"}, "wire": set()}


def side_of(module: str) -> str | None:
    """``client``, ``service`` or ``wire`` for a module of that package; ``""`` for any other
    module under ``runtime.drivers.ipc``; None outside it."""
    if module != IPC and not module.startswith(IPC + "."):
        return None
    part = module[len(IPC) + 1:].split(".")[0]
    return part if part in MAY_IMPORT else ""


def crossings(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs that cross the boundary."""
    found = []
    for name, targets in graph.items():
        side = side_of(name)
        if not side:
            continue
        for target in targets:
            other = side_of(target)
            if other is not None and other != side and other not in MAY_IMPORT[side]:
                found.append((name, target))
    return sorted(found)


def test_no_module_imports_across_the_process_boundary():
    graph = import_graph()
    assert {side_of(name) for name in graph} >= set(MAY_IMPORT)  # the three packages are there
    assert crossings(graph) == []


def test_the_check_finds_each_kind_of_crossing():
    graph = {f"{IPC}.service.execute": {f"{IPC}.client.device", f"{IPC}.wire.codec"},
             f"{IPC}.client.burst": {f"{IPC}.service.burst", "nnscope.runtime.hal.types"},
             f"{IPC}.wire.codec": {f"{IPC}.client"},
             f"{IPC}.client.cache": {IPC, f"{IPC}.wire.protocol"},
             f"{IPC}.bench": {f"{IPC}.client.device", f"{IPC}.service.driver_service"}}
    assert crossings(graph) == [(f"{IPC}.client.burst", f"{IPC}.service.burst"),
                                (f"{IPC}.client.cache", IPC),
                                (f"{IPC}.service.execute", f"{IPC}.client.device"),
                                (f"{IPC}.wire.codec", f"{IPC}.client")]


def test_each_side_says_which_process_it_runs_in():
    said = {side: importlib.import_module(f"{IPC}.{side}").__doc__ for side in MAY_IMPORT}
    assert "application's process" in said["client"]
    assert "driver's process" in said["service"]
    assert "application's process" in said["wire"] and "driver's process" in said["wire"]
