"""Compilation caching on the runtime side (AOSP ``TokenHasher``, ``ExecutionPlan::compile`` and
``DriverDevice::prepareModel``).

``Compilation.set_caching(cache_dir, token)`` gives the application's 32-byte token. Each step
gets its own token: SHA-256 over the application token, the device name and version string
(each followed by a NUL), the preference and priority (int32 each) and the indexes of the
step's operations (u32 each) (:func:`step_token`; vlog ``compilation``, log tag ``TokenHasher``).
A device that needs no cache files (``getNumberOfCacheFilesNeeded`` = (0, 0)) gets no token.

:func:`prepare` is AOSP's ``DriverDevice::prepareModel``: with a token it first asks the device
to prepare from its cache files (``prepareModelFromCache_1_3``); if that fails for any reason it
silently prepares from the model, handing the device the same files to rewrite. A compilation
for one device (``Compilation.for_devices`` with one device) skips partitioning when its
whole-model cache loads (:func:`whole_model_from_cache`), as AOSP bypasses partitioning for a
single device: the token promises the same model, which this device prepared before.

Log lines (vlog ``compilation``): ``ExecutionPlan: step 0 on sample-all: prepared from cache``,
``CompilationBuilder: CompilationBuilder::finish: whole model on sample-all from cache``; spans
``[NN_LR_PC]ExecutionPlan::prepareModelFromCache`` around the attempt.

Example:
    >>> from nnscope.runtime.drivers.cpu import CpuDevice
    >>> from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
    >>> from nnscope.runtime.hal.types import Preference, Priority
    >>> app_token = bytes(32)
    >>> step_token(app_token, CpuDevice(), Preference.FAST_SINGLE_ANSWER, Priority.MEDIUM, (0,)) is None  # no cache files
    True
    >>> sample = SampleDriver(SAMPLES["sample-all"])  # one model-cache and one data-cache file
    >>> step_token(app_token, sample, Preference.FAST_SINGLE_ANSWER, Priority.MEDIUM, (0,)).hex()[:16]
    'df163e0a5f411569'
"""
from __future__ import annotations

import hashlib
import struct
from typing import Sequence

from nnscope import tracing
from nnscope import vlog
from nnscope.runtime.drivers.base import Device, PreparedModel
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import HalModel
from nnscope.tracing import Phase

_FROM_CACHE_SPAN = "ExecutionPlan::prepareModelFromCache"


def step_token(token: bytes | None, device: Device, preference: int, priority: int,
               operations: Sequence[int]) -> bytes | None:
    """The cache token of one step on ``device`` (None: no caching for it)."""
    if token is None:
        return None
    try:
        if device.number_of_cache_files_needed() == (0, 0):
            return None
        name, version = device.name, device.version
    except HalError as error:  # a driver that cannot answer does not cache
        vlog.log("compilation", "TokenHasher", "no cache token for %s: %s", device.name, error)
        return None
    hasher = hashlib.sha256(token)
    hasher.update(name.encode() + b"\0" + version.encode() + b"\0")
    hasher.update(struct.pack("<ii", int(preference), int(priority)))
    hasher.update(struct.pack(f"<{len(operations)}I", *operations))
    digest = hasher.digest()
    vlog.log("compilation", "TokenHasher", "cache token for %s (%s): %s", name, version, digest.hex())
    return digest


def prepare(device: Device, model: HalModel, operations: Sequence[int], preference, priority,
            deadline_ns, cache_dir, token, try_cache: bool = True) -> PreparedModel:
    """Prepare from the cache when it loads, else from ``model`` (writing the cache).

    Raises:
        HalError: the full preparation failed.
    """
    hashed = step_token(token, device, preference, priority, operations) if cache_dir else None
    if hashed is not None and try_cache:
        prepared = _from_cache(device, model, deadline_ns, cache_dir, hashed, preference, priority)
        if prepared is not None:
            return prepared
    return device.prepare_model(model, preference, priority, deadline_ns,
                                cache_dir if hashed else None, hashed)


def _from_cache(device: Device, model: HalModel, deadline_ns, cache_dir, hashed, preference,
                priority) -> PreparedModel | None:
    with tracing.runtime(Phase.COMPILATION, _FROM_CACHE_SPAN):
        try:
            prepared = device.prepare_model_from_cache(model, deadline_ns, cache_dir, hashed,
                                                       preference, priority)
        except HalError as error:
            vlog.log("compilation", "ExecutionPlan", "%s: not prepared from cache (%s); "
                     "preparing from the model", device.name, error)
            return None
    vlog.log("compilation", "ExecutionPlan", "%s: prepared from cache", device.name)
    return prepared


def whole_model_from_cache(model: HalModel, devices: Sequence[Device], fallback: Device | None,
                           preference, priority, deadline_ns, cache_dir, token):
    """``(prepared or None, attempted)``: the whole model prepared from ``devices[0]``'s cache
    when the compilation has that one device (no other fallback) and the cache loads;
    ``attempted`` says whether the cache was tried (then steps need not try it again)."""
    if not cache_dir or token is None or len(devices) != 1 or (fallback is not None
                                                              and fallback is not devices[0]):
        return None, False
    device = devices[0]
    operations = tuple(range(len(model.main.operations)))
    hashed = step_token(token, device, preference, priority, operations)
    if hashed is None:
        return None, False
    prepared = _from_cache(device, model, deadline_ns, cache_dir, hashed, preference, priority)
    if prepared is not None:
        vlog.log("compilation", "CompilationBuilder", "CompilationBuilder::finish: whole model on "
                 "%s from cache (partitioning skipped)", device.name)
    return prepared, True
