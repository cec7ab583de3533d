"""Python control-flow conversion (AutoGraph's design): `if`/`while`/`for` on traced values
become `cond` / `while` ops, by rewriting the function's source.

A function traced by sg.grad & co. that fails on Python control flow over a traced value is
converted and traced again (srcgrad/base/conversion.py, whose hooks srcgrad/wiring.py sets
to `convert_for_retry`, `wants_conversion`, `explain_failure` and `runtime.loop_hint`);
`sg.convert(fn, max_iters=N)` converts always and bounds the converted loops;
`sg.no_convert(fn)` opts out. See docs/control_flow.md.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax

from ..base.errors import SrcgradError, TraceError, user_location
from ..ir.program import Variable, current_program
from .loader import converted, converted_source, missing, no_convert
from . import runtime


class Converted:
    """`fn` converted whenever it is traced (called on arrays, it runs as written)."""

    def __init__(self, fn: Callable[..., Any], max_iters: int | None):
        self.fn = fn
        self.max_iters = max_iters
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        traced = current_program() is not None or any(
            isinstance(l, Variable) for l in jax.tree_util.tree_leaves((args, kwargs))
        )
        if not traced:
            return self.fn(*args, **kwargs)
        fn = converted(self.fn, force=True)
        saved = runtime.options.max_iters
        runtime.options.max_iters = self.max_iters if self.max_iters is not None else saved
        try:
            return fn(*args, **kwargs)
        finally:
            runtime.options.max_iters = saved

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)


def convert(fn: Callable[..., Any] | None = None, *, max_iters: int | None = None) -> Any:
    """Convert `fn`'s Python control flow on traced values into srcgrad ops whenever it is
    traced (also under `sg.program_guard`); `max_iters` bounds every loop it converts (needed
    for the gradient of a data-dependent loop inside `jax.jit`). Also a decorator, with or
    without arguments."""
    if max_iters is not None and (
        isinstance(max_iters, bool) or not isinstance(max_iters, int) or max_iters < 0
    ):
        raise SrcgradError(
            f"sg.convert: max_iters must be a non-negative int, got {max_iters!r}",
            loc=user_location(),
        )
    if fn is None:
        return lambda f: Converted(f, max_iters)
    if isinstance(fn, Converted):
        fn = fn.fn
    return Converted(fn, max_iters)


convert.source = converted_source  # type: ignore[attr-defined]


def wants_conversion(e: BaseException) -> bool:
    """Whether converting the traced functions may remove the tracing error `e`."""
    msg = str(e)
    if isinstance(e, TraceError):
        return "has no Python truth value" in msg
    if isinstance(e, ValueError):  # NumPy storing a traced value into an array
        return "setting an array element with a sequence" in msg
    return isinstance(e, TypeError) and ("'Variable' object" in msg or "not Variable" in msg)


def explain_failure(e: BaseException) -> BaseException | None:
    """A clearer error for a trace that failed converted: a function whose source is missing."""
    fns, missing.no_source = missing.no_source, []
    if not fns or not wants_conversion(e):
        return None
    names = ", ".join(
        f"{f.__qualname__} ({f.__code__.co_filename}:{f.__code__.co_firstlineno})"
        for f in dict.fromkeys(fns)
    )
    loc = getattr(e, "loc", None)
    return SrcgradError(
        f"{getattr(e, 'detail', e)}; srcgrad could not convert this Python control flow into "
        f"srcgrad ops: the source of {names} is not available (a function "
        "defined in a REPL string or by exec); define it in a file or rewrite "
        "it with sg.cond / sg.while_loop",
        loc=loc,
    )


def convert_for_retry(fn: Any) -> Any:
    """`fn` converted, for a trace retried converting (a Converted function stays as it is)."""
    if isinstance(fn, Converted):
        return fn
    return converted(fn)


__all__ = ["convert", "no_convert", "Converted"]
