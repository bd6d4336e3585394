"""Trace readers: turn a trace file of any supported format into mark rows.

A *row* is a plain tuple ``(ts, tid, tgid, name, where)``:

- ``ts``: float seconds, parsed exactly as ``float("1234.567890")`` from the text;
- ``tid`` / ``tgid``: ints (thread id, process id; the TGID already resolved);
- ``name``: the mark text after ``B|<tgid>|`` for a begin, ``None`` for an end;
- ``where``: where the row is, for error messages: an int (a 1-based line number, or an
  event index for formats registered with ``unit="event"``) or a ready string.

A format is registered with :func:`register` as ``name -> (read, sniff)``:
``read(binary_file) -> Iterator[row]`` takes a seekable binary file object; ``sniff(head)``
gets the first bytes of the (already unwrapped) content and says whether the format
applies. A reader may also give ``read_batches(binary_file) -> Iterator[list[row]]``,
a faster equivalent that yields rows in lists. Formats are tried in registration order;
``systrace`` (HTML) and ``ftrace`` (plain text, current and old TGID-less layouts) are
built in, other modules (``chrome_json``, ``perfetto``) register themselves when
imported through :data:`PLUGINS`. Content wrappers such as gzip are registered with
:func:`register_unwrapper`: ``unwrap(raw) -> binary_file`` returns ``raw`` unchanged
when it does not apply. A :class:`RowSource` imports the plugins only when no format
registered so far accepts the head, the head may be a plugin's (:data:`PLUGIN_HEADS`) or
the format asked for is unknown: a plain systrace/ftrace file never loads them.

:func:`open_rows` detects the format from the content (never the file name) and returns
a :class:`RowSource` whose :meth:`RowSource.rows` can be iterated any number of times:
each iteration re-reads the file, so rows are never all held in memory.

Example:
    >>> import io
    >>> text = (b"# tracer: nop\\n"
    ...         b"  app-12 (12) [000] ...1 5.000001: tracing_mark_write: B|12|[NN_LA_PO]x\\n"
    ...         b"  app-12 (12) [000] ...1 5.000002: tracing_mark_write: E|12\\n")
    >>> source = open_rows(io.BytesIO(text))
    >>> source.format
    'ftrace'
    >>> list(source.rows())
    [(5.000001, 12, 12, '[NN_LA_PO]x', 2), (5.000002, 12, 12, None, 3)]
"""
from __future__ import annotations

import importlib
import io
import itertools
import os
from collections import namedtuple
from collections.abc import Callable, Iterator

from nnscope.parse_systrace.errors import TraceFormatError

TYPE_CHECKING = False  # typing is not imported at run time (start-up)
if TYPE_CHECKING:
    from typing import BinaryIO, Optional, Union

Row = tuple  # (ts: float, tid: int, tgid: int, name: str | None, where: int | str)
Reader = Callable[["BinaryIO"], Iterator[Row]]
BatchReader = Callable[["BinaryIO"], Iterator[list]]
Sniffer = Callable[[bytes], bool]
Unwrapper = Callable[["BinaryIO"], "BinaryIO"]

#: How many bytes of (unwrapped) content a sniffer is given.
SNIFF_BYTES = 1 << 16
#: Reader modules imported on first use so that they can register themselves.
PLUGINS = ("_gzip", "chrome_json", "perfetto")
#: First bytes (after :data:`_BLANK`) of content the plugins take before the built-in
#: formats: gzip (unwrapped before sniffing), JSON (``chrome_json`` is tried first).
PLUGIN_HEADS = (b"\x1f\x8b", b"{", b"[")
_BLANK = b" \t\r\n\xef\xbb\xbf"  # what chrome_json's sniff skips
_BATCH = 8192


class Format(namedtuple("Format", "name read sniff read_batches unit read_tracking read_raw unchecked",
                        defaults=(None, "line", None, None, False))):
    """One registered trace format: ``name``, ``read`` (a :data:`Reader`), ``sniff`` (a
    :data:`Sniffer`), ``read_batches`` (a :data:`BatchReader` or None), ``unit``
    (``"line"`` or ``"event"``), ``read_tracking`` (a :data:`Reader` or None), ``read_raw``
    (see :meth:`RowSource.raw_batches`; or None), ``unchecked`` (bool)."""

    __slots__ = ()


_FORMATS: dict[str, Format] = {}
_UNWRAPPERS: list[Unwrapper] = []
_plugins_loaded = False


def register(name: str, read: Reader, sniff: Sniffer, *,
             read_batches: Optional[BatchReader] = None, unit: str = "line",
             before: Optional[str] = None, read_tracking: Optional[Reader] = None,
             read_raw=None, unchecked: bool = False) -> None:
    """Register (or replace) the reader for format ``name``, tried before format ``before``.

    ``read_tracking`` (optional) yields only the begin rows whose name contains ``[NN``
    or ``HIDL::IDevice`` (``ts`` may be None): a cheaper first pass; it may leave out
    ``[NN`` rows that repeat an earlier row's tid and tgid. ``read_raw`` (optional) gives
    the rows in the engine's raw form (see :meth:`RowSource.raw_batches`). ``unchecked``:
    both also take ``checked=False`` (see :attr:`RowSource.unchecked`).
    """
    _FORMATS[name] = Format(name, read, sniff, read_batches, unit, read_tracking, read_raw,
                            unchecked)
    if before in _FORMATS and before != name:
        items = [item for item in _FORMATS.items() if item[0] != name]
        items.insert([key for key, _ in items].index(before), (name, _FORMATS[name]))
        _FORMATS.clear()
        _FORMATS.update(items)


def register_unwrapper(unwrap: Unwrapper) -> None:
    """Register a content wrapper (e.g. gzip) applied before sniffing and reading."""
    if unwrap not in _UNWRAPPERS:
        _UNWRAPPERS.append(unwrap)


def formats() -> list[str]:
    """Names of the registered formats, in detection order."""
    _load_plugins()
    return list(_FORMATS)


def get_format(name: str) -> Format:
    """Return the registered format ``name``; unknown names list the valid ones."""
    _load_plugins()
    try:
        return _FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown trace format {name!r}; valid: {', '.join(_FORMATS)}") from None


def detect(head: bytes) -> str:
    """Name of the first registered format whose sniffer accepts ``head``."""
    _load_plugins()
    return _detect(head)


def _detect(head: bytes) -> str:
    """:func:`detect` among the formats registered so far."""
    found = _sniffed(head)
    if found is not None:
        return found
    raise TraceFormatError("file", "unrecognised trace format (expected systrace HTML, "
                           f"ftrace text or one of: {', '.join(_FORMATS)})")


def _without_plugins(head: bytes) -> Optional[str]:
    """The format registered so far that reads ``head`` whatever the plugins register, or
    None: when a plugin may take it first (:data:`PLUGIN_HEADS`) or no format does."""
    if head.lstrip(_BLANK).startswith(PLUGIN_HEADS):
        return None
    return _sniffed(head)


def _sniffed(head: bytes) -> Optional[str]:
    """The first format registered so far whose sniffer accepts ``head``, or None."""
    return next((fmt.name for fmt in _FORMATS.values() if fmt.sniff(head)), None)


class RowSource:
    """A re-iterable source of rows over one file (a path or a seekable binary file)."""

    def __init__(self, path_or_fileobj: Union[str, os.PathLike, BinaryIO],
                 format: Optional[str] = None) -> None:
        self._target = path_or_fileobj
        self._start = 0 if _is_path(path_or_fileobj) else path_or_fileobj.tell()
        if format is not None and format not in _FORMATS:
            _load_plugins()
        head, found = self._head(), None
        if not _plugins_loaded:
            found = _without_plugins(head)
            if found is None:
                _load_plugins()  # then read the head again, through their unwrappers (gzip)
                head = self._head()
        if not head:
            raise TraceFormatError("file", "empty trace file")
        self.format = format or found or _detect(head)
        self._fmt = _FORMATS.get(self.format) or get_format(self.format)

    def _head(self) -> bytes:
        with self._open() as handle:
            return handle.read(SNIFF_BYTES)

    @property
    def unit(self) -> str:
        """``"line"`` or ``"event"``: what an int ``where`` counts."""
        return self._fmt.unit

    def rows(self) -> Iterator[Row]:
        """Iterate over all rows, reading the file again from its start."""
        if self._fmt.read_batches is not None:
            yield from itertools.chain.from_iterable(self.batches())
            return
        with self._open() as handle:
            yield from self._fmt.read(handle)

    def batches(self) -> Iterator[list]:
        """Iterate over the rows in lists (faster for large files)."""
        with self._open() as handle:
            if self._fmt.read_batches is not None:
                yield from self._fmt.read_batches(handle)
                return
            rows = self._fmt.read(handle)
            while True:
                batch = list(itertools.islice(rows, _BATCH))
                if not batch:
                    return
                yield batch

    @property
    def unchecked(self) -> bool:
        """Whether :meth:`tracking_rows` and :meth:`raw_batches` take ``checked=False``:
        the first pass then skips validating rows it does not need, and the second raises
        :class:`~parse_systrace.errors.Unchecked` where that skipped a bad row."""
        return self._fmt.unchecked

    def raw_batches(self, checked: bool = True, span=None) -> Iterator[tuple]:
        """Rows in the engine's raw form: ``(first_line, rows)`` pairs.

        With an int ``first_line``, ``rows`` are ``(tid, tgid, ts, kind, name)`` tuples of
        bytes (``kind`` ``b"B"``, or ``b""`` for an end), one per line from ``first_line``; with None,
        ``rows`` are ``(where, (tid, tgid, ts, kind, name))`` pairs of converted values
        (ints, float, str or None). ``span`` (systrace/ftrace only): ``(start, stop)``,
        the rows of those bytes only (see :func:`.systrace._trace_blocks`).
        """
        if self._fmt.read_raw is not None:
            with self._open() as handle:
                yield from (self._fmt.read_raw(handle, checked, span) if span else
                            self._fmt.read_raw(handle) if checked
                            else self._fmt.read_raw(handle, checked=False))
            return
        for batch in self.batches():
            yield None, [(where, (tid, tgid, ts, b"" if name is None else b"B", name))
                         for ts, tid, tgid, name, where in batch]

    def tracking_rows(self, checked: bool = True, span=None) -> Iterator[Row]:
        """The begin rows that can make a thread tracked (``[NN`` or ``HIDL::IDevice``);
        ``span`` (systrace/ftrace only): see :meth:`raw_batches`."""
        if self._fmt.read_tracking is not None:
            with self._open() as handle:
                yield from (self._fmt.read_tracking(handle, checked, span) if span
                            else self._fmt.read_tracking(handle) if checked
                            else self._fmt.read_tracking(handle, checked=False))
            return
        for row in self.rows():
            name = row[3]
            if name is not None and ("[NN" in name or "HIDL::IDevice" in name):
                yield row

    def _open(self) -> "_Opened":
        return _Opened(self._target, self._start)


class _Opened:
    """Context manager: the (unwrapped) binary content positioned at its start."""

    def __init__(self, target, start: int) -> None:
        self._target, self._start = target, start
        self._owned: Optional[BinaryIO] = None

    def __enter__(self) -> BinaryIO:
        if _is_path(self._target):
            try:
                raw = self._owned = open(self._target, "rb")
            except OSError as error:
                raise TraceFormatError("file", f"cannot open: {error.strerror or error}") from None
        else:
            raw = self._target
            raw.seek(self._start)
        if not hasattr(raw, "peek"):  # unwrappers peek; the readers use readinto
            raw = io.BufferedReader(_NoClose(raw))
        for unwrap in _UNWRAPPERS:
            raw = unwrap(raw)
        return raw

    def __exit__(self, *exc) -> None:
        if self._owned is not None:
            self._owned.close()


class _NoClose(io.RawIOBase):
    """Raw view of a caller's file object that BufferedReader may wrap without closing it."""

    def __init__(self, inner: BinaryIO) -> None:
        self._inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._inner.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def open_rows(path_or_fileobj, format: Optional[str] = None) -> RowSource:
    """Open a trace (path or seekable binary file) as a re-iterable :class:`RowSource`."""
    return RowSource(path_or_fileobj, format)


def _is_path(target) -> bool:
    return isinstance(target, (str, bytes, os.PathLike))


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for name in PLUGINS:
        module = f"{__name__}.{name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:
                raise


from nnscope.parse_systrace.readers import systrace as _systrace  # noqa: E402  (the built-in readers)

register("systrace", _systrace.read_html, _systrace.sniff_html, read_batches=_systrace.read_batches_html,
         read_tracking=_systrace.read_tracking_html, read_raw=_systrace.read_raw_html, unchecked=True)
register("ftrace", _systrace.read_ftrace, _systrace.sniff_text, read_batches=_systrace.read_batches_text,
         read_tracking=_systrace.read_tracking_text, read_raw=_systrace.read_raw_text, unchecked=True)
