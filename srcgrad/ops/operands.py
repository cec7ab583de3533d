"""Turning the user's arguments into operands, as jax.numpy does: the promoted dtype of
several arguments, a float dtype for an integer one, an axis checked against a rank.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any

from ..base import dtypes
from ..base.errors import ShapeError
from ..core.builder import as_var
from ..ir.program import Variable
from .elementwise import astype


def promoted(*xs: Any, inexact: bool = False) -> list[Variable]:
    """The arguments in their promoted dtype (Python scalars weakly typed, as in JAX)."""
    like = next((x for x in xs if isinstance(x, Variable)), None)
    if like is None:
        like = next((as_var(x) for x in xs if not isinstance(x, (bool, int, float))), None)
    vs = [as_var(x, like=like) for x in xs]
    dt = vs[0].dtype
    for v in vs[1:]:
        dt = dtypes.promote(dt, v.dtype)
    if inexact and not dtypes.is_inexact(dt):
        dt = dtypes.default_float()
    return [astype(v, dt) for v in vs]


def checked_axis(axis: int, ndim: int, name: str) -> int:
    """`axis` of an `ndim`-d operand of `name`, non-negative; out of range: a ShapeError."""
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of range for {ndim}-d input", op=name)
    return axis % ndim


def inexact(x: Any) -> Variable:
    """`x`, cast to the default float dtype unless it is inexact already."""
    x = as_var(x)
    return x if dtypes.is_inexact(x.dtype) else astype(x, dtypes.default_float())
