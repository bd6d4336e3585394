"""What Graphviz laid out: ``dot -Tjson`` of a dot text, for tests of GraphDump's drawings."""
from __future__ import annotations

import json
import subprocess

from tests.support.programs import require_program


class Layout:
    """``dot -Tjson`` of ``dot_text``: size in points, the title texts, nodes and clusters by
    name, ``edges`` {(tail, head): attributes}, each node's position."""

    def __init__(self, dot_text: str):
        done = subprocess.run([require_program("dot"), "-Tjson"], input=dot_text,
                              capture_output=True, text=True, check=True)
        assert done.stderr == ""
        data = json.loads(done.stdout)
        _, _, self.width, self.height = map(float, data["bb"].split(","))
        self.title = texts(data)
        objects = data.get("objects", [])
        self.clusters = {o["name"]: o for o in objects if o["name"].startswith("cluster")}
        self.nodes = {o["name"]: o for o in objects if "nodes" not in o}
        self.by_id = {o["_gvid"]: o["name"] for o in objects}
        self.edges = {(self.by_id[e["tail"]], self.by_id[e["head"]]): e for e in data.get("edges", [])}

    def x(self, name: str) -> float:
        return float(self.nodes[name]["pos"].split(",")[0])

    def y(self, name: str) -> float:
        """Node ``name``'s height on the page (dot's y grows upwards)."""
        return float(self.nodes[name]["pos"].split(",")[1])

    def texts(self, name: str) -> list[str]:
        return texts(self.nodes[name])

    def all_texts(self) -> list[str]:
        return [t for name in self.nodes for t in self.texts(name)]

    def cluster_nodes(self, cluster: str) -> set[str]:
        return {self.by_id[i] for i in self.clusters[cluster].get("nodes", [])}

    def cluster_label(self, cluster: str) -> str:
        return " ".join(texts(self.clusters[cluster]))

    def fill(self, name: str) -> str:
        """The first fill colour drawn for node ``name``."""
        node = self.nodes[name]
        return next(op["color"] for op in (*node.get("_draw_", ()), *node.get("_ldraw_", ()))
                    if op["op"] == "C")


def texts(obj) -> list[str]:
    """The texts Graphviz drew in ``obj``'s label."""
    return [op["text"] for op in obj.get("_ldraw_", []) if op["op"] == "T"]
