"""Mark classification: a begin mark's name -> (layer, phase, flags, function).

NN marks carry ``[NN_<layer>_<phase>]`` (the last bracketed group followed by at least
one more character, as the established tool reads it); HIDL transport marks are
translated (``::client`` -> IPC, ``::server`` -> Driver, ``notify`` and foreign marks
ignored as layer ``LX``). Newer HAL names (``execute_1_3``, ``executeSynchronously``,
``executeFenced``, burst, AIDL-style ``::execute*``, ``IBuffer`` copies) classify as Execution,
``IDevice::allocate`` as Compilation. Results are
cached per distinct name, so each name is analysed once per trace.

Example:
    >>> classify("[SW][NN_LC_PCO]conv2dFloat32")
    ('[SW][NN_LC_PCO]conv2dFloat32', 'LC', 'PCO', True, False, 'conv2dFloat32')
    >>> classify("HIDL::IPreparedModel::executeSynchronously::server")[1:3]
    ('LD', 'PE')
    >>> classify("HIDL::IExecutionCallback::notify::client")[1:3]
    ('LX', 'PE')
"""
from __future__ import annotations

import re
from functools import lru_cache

from nnscope.tracing.naming import SUBTRACT, SWITCH

_TAG = re.compile(r".*\[([^\]]+)\]\[?([^\]])")
_EXECUTION_WORDS = ("execute", "IExecutionCallback", "Burst", "burst", "Fenced", "IBuffer")


#: What a begin mark's name does to its thread in pass 1 (:func:`tracking`).
UNTRACKED, TRACKS, DRIVER = 0, 1, 2


def tracking(name: str) -> int:
    """:data:`DRIVER` for a driver's HIDL ``IDevice`` server mark (its process is a
    driver), :data:`TRACKS` for another NN mark, else :data:`UNTRACKED`."""
    if "HIDL::IDevice" in name and "::server" in name:
        return DRIVER
    return TRACKS if "[NN" in name else UNTRACKED


class MarkError(ValueError):
    """A begin mark that cannot be classified (the caller adds the row)."""


@lru_cache(maxsize=None)
def classify(name: str) -> tuple:
    """Return ``(mark, layer, phase, switch, subtract, function)`` for a begin mark name.

    ``mark`` is the name after the established tool's legacy rewrites; ``function`` is
    the name without tag and markers (the key for begin/end bookkeeping).

    Raises:
        MarkError: for a bracketed tag that is not ``NN_<layer>_<phase>``, or a HIDL mark
            that names no known side.
    """
    mark = _legacy_rewrites(name)
    match = _TAG.match(mark)
    if match is None:
        layer, phase = _translate_hidl(mark)
    else:
        parts = match.group(1).split("_")
        if len(parts) != 3:
            raise MarkError(f"cannot read layer and phase from tag [{match.group(1)}] in {name!r}")
        layer, phase = parts[1], parts[2]
    return mark, layer, phase, SWITCH in mark, SUBTRACT in mark, function_name(mark)


def _legacy_rewrites(mark: str) -> str:
    if "ANeuralNetworksEvent_free" in mark or "ANeuralNetworksExecution_free" in mark:
        return mark.replace("_PT", "_PE")
    if "[SW][NN_LA_PR]executeWithCompilation" in mark:
        return mark.replace("[SW]", "")
    if "getSupportedExtensions" in mark:
        return mark.replace("_PC", "_PI")
    return mark


def _translate_hidl(mark: str) -> tuple:
    if "::client" in mark:
        layer = "LX" if "notify" in mark else "LI"
    elif "::server" in mark:
        layer = "LX" if "notify" in mark else "LD"
    elif "getCapabilities" in mark or "getSupportedOperations" in mark:
        layer = "LD"
    elif "::passthrough" in mark:
        layer = "LI"
    elif "HIDL" not in mark:
        layer = "LX"
    else:
        raise MarkError(f"HIDL mark names no client/server/passthrough side: {mark!r}")
    return layer, _hidl_phase(mark)


def _hidl_phase(mark: str) -> str:
    if "IAllocator" in mark:
        return "PU"
    if "getCapabilities" in mark:
        return "PI"
    if "prepareModel" in mark or "getSupportedOperations" in mark or "IDevice::allocate" in mark:
        return "PC"
    if "IPreparedModelCallback" in mark:
        return "PC"
    if any(word in mark for word in _EXECUTION_WORDS):
        return "PE"
    return "PI"


def function_name(mark: str) -> str:
    """The mark's function: the name without NN tag and markers (whole name otherwise)."""
    function = mark.split("|", 1)[0]
    if "[NN_" in function:
        function = function.replace(SUBTRACT, "").replace(SWITCH, "")
        parts = function.split("]")
        function = parts[1] if len(parts) > 1 else parts[0]
        function = function.replace("[", "").replace("]", "")
    return function
