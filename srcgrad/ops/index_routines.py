"""jax.numpy's index arithmetic and array assembly: ravel_multi_index, unravel_index, vander,
block, delete and insert with static positions, gradient and unwrap.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from .rules import norm_axis
from ..core.declare import public
from .elementwise import abs as abs_
from .elementwise import astype, clip, where
from .manip import moveaxis, ravel
from .shape import broadcast_to, concatenate, expand_dims, stack
from .sorting import cumsum, diff


@public
def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C") -> Variable:
    """jnp.ravel_multi_index: flat indices of index arrays into `dims` (mode 'clip' or
    'wrap'; 'raise' clips, as jnp under jit)."""
    if order not in ("C", "F"):
        raise ShapeError(f"order must be 'C' or 'F', got {order!r}", op="ravel_multi_index")
    idx = [as_var(i) for i in multi_index]
    dims = [int(d) for d in dims]
    if len(idx) != len(dims):
        raise ShapeError(f"{len(idx)} index arrays for {len(dims)} dims", op="ravel_multi_index")
    idx = [i % d if mode == "wrap" else clip(i, 0, d - 1) for i, d in zip(idx, dims)]
    pairs = list(zip(idx, dims))
    if order == "F":
        pairs.reverse()
    out = None
    for i, d in pairs:
        out = i if out is None else out * d + i
    return out


@public
def unravel_index(indices: Any, shape: Sequence[int]) -> tuple[Variable, ...]:
    """jnp.unravel_index: the coordinates in `shape` of flat indices (out-of-range indices
    clipped, negative ones counted from the end, as jnp)."""
    i = as_var(indices)
    shape = [int(d) for d in shape]
    total = math.prod(shape)
    i = clip(where(i < 0, i + total, i), 0, max(total - 1, 0))
    out = []
    for d in reversed(shape):
        out.append(i % d)
        i = i // d
    return tuple(reversed(out))


@public
def vander(x: Any, N: int | None = None, increasing: bool = False) -> Variable:
    """jnp.vander: the Vandermonde matrix, columns x**(N-1) ... x**0 (or increasing)."""
    x = as_var(x)
    if x.ndim != 1:
        raise ShapeError(f"vander takes a 1-D array, got {x.type_str()}", op="vander")
    n = x.shape[0] if N is None else int(N)
    if n == 0:
        from .creation import zeros
        return zeros((x.shape[0], 0), x.dtype)
    cols = [x ** 0] + [x ** k for k in range(1, n)]
    m = stack(cols, -1)
    return m if increasing else m[:, ::-1]


def _block(arrays: Any, depth: int, max_depth: int) -> Variable:
    if not isinstance(arrays, list):
        return as_var(arrays)
    parts = [_block(a, depth + 1, max_depth) for a in arrays]
    ndim = max(max(p.ndim for p in parts), max_depth)
    parts = [p.reshape((1,) * (ndim - p.ndim) + p.shape) for p in parts]
    return concatenate(parts, depth - max_depth)


def _list_depth(x: Any) -> int:
    return 1 + max((_list_depth(a) for a in x), default=0) if isinstance(x, list) else 0


@public
def block(arrays: Any) -> Variable:
    """jnp.block: assemble an array from nested lists of blocks."""
    depth = _list_depth(arrays)
    if depth == 0:
        return as_var(arrays)
    return _block(arrays, 0, depth)


def _static_positions(obj: Any, n: int, name: str) -> list[int]:
    if isinstance(obj, Variable):
        raise ShapeError(f"{name} needs static positions (an int, a list of ints or a slice)",
                         op=name)
    if isinstance(obj, slice):
        return list(range(n))[obj]
    return [int(i) for i in np.atleast_1d(np.asarray(obj))]


@public
def delete(arr: Any, obj: Any, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Variable:
    """jnp.delete with static positions: `arr` without the entries at `obj` along `axis`."""
    a = as_var(arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = norm_axis(axis, a.ndim)
    n = a.shape[axis]
    drop = {i % n for i in _static_positions(obj, n, "delete")}
    a0 = moveaxis(a, axis, 0)
    pieces, start = [], 0
    for i in sorted(drop) + [n]:
        if i > start:
            pieces.append(a0[start:i])
        start = i + 1
    out = concatenate(pieces, 0) if len(pieces) > 1 else pieces[0] if pieces else a0[:0]
    return moveaxis(out, 0, axis)


@public
def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Variable:
    """jnp.insert with static positions: `values` inserted before the entries at `obj`."""
    a = as_var(arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = norm_axis(axis, a.ndim)
    n = a.shape[axis]
    pos = [i % (n + 1) if i < 0 else i for i in _static_positions(obj, n + 1, "insert")]
    v = astype(as_var(values), a.dtype)
    slot = a.shape[:axis] + (len(pos),) + a.shape[axis + 1:]
    if v.ndim == a.ndim and len(pos) == 1 and v.shape[axis] != 1:
        slot = a.shape[:axis] + (v.shape[axis],) + a.shape[axis + 1:]
        pos = pos * v.shape[axis]
    v = moveaxis(broadcast_to(v if v.ndim == a.ndim else _expand_to(v, a.ndim, axis), slot),
                 axis, 0)
    a0 = moveaxis(a, axis, 0)
    pieces, start = [], 0
    order = sorted(range(len(pos)), key=lambda k: (pos[k], k))
    for k in order:
        if pos[k] > start:
            pieces.append(a0[start:pos[k]])
            start = pos[k]
        pieces.append(v[k:k + 1])
    if start < n:
        pieces.append(a0[start:])
    return moveaxis(concatenate(pieces, 0), 0, axis)


def _expand_to(v: Variable, ndim: int, axis: int) -> Variable:
    if v.ndim == 0:
        return v
    return expand_dims(v, axis) if v.ndim == ndim - 1 else v


@public
def gradient(f: Any, *varargs: Any, axis: int | Sequence[int] | None = None,
             edge_order: int | None = None) -> Any:
    """jnp.gradient with unit or scalar spacing: central differences inside, one-sided at
    the edges; a list for several axes."""
    f = as_var(f)
    if not dtypes.is_inexact(f.dtype):
        f = astype(f, dtypes.default_float())
    axes = list(range(f.ndim)) if axis is None else (
        [axis] if isinstance(axis, int) else list(axis))
    spacing = list(varargs) if varargs else [1.0] * len(axes)
    if len(spacing) == 1 and len(axes) > 1:
        spacing = spacing * len(axes)
    outs = []
    for ax, h in zip(axes, spacing):
        if not isinstance(h, (int, float)):
            raise ShapeError("gradient supports scalar spacing only", op="gradient")
        g = moveaxis(f, ax, 0)
        if g.shape[0] < 2:
            raise ShapeError("gradient needs at least 2 points along each axis", op="gradient")
        inner = (g[2:] - g[:-2]) / (2.0 * h)
        first = (g[1:2] - g[0:1]) / float(h)
        last = (g[-1:] - g[-2:-1]) / float(h)
        outs.append(moveaxis(concatenate([first, inner, last], 0), 0, ax))
    return outs[0] if len(outs) == 1 else outs


@public
def unwrap(p: Any, discont: Any = None, axis: int = -1, period: float = 2 * math.pi) -> Variable:
    """jnp.unwrap: remove jumps larger than `discont` (default period / 2) along `axis`."""
    p = as_var(p)
    if not dtypes.is_inexact(p.dtype):
        p = astype(p, dtypes.default_float())
    half = period / 2
    discont = half if discont is None else discont
    dd = diff(p, axis=axis)
    ddmod = (dd + half) % period - half
    ddmod = where((ddmod == -half) & (dd > 0), half, ddmod)
    correction = where(abs_(dd) < discont, 0.0, ddmod - dd)
    cum = cumsum(correction, axis=axis)
    ax = norm_axis(axis, p.ndim)
    zero_shape = p.shape[:ax] + (1,) + p.shape[ax + 1:]
    from .creation import zeros
    return p + concatenate([zeros(zero_shape, p.dtype), cum], ax)
