"""Shared shape and dtype rules for the registry rows.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..base import dtypes
from ..base.errors import ShapeError
from ..ir.program import Shape, Variable
from ..core.registry import OutType


@lru_cache(maxsize=4096)
def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting of static shapes."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        dims = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeError(
                "shapes "
                + " and ".join(str(tuple(s)) for s in shapes)
                + " cannot be broadcast together"
            )
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def norm_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def norm_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted, non-negative axes; None means all."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(sorted(norm_axis(int(a), ndim) for a in axes))
    if len(set(out)) != len(out):
        raise ShapeError(f"repeated axis in {axis}")
    return out


@lru_cache(maxsize=None)
def _jax_dtype(fn: Callable[..., Any], dts: tuple[np.dtype, ...], wide: bool) -> np.dtype:
    args = [jax.ShapeDtypeStruct((), d) for d in dts]
    return np.dtype(jax.eval_shape(fn, *args).dtype)


def jax_dtype(fn: Callable[..., Any], *dts: np.dtype) -> np.dtype:
    """The result dtype JAX gives `fn` on scalars of these dtypes (for the rare mixed cases)."""
    return _jax_dtype(fn, dts, dtypes.x64())


def same(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    return [(x.shape, x.dtype)]


def require_float(v: Variable, what: str) -> None:
    if not dtypes.is_inexact(v.dtype):
        raise ShapeError(f"{what} needs a floating-point input, got {v.type_str()}")


def require_real(*vs: Variable, what: str) -> None:
    """A ShapeError where one of `vs` is complex: `what` does not take complex values (JAX
    refuses them too, or they have no meaning there)."""
    for v in vs:
        if v.dtype.kind == "c":
            raise ShapeError(f"{what} does not take complex values, got {v.type_str()}")


def require_bool_like(v: Variable, what: str) -> None:
    if v.dtype != np.dtype(bool):
        raise ShapeError(f"{what} needs a bool input, got {v.type_str()}")
