"""Tracebacks without srcgrad's own frames, as JAX's traceback filtering.

An exception that leaves srcgrad through a public entry point (a call of an op, of a
transformed function or of a custom_vjp/custom_jvp function, `sg.grad`, `sg.trace`, ...) has the
frames of srcgrad's own files
removed from its traceback, so that it shows the user's lines: where they called srcgrad and,
below it, their traced function. Frames of the emitted code (`<srcgrad:...>` files) stay.
`sg.config.traceback_filtering = False`, or the environment variable
`SRCGRAD_TRACEBACK_FILTERING=off` when srcgrad is imported, keeps every frame.

Layer L0 (base): see docs/design.md.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any, Callable, TypeVar

from . import errors
from .config import config

F = TypeVar("F", bound=Callable[..., Any])


def _internal(filename: str) -> bool:
    return filename.startswith(errors.internal_dirs())


def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """`tb` without the entries of srcgrad's own files."""
    kept = []
    while tb is not None:
        if not _internal(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def leave_out_internal_frames(e: BaseException) -> None:
    """Filter `e`'s traceback in place (when `sg.config.traceback_filtering` is on); a bare
    `raise` after it re-raises `e` without the frames left out, the current one included.

    Python 3.10's bare `raise` re-raises the traceback the handler caught, not
    `e.__traceback__`: there the caught chain itself is relinked past srcgrad's entries, and
    its first entry, the handler's own frame, stays (one srcgrad frame: the entry point
    the user called, as JAX's api boundary shows on every version)."""
    if not config.traceback_filtering:
        return
    if sys.version_info >= (3, 11):
        e.__traceback__ = filter_traceback(e.__traceback__)
        return
    head = e.__traceback__
    if head is None:
        return
    entry = head
    rest = head.tb_next
    while rest is not None:
        if not _internal(rest.tb_frame.f_code.co_filename):
            entry.tb_next = rest
            entry = rest
        rest = rest.tb_next
    entry.tb_next = None


def api_boundary(fn: F) -> F:
    """`fn` with the tracebacks of the exceptions it raises filtered (see the module doc)."""

    @functools.wraps(fn)
    def boundary(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            leave_out_internal_frames(e)
            raise

    return boundary
