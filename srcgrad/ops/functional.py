"""jax.numpy's functional-programming names: piecewise, apply_along_axis and
apply_over_axes, which call the user's function on srcgrad values.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ..base.errors import ShapeError
from ..core.builder import as_var
from ..core.declare import public
from ..ir.program import Variable
from . import elementwise
from .creation import zeros
from .manip import moveaxis
from .operands import checked_axis
from .shape import expand_dims, reshape, stack


@public
def piecewise(x: Any, condlist: Any, funclist: list, *args: Any, **kw: Any) -> Variable:
    """jnp.piecewise: each element takes the function (or constant) of the last condition
    that holds, the default (the extra last function, else 0) where none does."""
    x = as_var(x)
    conds = [
        elementwise.astype(as_var(c), np.dtype(bool))
        for c in (
            list(condlist)
            if isinstance(condlist, (list, tuple))
            else [as_var(condlist)[i] for i in range(as_var(condlist).shape[0])]
        )
    ]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        funclist = funclist[-1:] + funclist[:-1]
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ShapeError(
            f"with {nc} condition(s), piecewise needs {nc} or {nc + 1} functions, got {nf}",
            op="piecewise",
        )

    def value(f: Any) -> Variable:
        v = f(x, *args, **kw) if callable(f) else f
        return elementwise.astype(elementwise.add(zeros(x.shape, x.dtype), v), x.dtype)

    out = value(funclist[0])
    for c, f in zip(conds, funclist[1:]):
        out = elementwise.where(c, value(f), out)
    return out


@public
def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Sequence[int]) -> Variable:
    """jnp.apply_over_axes: `func(a, axis)` for each axis in turn, keeping the rank."""
    a = as_var(a)
    for axis in axes:
        b = as_var(func(a, axis))
        if b.ndim == a.ndim - 1:
            b = expand_dims(b, axis)
        elif b.ndim != a.ndim:
            raise ShapeError(
                "apply_over_axes: the function returned a result of rank "
                f"{b.ndim} for rank {a.ndim}",
                op="apply_over_axes",
            )
        a = b
    return a


@public
def apply_along_axis(
    func1d: Callable[..., Any], axis: int, arr: Any, *args: Any, **kwargs: Any
) -> Variable:
    """jnp.apply_along_axis: `func1d` on every 1-D slice along `axis`; its result's axes
    replace `axis`. Traced as one call per slice (jax vmaps; the values are the same), so
    meant for modest batch sizes."""
    arr = as_var(arr)
    ax = checked_axis(axis, arr.ndim, "apply_along_axis")
    moved = moveaxis(arr, ax, -1)
    batch = moved.shape[:-1]
    rows = reshape(moved, (math.prod(batch), moved.shape[-1]))
    outs = [as_var(func1d(rows[i], *args, **kwargs)) for i in range(rows.shape[0])]
    res = reshape(stack(outs, 0), batch + outs[0].shape)
    return (
        moveaxis(res, list(range(len(batch), res.ndim)), list(range(ax, ax + outs[0].ndim)))
        if outs[0].ndim
        else res
    )
