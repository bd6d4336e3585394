"""The NNTRACE naming contract: layer and phase codes and the span-name grammar.

This module is the single owner of the codes of ``docs/nntrace-contract.md``.
The runtime emits names only through :func:`format_name` / :func:`hidl_mark`;
``parse_systrace`` reads them back with :func:`parse_name`.

Example:
    >>> format_name(Layer.RUNTIME, Phase.EXECUTION, "ANeuralNetworksExecution_compute")
    '[NN_LR_PE]ANeuralNetworksExecution_compute'
    >>> parse_name("[SW][NN_LC_PCO]conv2dFloat32")
    ParsedName(marker='[SW]', layer=<Layer.CPU: 'LC'>, phase=<Phase.COMPUTATION: 'PCO'>, detail='conv2dFloat32')
"""
from __future__ import annotations

import enum
import re
from collections import namedtuple


class Layer(str, enum.Enum):
    """Who emitted a span."""

    APPLICATION = "LA"
    RUNTIME = "LR"
    IPC = "LI"
    DRIVER = "LD"
    CPU = "LC"
    UTILITY = "LU"
    OTHER = "LO"


class Phase(str, enum.Enum):
    """What the span's time was spent on."""

    OVERALL = "PO"
    WARMUP = "PWU"
    BENCHMARK = "PBM"
    INITIALIZATION = "PI"
    PREPARATION = "PP"
    COMPILATION = "PC"
    EXECUTION = "PE"
    INPUTS_AND_OUTPUTS = "PIO"
    TRANSFORMATION = "PTR"
    COMPUTATION = "PCO"
    RESULTS = "PR"
    TERMINATION = "PT"
    UNSPECIFIED = "PU"


#: Execution's subphases, in report order.
EXECUTION_SUBPHASES = (Phase.INPUTS_AND_OUTPUTS, Phase.TRANSFORMATION,
                       Phase.COMPUTATION, Phase.RESULTS)
#: Phases only the application layer may use.
APPLICATION_PHASES = (Phase.OVERALL, Phase.WARMUP, Phase.BENCHMARK)
#: Layers in report order, top to bottom.
REPORT_LAYERS = (Layer.APPLICATION, Layer.RUNTIME, Layer.IPC, Layer.DRIVER, Layer.CPU)

SWITCH = "[SW]"
SUBTRACT = "[SUB]"
MARKERS = (SWITCH, SUBTRACT)

#: HIDL-style IPC interfaces of the contract.
HIDL_INTERFACES = ("IDevice", "IPreparedModel", "IPreparedModelCallback",
                   "IExecutionCallback", "IBurstContext", "IBuffer")
HIDL_SIDES = ("client", "server")

_TAG_RE = re.compile(r"^(\[SW\]|\[SUB\])?\[NN_(L[A-Z])_(P[A-Z]{1,2})\](.*)$", re.S)
_LAYERS = {layer.value: layer for layer in Layer}
_PHASES = {phase.value: phase for phase in Phase}


class ParsedName(namedtuple("ParsedName", "marker layer phase detail")):
    """A span name split into its parts; ``marker`` is ``""``, ``[SW]`` or ``[SUB]``
    (str), ``layer`` a :class:`Layer`, ``phase`` a :class:`Phase`, ``detail`` str."""

    __slots__ = ()


def tag(layer: Layer, phase: Phase) -> str:
    """Return the bracketed tag, e.g. ``[NN_LR_PE]``."""
    return f"[NN_{layer.value}_{phase.value}]"


def format_name(layer: Layer, phase: Phase, detail: str = "", marker: str = "") -> str:
    """Return ``<marker>[NN_<layer>_<phase>]<detail>``.

    Raises:
        ValueError: for an unknown marker or an application-only phase on another layer.
    """
    if marker not in ("",) + MARKERS:
        raise ValueError(f"unknown marker {marker!r}; valid: {', '.join(MARKERS)}")
    if phase in APPLICATION_PHASES and layer is not Layer.APPLICATION:
        raise ValueError(f"phase {phase.value} is for layer LA only, not {layer.value}")
    return f"{marker}{tag(layer, phase)}{detail}"


def parse_name(name: str) -> ParsedName | None:
    """Split an NNTRACE span name; return None when it carries no NN tag."""
    match = _TAG_RE.match(name)
    if match is None:
        return None
    marker, layer, phase, detail = match.groups()
    if layer not in _LAYERS or phase not in _PHASES:
        return None
    return ParsedName(marker or "", _LAYERS[layer], _PHASES[phase], detail)


def hidl_mark(interface: str, method: str, side: str) -> str:
    """Return the IPC transport mark ``HIDL::<Interface>::<method>::<side>``.

    ``side`` is ``client`` or ``server``; callbacks use method ``notify``.
    """
    if side not in HIDL_SIDES:
        raise ValueError(f"unknown HIDL side {side!r}; valid: {', '.join(HIDL_SIDES)}")
    return f"HIDL::{interface}::{method}::{side}"


def is_execution_subphase(phase: Phase) -> bool:
    """True for PIO, PTR, PCO and PR."""
    return phase in EXECUTION_SUBPHASES
