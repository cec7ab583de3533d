"""jax.numpy's indexing routines: index arithmetic (ravel_multi_index, unravel_index, ix_,
mask_indices), selection (select, choose, compress, extract) and put_along_axis, as
compositions of gathers, scatters and `where`.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import builtins

from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from .rules import broadcast_shapes
from ..core.declare import public
from .elementwise import clip, where
from .manip import moveaxis
from .shape import ravel
from .shape import broadcast_to, concatenate, expand_dims, reshape
from .sorting import argsort, take_along_axis
from .operands import checked_axis, promoted
from . import elementwise
from .creation import arange, ones
from .sets import nonzero


@public
def ravel_multi_index(
    multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise", order: str = "C"
) -> Variable:
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
def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Variable:
    """jnp.select: the choice of the first true condition, else `default`."""
    if len(condlist) != len(choicelist):
        raise ShapeError(
            f"select: {len(condlist)} conditions for {len(choicelist)} choices", op="select"
        )
    choices = promoted(*choicelist, default)
    out = choices[-1]
    for cond, choice in reversed(list(zip(condlist, choices[:-1]))):
        out = where(as_var(cond), choice, out)
    return out


@public
def choose(a: Any, choices: Sequence[Any], out: None = None, mode: str = "raise") -> Variable:
    """jnp.choose: choices[a] elementwise (mode 'clip' or 'wrap'; 'raise' clips, as jnp
    under jit)."""
    idx = as_var(a)
    cs = promoted(*choices)
    shape = broadcast_shapes(idx.shape, *[c.shape for c in cs])
    n = len(cs)
    idx = idx % n if mode == "wrap" else clip(idx, 0, n - 1)
    stacked = concatenate([expand_dims(broadcast_to(c, shape), 0) for c in cs], 0)
    pick = expand_dims(broadcast_to(idx, shape), 0)
    return take_along_axis(stacked, pick, 0)[0]


@public
def ix_(*args: Any) -> tuple[Variable, ...]:
    """jnp.ix_: 1-D index arrays shaped to index an open mesh."""
    n = len(args)
    out = []
    for i, a in enumerate(args):
        v = as_var(a)
        if v.ndim != 1:
            raise ShapeError(f"ix_ takes 1-D arrays, got {v.type_str()}", op="ix_")
        out.append(reshape(v, (1,) * i + (v.shape[0],) + (1,) * (n - i - 1)))
    return tuple(out)


@public
def compress(
    condition: Any,
    a: Any,
    axis: int | None = None,
    *,
    size: int | None = None,
    fill_value: Any = 0,
    out: None = None,
) -> Variable:
    """jnp.compress with JAX's `size=` (required here: the result's length must be static):
    the slices of `a` along `axis` where `condition` holds, padded with `fill_value`."""
    c = elementwise.astype(as_var(condition), np.dtype(bool))
    if c.ndim != 1:
        raise ShapeError(f"compress needs a 1-D condition, got {c.type_str()}", op="compress")
    if size is None:
        raise ShapeError(
            "compress needs size= in srcgrad (the result's length must be "
            "static, as under jax.jit)",
            op="compress",
        )
    arr = ravel(as_var(a)) if axis is None else moveaxis(as_var(a), axis, 0)
    n = builtins.min(c.shape[0], arr.shape[0])
    if not 0 <= size <= arr.shape[0]:
        raise ShapeError(f"size must be in [0, {arr.shape[0]}], got {size}", op="compress")
    c, arr = c[:n], arr[:n]
    mask = reshape(c, (n,) + (1,) * (arr.ndim - 1))
    arr = elementwise.where(mask, arr, elementwise.astype(as_var(fill_value), arr.dtype))
    result = arr[argsort(c, stable=True, descending=True)][:size]
    return moveaxis(result, 0, 0 if axis is None else axis)


@public
def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Variable:
    """jnp.extract(condition, arr, size=, fill_value=): compress of the flattened arrays."""
    return compress(ravel(as_var(condition)), ravel(as_var(arr)), size=size, fill_value=fill_value)


@public
def put_along_axis(
    arr: Any,
    indices: Any,
    values: Any,
    axis: int | None,
    inplace: bool = True,
    *,
    mode: str | None = None,
) -> Variable:
    """jnp.put_along_axis(..., inplace=False): `arr` with `values` written at `indices`
    along `axis` (the functional form: srcgrad, as JAX, has no in-place update)."""
    if inplace:
        raise ShapeError(
            "put_along_axis needs inplace=False (arrays are immutable, as in jax.numpy)",
            op="put_along_axis",
        )
    a, idx = as_var(arr), as_var(indices)
    if axis is None:
        a, idx, axis = ravel(a), ravel(idx), 0
    ax = checked_axis(axis, a.ndim, "put_along_axis")
    if idx.ndim != a.ndim:
        raise ShapeError(
            f"indices need the array's rank {a.ndim}, got {idx.type_str()}", op="put_along_axis"
        )
    shape = tuple(idx.shape[d] if d == ax else a.shape[d] for d in range(a.ndim))
    grids = [
        arange(n, dtype=idx.dtype).reshape(tuple(n if d == i else 1 for d in range(a.ndim)))
        for i, n in enumerate(shape)
    ]
    where_ = tuple(
        elementwise.where(idx < 0, idx + a.shape[ax], idx) if d == ax else grids[d]
        for d in range(a.ndim)
    )
    v = elementwise.astype(as_var(values), a.dtype)
    return a.at[where_].set(v, mode=mode)


@public
def mask_indices(
    n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *, size: int | None = None
) -> tuple[Variable, Variable]:
    """jnp.mask_indices(n, mask_func, k, size=): the indices where `mask_func(ones((n, n)), k)`
    is nonzero (`size=` required, as jnp under jit)."""
    i, j = nonzero(mask_func(ones((n, n)), k), size=size)
    return i, j
