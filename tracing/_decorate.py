"""Find the arguments of a scope factory used as a decorator while tracing was off.

When tracing is off a factory returns a shared no-op scope and keeps nothing, so
the decorator (``@tracing.runtime(Phase.PC, "finish")``) reads its own call back
from the source: the position of the decorating call (PEP 657) gives the
expression, whose function and arguments are evaluated again in the caller's
namespace. Only a call of a known factory is accepted.

Example:
    >>> resolve(sys._getframe(), {})  is None   # doctest: +SKIP
    True
"""
from __future__ import annotations

import ast
import linecache
import logging
from types import FrameType
from typing import Callable

_log = logging.getLogger(__name__)


def resolve(frame: FrameType, keys: dict[Callable, Callable]) -> tuple[str, str] | None:
    """Return ``(tag, detail)`` of the factory call that ``frame`` is applying, or None.

    Args:
        frame: the frame that calls the scope with the function to decorate.
        keys: factory -> function mapping the factory's arguments to ``(tag, detail)``.
    """
    call = _factory_call(frame)
    if call is None:
        return None
    try:
        factory = _evaluate(call.func, frame)
        args = [_evaluate(arg, frame) for arg in call.args]
        kwargs = {kw.arg: _evaluate(kw.value, frame) for kw in call.keywords}
    except Exception:  # noqa: BLE001 - any failure means "cannot tell"
        _log.debug("cannot evaluate decorator arguments", exc_info=True)
        return None
    if factory not in keys:
        return None
    return keys[factory](*args, **kwargs)


def _factory_call(frame: FrameType) -> ast.Call | None:
    code = frame.f_code
    positions = list(code.co_positions())
    index = frame.f_lasti // 2
    if index >= len(positions) or None in positions[index]:
        return None
    line, end_line, col, end_col = positions[index]
    source = _segment(code.co_filename, frame.f_globals, line, end_line, col, end_col)
    try:
        node = ast.parse(source.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Call):
        node = node.func  # tracing.runtime(...)(func) written as a plain call
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args) \
            or any(kw.arg is None for kw in node.keywords):
        return None
    return node


def _segment(filename: str, module_globals: dict, line: int, end_line: int,
             col: int, end_col: int) -> str:
    lines = linecache.getlines(filename, module_globals)[line - 1:end_line]
    if not lines:
        return ""
    encoded = [text.encode("utf-8") for text in lines]  # PEP 657 columns count UTF-8 bytes
    if len(encoded) == 1:
        return encoded[0][col:end_col].decode("utf-8", "replace")
    encoded[-1] = encoded[-1][:end_col]
    encoded[0] = encoded[0][col:]
    return b"".join(encoded).decode("utf-8", "replace")


def _evaluate(node: ast.expr, frame: FrameType) -> object:
    code = compile(ast.Expression(body=node), frame.f_code.co_filename, "eval")
    return eval(code, frame.f_globals, frame.f_locals)  # noqa: S307 - the caller's own code
