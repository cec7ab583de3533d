"""Hooks a front end fills in for the layers below it: Python control-flow conversion.

`srcgrad.convert` registers `convert_fn` (a function -> the function to trace in its place)
and `wants_conversion` (does this tracing error go away if the function is converted?).
The tracer calls `user_fn` where it calls a user's function and `trace_converting` around a
whole trace, so code that traces today runs unchanged and only a failed trace is retried
with its functions converted.

Layer L0 (base: errors, dtypes, config, caches): see docs/design.md.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class _State(threading.local):
    def __init__(self) -> None:
        self.converting = False


_state = _State()
convert_fn: Callable[[Any], Any] | None = None
wants_conversion: Callable[[BaseException], bool] = lambda e: False
explain_failure: Callable[[BaseException], BaseException | None] = lambda e: None
#: The user lines (SourceLoc) of loops made by conversion, for the error that asks for a bound.
converted_loops: set = set()


def converting() -> bool:
    """True while a failed trace is retried with its functions converted."""
    return _state.converting


def user_fn(fn: Any) -> Any:
    """`fn`, or its converted form while converting."""
    if _state.converting and convert_fn is not None:
        return convert_fn(fn)
    return fn


def trace_converting(run: Callable[[], T]) -> T:
    """`run()`; if it fails with an error conversion removes, `run()` again converting."""
    if _state.converting or convert_fn is None:
        return run()
    try:
        return run()
    except Exception as e:  # noqa: BLE001 (only the errors conversion can remove are retried)
        if not wants_conversion(e):
            raise
    _state.converting = True
    try:
        return run()
    except Exception as e:  # noqa: BLE001
        better = explain_failure(e)
        if better is None:
            raise
        raise better from e
    finally:
        _state.converting = False


def loop_hint(loc: Any) -> str:
    """The advice for an unbounded loop at `loc` that needs a bound."""
    if loc in converted_loops:
        return ("; it is a converted Python loop: bound it with sg.convert(fn, max_iters=N) "
                "(also a decorator)")
    return ""
