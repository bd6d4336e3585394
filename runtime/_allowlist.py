"""Internal: who may use vendor extensions (AOSP ``TypeManager::isExtensionsUseAllowed``).

As on Android, extensions are for vendor software. A program is identified by its executable or
script path (``sys.argv[0]`` when it names a file, else ``sys.executable``) and, optionally, a
package name it declares (:data:`NNSCOPE_APP_PACKAGE`). Then:

* a program in the system location (:data:`NNSCOPE_SYSTEM_DIR`, standing for ``/system``) may
  never use extensions, allowlisted or not;
* a program in the vendor, product, odm or data location may;
* any other program may when its path or declared package is in the allowlist.

The allowlist, ``nnapi_extensions_app_allowlist``, has one entry per line: a native binary path
starting with ``/`` or an application package name (``com.example.app``). Blank lines and lines
starting with ``#`` are skipped; a malformed line (anything else) is skipped with a warning that
names the file and line. A missing file is an empty allowlist. The file is
:data:`NNSCOPE_EXTENSIONS_ALLOWLIST`, by default ``<vendor location>/etc/nnapi_extensions_app_allowlist``
(on Android ``/vendor/etc/nnapi_extensions_app_allowlist``).

The environment is read once, on first use; :func:`override` replaces the policy for a ``with``
block (tests). The check lives in the runtime library only: a program speaking HAL to a driver
directly bypasses it. It protects against accidental use of extensions, not deliberate bypass.

Example:
    >>> policy = Policy(identity="/opt/tool", package=None, entries=("/opt/tool",),
    ...                 source="allowlist.txt", locations=Locations.from_environ({}))
    >>> policy.allowed(), Policy(identity="/system/bin/tool", package=None, entries=("/system/bin/tool",),
    ...                          source="a", locations=policy.locations).allowed()
    (True, False)
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from dataclasses import dataclass
from typing import Iterator, Mapping

NNSCOPE_EXTENSIONS_ALLOWLIST = "NNSCOPE_EXTENSIONS_ALLOWLIST"
"""Path of the extensions allowlist file (default: ``etc/nnapi_extensions_app_allowlist`` in the
vendor location, :data:`NNSCOPE_VENDOR_DIR`)."""
NNSCOPE_APP_PACKAGE = "NNSCOPE_APP_PACKAGE"
"""The application package name this program declares (checked against the allowlist)."""
NNSCOPE_SYSTEM_DIR = "NNSCOPE_SYSTEM_DIR"
"""The system location (default ``/system``): programs there never use extensions."""
NNSCOPE_VENDOR_DIR = "NNSCOPE_VENDOR_DIR"
"""The vendor location (default ``/vendor``): programs there may use extensions."""
NNSCOPE_PRODUCT_DIR = "NNSCOPE_PRODUCT_DIR"
"""The product location (default ``/product``): programs there may use extensions."""
NNSCOPE_ODM_DIR = "NNSCOPE_ODM_DIR"
"""The odm location (default ``/odm``): programs there may use extensions."""
NNSCOPE_DATA_DIR = "NNSCOPE_DATA_DIR"
"""The data location (default ``/data``): programs there may use extensions."""

ALLOWLIST_NAME = "nnapi_extensions_app_allowlist"
_PACKAGE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+")
_log = logging.getLogger("nn.TypeManager")


@dataclass(frozen=True)
class Locations:
    """The system location and the locations whose programs may use extensions."""

    system: str
    allowed: tuple[str, ...]  # vendor, product, odm, data

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Locations:
        def get(name, default):
            return os.path.abspath(environ.get(name) or default)
        return cls(get(NNSCOPE_SYSTEM_DIR, "/system"),
                   tuple(get(n, d) for n, d in ((NNSCOPE_VENDOR_DIR, "/vendor"),
                                                (NNSCOPE_PRODUCT_DIR, "/product"),
                                                (NNSCOPE_ODM_DIR, "/odm"), (NNSCOPE_DATA_DIR, "/data"))))


def default_path(environ: Mapping[str, str]) -> str:
    """The allowlist file: :data:`NNSCOPE_EXTENSIONS_ALLOWLIST` or the vendor default."""
    vendor = Locations.from_environ(environ).allowed[0]
    return environ.get(NNSCOPE_EXTENSIONS_ALLOWLIST) or os.path.join(vendor, "etc", ALLOWLIST_NAME)


def read_allowlist(path: str) -> tuple[str, ...]:
    """The valid entries of the allowlist at ``path`` (missing file: none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except FileNotFoundError:
        _log.info("extensions allowlist %s not found: empty allowlist", path)
        return ()
    except OSError as error:
        _log.warning("extensions allowlist %s unreadable (%s): empty allowlist", path, error)
        return ()
    entries = []
    for number, line in enumerate(lines, 1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        if (entry.startswith("/") and not any(c.isspace() for c in entry)) or _PACKAGE.fullmatch(entry):
            entries.append(entry)
        else:
            _log.warning("%s:%d: malformed allowlist entry %r (neither an absolute binary path nor "
                         "a package name); skipped", path, number, entry[:80])
    return tuple(entries)


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def program_path() -> str:
    """This program's identity: its script path when ``argv[0]`` names a file, else the
    interpreter's."""
    script = sys.argv[0] if sys.argv and sys.argv[0] else ""
    return os.path.realpath(script if os.path.isfile(script) else sys.executable)


@dataclass(frozen=True)
class Policy:
    """The allowlist decision for one program identity."""

    identity: str
    package: str | None
    entries: tuple[str, ...]
    source: str
    locations: Locations

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, identity: str | None = None) -> Policy:
        environ = os.environ if environ is None else environ
        path = default_path(environ)
        return cls(os.path.abspath(identity or program_path()), environ.get(NNSCOPE_APP_PACKAGE) or None,
                   read_allowlist(path), path, Locations.from_environ(environ))

    def allowed(self) -> bool:
        if _inside(self.identity, self.locations.system):
            return False
        if any(_inside(self.identity, d) for d in self.locations.allowed):
            return True
        return self.identity in self.entries or (self.package is not None and self.package in self.entries)

    def refusal(self) -> str:
        """Why extensions are refused (names the allowlist)."""
        if _inside(self.identity, self.locations.system):
            return (f"{self.identity} is in the system location {self.locations.system}, which may "
                    f"never use extensions ({ALLOWLIST_NAME} {self.source} does not apply)")
        who = self.identity + (f" (package {self.package})" if self.package else "")
        return f"{who} may not use extensions: not in {ALLOWLIST_NAME} {self.source}"


_lock = threading.Lock()
_policy: Policy | None = None


def policy() -> Policy:
    """The policy of this process (environment read once, on first use)."""
    global _policy
    with _lock:
        if _policy is None:
            _policy = Policy.from_environ()
            if not _policy.allowed():
                _log.info("extensions not allowed: %s", _policy.refusal())
        return _policy


@contextlib.contextmanager
def override(replacement: Policy) -> Iterator[Policy]:
    """Use ``replacement`` as this process's policy inside a ``with`` block."""
    global _policy
    with _lock:
        saved, _policy = _policy, replacement
    try:
        yield replacement
    finally:
        with _lock:
            _policy = saved
