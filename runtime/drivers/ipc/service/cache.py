"""Driver-process side of compilation caching: ``prepareModelFromCache_1_3`` and the cache
writes of ``prepareModel_1_3`` (the wire is described in ``wire.cache_args``).

The device decides what its cache holds (a sample driver: ``runtime.drivers.cache_payload``);
a device without ``write_cache`` / ``prepare_model_from_cache_files`` does not cache. A failed
cache write never fails the preparation (as in AOSP: the driver may always skip caching); a
cache that does not load answers GENERAL_FAILURE and the runtime prepares from the model.
Log tag ``SampleDriver`` (vlog ``driver``), e.g. ``prepareModelFromCache(sample-all): model 3``.

Example (inside ``DriverService``)::

    payload = prepare_from_cache(service, connection, message)
"""
from __future__ import annotations

import struct

from nnscope import vlog
from nnscope.runtime.drivers.ipc.wire import cache_args
from nnscope.runtime.drivers.ipc.wire.codec import Reader
from nnscope.runtime.drivers.ipc.wire.status import OK as _OK
from nnscope.runtime.hal.errors import HalError



def prepare_from_cache(service, connection, message) -> bytes:
    """Answer ``PREPARE_MODEL_FROM_CACHE``: the new model id, or an error status."""
    deadline, model_fds, data_fds, token, priority = cache_args.read_from_cache_args(
        Reader(message.payload), message.fds)
    try:
        prepared = service.device.prepare_model_from_cache_files(model_fds, data_fds, token, deadline)
    except HalError as error:
        _log(service, "prepareModelFromCache(%s) failed: %s", service.device.name, error)
        raise
    prepared.priority = priority  # the scheduler's rank among this client's models
    model_id = service.clients.add_model(connection.client, prepared, 0)
    _log(service, "prepareModelFromCache(%s): model %d", service.device.name, model_id)
    return _OK + struct.pack("<I", model_id)


def save(service, prepared, model_fds: list, data_fds: list, token: bytes) -> None:
    """Write the cache files of ``prepareModel_1_3`` (no files, nothing to do); errors are
    logged, never raised."""
    if not (model_fds or data_fds):
        return
    try:
        service.device.write_cache(prepared, model_fds, data_fds, token)
    except (OSError, ValueError) as error:
        _log(service, "prepareModel(%s): cache not written: %s", service.device.name, error)
        return
    _log(service, "prepareModel(%s): cache written", service.device.name)


def _log(service, message: str, *args) -> None:
    if service.vlog_driver:
        vlog.log("driver", service.label, message, *args)
