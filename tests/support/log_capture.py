"""Capture of the runtime's ``nn`` log messages while VLOG tags are on."""
from __future__ import annotations

import contextlib
import logging
from typing import Iterator

from nnscope import vlog


@contextlib.contextmanager
def captured_log(logger_name: str, vlog_tags: str, with_logger_name: bool = False
                 ) -> Iterator[list[str]]:
    """Collect the messages logged under ``logger_name`` (level INFO for the duration) while
    vlog ``vlog_tags`` are on; each line is the message, prefixed by the record's logger name
    and a space when ``with_logger_name``."""
    lines: list[str] = []
    handler = logging.Handler()
    if with_logger_name:
        handler.emit = lambda record: lines.append(f"{record.name} {record.getMessage()}")
    else:
        handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger(logger_name)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        with vlog.override(vlog_tags):
            yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
