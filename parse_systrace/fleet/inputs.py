"""Which files a fleet reads, and the group keys of each: from its path, a manifest, or both.

Inputs are directories (every file below them, hidden ones left out), globs (``**``
included) or files. A *path pattern* such as ``{device}/{build}/{model}/*`` names path
segments: ``{name}`` is one segment, ``*`` any one segment (or part of one), ``**`` any
number of segments; it is matched against the end of the file's path relative to the
directory given as input (the path as given, for globs and files). A file the pattern does
not match gets no keys (None). A *manifest* is a CSV file with a ``path`` column (relative
to the manifest's folder, or absolute) and one column per key; without other inputs, its
paths are the inputs. Keys from the manifest win over keys from the pattern.

Example:
    >>> keys_from_path("{device}/{build}/{model}/*", "lab/pixel6/b101/mobilenet/0001.txt")
    {'device': 'pixel6', 'build': 'b101', 'model': 'mobilenet'}
    >>> keys_from_path("{device}/**/*.txt", "pixel6/b101/x.html")
    {'device': None}
"""
from __future__ import annotations

import csv
import glob
import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

#: Column names of the dataset's tables: no key may take one.
RESERVED = frozenset({"trace_id", "path", "size_bytes", "mtime_ns", "format", "driver", "runs",
                      "parse_s", "reason", "run", "starting_mark", "warmup_and_benchmark",
                      "executions_po", "executions_pwu", "executions_pbm", "app_phase", "phase",
                      "layer", "time_ms", "self_ms"})
_NAME = re.compile(r"\{([A-Za-z_]\w*)\}")
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class InputFile:
    """One file to summarise: its absolute path and its group keys (name -> value or None)."""

    path: str
    keys: dict = field(default_factory=dict, hash=False, compare=False)


def pattern_keys(pattern: Optional[str]) -> list[str]:
    """The key names of a path pattern, in order; a bad name raises ``ValueError``.

    >>> pattern_keys("{device}/{build}/*")
    ['device', 'build']
    """
    names = _NAME.findall(pattern or "")
    check_key_names(names)
    return names


def check_key_names(names: Iterable[str]) -> None:
    """Refuse key names that repeat or that are a column name of the dataset."""
    names = list(names)
    clash = sorted(set(names) & RESERVED)
    if clash:
        raise ValueError(f"key name(s) {', '.join(clash)} are columns of the dataset; "
                         "choose other names")
    if len(set(names)) != len(names):
        raise ValueError(f"a key name repeats: {', '.join(names)}")


def _pattern_regex(pattern: str) -> re.Pattern:
    parts = []
    for token in re.split(r"(\{[A-Za-z_]\w*\}|\*\*/?|\*|\?)", pattern.strip("/")):
        if not token:
            continue
        if token.startswith("{"):
            parts.append(f"(?P<{token[1:-1]}>[^/]+)")
        elif token.startswith("**"):
            parts.append("(?:.*/)?" if token.endswith("/") else ".*")
        elif token == "*":
            parts.append("[^/]*")
        elif token == "?":
            parts.append("[^/]")
        else:
            parts.append(re.escape(token))
    return re.compile(r"(?:^|/)" + "".join(parts) + r"$")


def keys_from_path(pattern: str, path: str) -> dict:
    """The keys ``pattern`` gives ``path`` (each None when it does not match)."""
    match = _pattern_regex(pattern).search(path.replace(os.sep, "/"))
    names = pattern_keys(pattern)
    return {name: (match.group(name) if match else None) for name in names}


def read_manifest(manifest: str) -> tuple[list[str], dict[str, dict]]:
    """(key names, absolute path -> keys) of a manifest CSV."""
    folder = os.path.dirname(os.path.abspath(manifest))
    with open(manifest, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or "path" not in reader.fieldnames:
            raise ValueError(f"{manifest}: a manifest needs a 'path' column")
        names = [name for name in reader.fieldnames if name != "path"]
        check_key_names(names)
        rows = {}
        for row in reader:
            path = os.path.normpath(os.path.join(folder, row["path"]))
            rows[path] = {name: (row[name] or None) for name in names}
    return names, rows


def expand(inputs: Iterable[str], pattern: Optional[str] = None,
           manifest: Optional[str] = None) -> tuple[list[str], list[InputFile]]:
    """(key names, files in a stable order) of the inputs; a missing input raises ``ValueError``."""
    names = pattern_keys(pattern)
    listed: dict[str, dict] = {}
    if manifest:
        manifest_names, listed = read_manifest(manifest)
        names += [name for name in manifest_names if name not in names]
        check_key_names(names)
    found: dict[str, str] = {}  # absolute path -> the path the pattern is matched against
    for item in inputs:
        for path, relative in _files(item):
            found.setdefault(os.path.abspath(path), relative)
    if not inputs:
        found = {path: path for path in listed}
    files = []
    for path in sorted(found):
        keys = dict.fromkeys(names)
        if pattern:
            keys.update(keys_from_path(pattern, found[path]))
        keys.update({key: value for key, value in listed.get(path, {}).items()})
        files.append(InputFile(path, keys))
    return names, files


def _files(item: str) -> Iterable[tuple[str, str]]:
    if os.path.isdir(item):
        for folder, subfolders, names in os.walk(item):
            subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
            for name in sorted(names):
                if not name.startswith("."):
                    path = os.path.join(folder, name)
                    yield path, os.path.relpath(path, item)
    elif _GLOB_CHARS & set(item):
        for path in sorted(glob.glob(item, recursive=True)):
            if os.path.isfile(path):
                yield path, path
    elif os.path.exists(item):
        yield item, item
    else:
        raise ValueError(f"{item}: no such file or directory")
