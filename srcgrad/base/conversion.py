"""Retrying a failed trace with its functions converted: the hooks srcgrad.convert sets.

`srcgrad.convert` provides `CONVERT` (a function -> the function to trace in its place),
`WANTS_CONVERSION` (does this tracing error go away if the function is converted?),
`EXPLAIN_FAILURE` (a better error for a trace that failed converted) and `LOOP_HINT` (the
advice for an unbounded converted loop). The tracer calls `user_fn` where it calls a user's
function and `trace_converting` around a whole trace, so code that traces today runs
unchanged and only a failed trace is retried with its functions converted.

Layer L0 (base): see docs/design.md.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from .hooks import Hook

T = TypeVar("T")

CONVERT: Hook[Callable[[Any], Any]] = Hook(
    "srcgrad.base.conversion.CONVERT", "a function -> its converted form (srcgrad.convert)"
)
WANTS_CONVERSION: Hook[Callable[[BaseException], bool]] = Hook(
    "srcgrad.base.conversion.WANTS_CONVERSION",
    "whether converting the traced functions may remove this error (srcgrad.convert)",
)
EXPLAIN_FAILURE: Hook[Callable[[BaseException], "BaseException | None"]] = Hook(
    "srcgrad.base.conversion.EXPLAIN_FAILURE",
    "a clearer error for a trace that failed converted, or None (srcgrad.convert)",
)
LOOP_HINT: Hook[Callable[[Any], str]] = Hook(
    "srcgrad.base.conversion.LOOP_HINT",
    "the advice for an unbounded loop at a user line, if conversion made it (srcgrad.convert)",
    default=lambda loc: "",
)


class _State(threading.local):
    def __init__(self) -> None:
        self.converting = False


_state = _State()


def converting() -> bool:
    """True while a failed trace is retried with its functions converted."""
    return _state.converting


def user_fn(fn: Any) -> Any:
    """`fn`, or its converted form while converting."""
    if _state.converting and CONVERT.is_set:
        return CONVERT.value(fn)
    return fn


def trace_converting(run: Callable[[], T]) -> T:
    """`run()`; if it fails with an error conversion removes, `run()` again converting."""
    if _state.converting or not CONVERT.is_set:
        return run()
    try:
        return run()
    except Exception as e:  # only the errors conversion can remove are retried
        if not WANTS_CONVERSION(e):
            raise
    _state.converting = True
    try:
        return run()
    except Exception as e:
        better = EXPLAIN_FAILURE(e)
        if better is None:
            raise
        raise better from e
    finally:
        _state.converting = False


def loop_hint(loc: Any) -> str:
    """The advice for an unbounded loop at `loc` that needs a bound ("" unless converted)."""
    return LOOP_HINT(loc)
