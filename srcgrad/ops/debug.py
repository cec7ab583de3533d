"""The effectful ops of `sg.debug`: `debug_print` (jax.debug.print at run time) and
`debug_breakpoint` (jax.debug.breakpoint), and `raise_if` (a Python exception raised at run
time when a flag is true: a converted `raise` or `assert` under a traced condition). They are
registered with `effect=True`, so dead code elimination, loop-invariant hoisting, CSE and
recomputation leave them where they are.

The format string is the user's: it never enters the generated source. The lowering puts it
in the `_consts` side table and the source reads `_consts[i]`; keyword names are written only
when they are plain identifiers.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import copy
import keyword
from typing import Any, Sequence

import numpy as np

from ..core.builder import emit
from ..base.errors import TraceError, user_location
from ..ir.program import Op, Variable
from ..core.registry import ZERO, OutType, register


def _no_outputs(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    return []


def _lower_print(em: Any, op: Op) -> None:
    """`jax.debug.print(_consts[i], a, b, x=c)`: the format string from the side table."""
    names = op.attrs["names"]
    args = [em.name(v) for v in op.inputs]
    n_pos = len(args) - len(names)
    em.consts.append(op.attrs["fmt"])
    parts = [
        f"_consts[{len(em.consts) - 1}]",
        *args[:n_pos],
        *[f"{k}={a}" for k, a in zip(names, args[n_pos:])],
    ]
    em.line(f"jax.debug.print({', '.join(parts)})")


def _lower_breakpoint(em: Any, op: Op) -> None:
    em.line("jax.debug.breakpoint()")


class _Raiser:
    """The callback of a `raise_if`: raises `error` when any element of the flag is true."""

    def __init__(self, error: BaseException, where: Any):
        self.error, self.where = error, where

    def __call__(self, flag: Any) -> None:
        if np.any(np.asarray(flag)):
            error = copy.copy(self.error)
            error.__traceback__ = None
            if hasattr(error, "add_note"):  # Python >= 3.11
                error.add_note(
                    f"raised when the compiled program ran: srcgrad staged this "
                    f"exception (at {self.where}) because a traced condition chooses "
                    "whether it is raised"
                )
            raise error


def _lower_raise(em: Any, op: Op) -> None:
    """`jax.debug.callback(_consts[i], flag)`: the exception lives in the side table."""
    em.consts.append(_Raiser(op.attrs["error"], op.attrs["where"]))
    em.line(f"jax.debug.callback(_consts[{len(em.consts) - 1}], {em.name(op.inputs[0])})")


register("debug_print", _no_outputs, None, ZERO, lower_stmt=_lower_print, effect=True)
register("debug_breakpoint", _no_outputs, None, ZERO, lower_stmt=_lower_breakpoint, effect=True)
register("raise_if", _no_outputs, None, ZERO, lower_stmt=_lower_raise, effect=True)


def emit_print(fmt: str, args: Sequence[Variable], kwargs: dict[str, Variable]) -> None:
    """Append a `debug_print` of `fmt` over `args` and `kwargs` (traced values)."""
    if not isinstance(fmt, str):
        raise TraceError(
            f"sg.debug.print needs a format string, got {type(fmt).__name__}",
            op="debug_print",
            loc=user_location(),
        )
    for k in kwargs:
        if not k.isidentifier() or keyword.iskeyword(k):
            raise TraceError(
                f"sg.debug.print: {k!r} is not a keyword argument name",
                op="debug_print",
                loc=user_location(),
            )
    check_format(
        fmt,
        [np.zeros(v.shape, v.dtype) for v in args],
        {k: np.zeros(v.shape, v.dtype) for k, v in kwargs.items()},
    )
    emit("debug_print", [*args, *kwargs.values()], {"fmt": fmt, "names": tuple(kwargs)})


def check_format(fmt: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """A TraceError now (at trace time, at the user's line) for a format string that does not
    fit the arguments: a name or position it has no value for (a KeyError from the compiled
    call otherwise), or a format spec arrays of these shapes and dtypes refuse."""
    try:
        fmt.format(*args, **kwargs)
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as e:
        given = ", ".join([f"{len(args)} positional"] + [f"{k}=" for k in kwargs])
        raise TraceError(
            f"sg.debug.print: the format string {fmt!r} does not fit its "
            f"arguments ({given}): {type(e).__name__}: {e}",
            op="debug_print",
            loc=user_location(),
        ) from None


def emit_raise_if(flag: Variable, error: BaseException, where: Any) -> None:
    """Append a `raise_if`: the compiled program raises `error` where `flag` (a bool) is
    true (`where`: the user's line of the `raise`, for the note on the exception)."""
    emit("raise_if", [flag], {"error": error, "where": where})


def emit_breakpoint() -> None:
    """Append a `debug_breakpoint`: the compiled program stops in pdb when it gets there."""
    emit("debug_breakpoint", [], {})
