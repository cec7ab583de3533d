"""Sorting, searching and partitioning in jax.numpy's names: sort, argsort, take_along_axis,
searchsorted, digitize, partition, argpartition, top_k and lexsort.

The row declared here is `sort` (values and the permutation, one lax.sort); the rest are
composites of it, of gathers and of comparisons, following jax.numpy's own implementation
(ties included), so values and gradients agree with it.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..base import dtypes
from ..core.builder import as_var, emit
from ..base.errors import ShapeError
from ..ir.program import Op, Variable
from ..core.registry import OutType, register
from .rules import broadcast_shapes, norm_axis
from .creation import arange, full
from ..core.declare import public
from .elementwise import astype, less, where
from .indexing import take
from .manip import scatter_along, flip, moveaxis
from .shape import ravel
from .shape import broadcast_to, concatenate, expand_dims, reshape, rev, swapaxes
from .operands import checked_axis, promoted
from . import elementwise
from .lax_primitives import top_k_indices
from .reduce import sum


# ---------------------------------------------------------------- sort


def _sort_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    if x.dtype.kind == "c":
        raise ShapeError(f"sort of complex values is not supported, got {x.type_str()}")
    return [(x.shape, x.dtype), (x.shape, attrs["index_dtype"])]


def _lower_sort(args: list[str], attrs: dict[str, str]) -> str:
    x, axis, stable = args[0], attrs["axis"], attrs["stable"]
    iota = f"lax.broadcasted_iota({attrs['index_dtype']}, {x}.shape, {axis})"
    if attrs["descending"] != "True":
        return f"lax.sort_key_val({x}, {iota}, {axis}, is_stable={stable})"
    if stable == "True":  # reversed first, so that equal values keep their order (as jnp)
        x, iota = f"lax.rev({x}, ({axis},))", f"lax.rev({iota}, ({axis},))"
    return (
        f"tuple(lax.rev(r, ({axis},)) for r in "
        f"lax.sort_key_val({x}, {iota}, {axis}, is_stable={stable}))"
    )


def _g_sort(op: Op, g: list, need: list) -> list:
    return [scatter_along(g[0], op.outputs[1], op.attrs["axis"])]


register("sort", _sort_rule, _lower_sort, _g_sort, public="sort")


def sort_with_permutation(
    name: str, a: Any, axis: int | None, kind: None, order: None, stable: bool, descending: bool
) -> list[Variable]:
    """The sort row's outputs: the values and the permutation (jnp.argsort's)."""
    if kind is not None or order is not None:
        raise ShapeError(f"{name}: kind= and order= are not supported (use stable=)", op=name)
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    return emit(
        "sort",
        [x],
        {
            "axis": norm_axis(axis, x.ndim),
            "stable": bool(stable),
            "descending": bool(descending),
            "index_dtype": dtypes.default_int(),
        },
    )


@public
def sort(
    a: Any,
    axis: int | None = -1,
    *,
    kind: None = None,
    order: None = None,
    stable: bool = True,
    descending: bool = False,
) -> Variable:
    """jnp.sort(a, axis=-1, *, stable=True, descending=False); NaNs sort last (first when
    descending). Descending is the ascending sort reversed, as jnp's, so that the gradient of
    tied values goes where jax.grad sends it."""
    if not descending:
        return sort_with_permutation("sort", a, axis, kind, order, stable, False)[0]
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    ax = norm_axis(axis, x.ndim)
    return rev(sort_with_permutation("sort", x, ax, kind, order, stable, False)[0], (ax,))


@public
def argsort(
    a: Any,
    axis: int | None = -1,
    *,
    kind: None = None,
    order: None = None,
    stable: bool = True,
    descending: bool = False,
    dtype: Any = None,
) -> Variable:
    """jnp.argsort(a, axis=-1, *, stable=True, descending=False, dtype=None)."""
    idx = sort_with_permutation("argsort", a, axis, kind, order, stable, descending)[1]
    return idx if dtype is None else astype(idx, dtype)


@public
def take_along_axis(
    arr: Any, indices: Any, axis: int | None, mode: None = None, fill_value: None = None
) -> Variable:
    """jnp.take_along_axis(arr, indices, axis): negative indices count from the end;
    out-of-range indices clamp (jnp fills them with NaN)."""
    if mode is not None or fill_value is not None:
        raise ShapeError(
            "take_along_axis: mode= and fill_value= are not supported", op="take_along_axis"
        )
    x, idx = as_var(arr), as_var(indices)
    if axis is None:
        x, axis = ravel(x), 0
    if idx.ndim != x.ndim or idx.dtype.kind not in "iu":
        raise ShapeError(
            f"take_along_axis needs integer indices of the array's rank "
            f"{x.ndim}, got {idx.type_str()}",
            op="take_along_axis",
        )
    axis = norm_axis(axis, x.ndim)
    rest = broadcast_shapes(
        x.shape[:axis] + (1,) + x.shape[axis + 1 :], idx.shape[:axis] + (1,) + idx.shape[axis + 1 :]
    )
    x = broadcast_to(x, rest[:axis] + (x.shape[axis],) + rest[axis + 1 :])
    idx = broadcast_to(idx, rest[:axis] + (idx.shape[axis],) + rest[axis + 1 :])
    idx = where(less(idx, 0), idx + x.shape[axis], idx)
    xt, it = moveaxis(x, axis, -1), moveaxis(idx, axis, -1)
    rows = int(np.prod(xt.shape[:-1], dtype=np.int64))
    if rows > 1:  # one take over the flattened rows: row r's indices shifted by r * n
        it = it + reshape(arange(rows, dtype=it.dtype) * xt.shape[-1], xt.shape[:-1] + (1,))
    flat = take(reshape(xt, (-1,)), reshape(it, (-1,)), 0)
    return moveaxis(reshape(flat, it.shape), -1, axis)


# ---------------------------------------------------------------- searching and partitioning


@public
def searchsorted(
    a: Any, v: Any, side: str = "left", sorter: Any = None, *, method: str = "scan"
) -> Variable:
    """jnp.searchsorted: insertion indices of `v` into the sorted 1-D `a` (a count of the
    elements below each value: exact, no gradient)."""
    a, v = as_var(a), as_var(v)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted needs a 1-D array, got {a.type_str()}", op="searchsorted")
    if sorter is not None:
        from .indexing import take

        a = take(a, as_var(sorter))
    if side not in ("left", "right"):
        raise ShapeError(f"side must be 'left' or 'right', got {side!r}", op="searchsorted")
    a, v = promoted(a, v)
    vv = expand_dims(v, -1)
    below = (a < vv) if side == "left" else (a <= vv)
    return astype(sum(below, -1), np.int32)  # jnp.searchsorted's dtype, x64 or not


@public
def digitize(x: Any, bins: Any, right: bool = False, *, method: str | None = None) -> Variable:
    """jnp.digitize: the bin of each value (bins increasing or decreasing)."""
    b = as_var(bins)
    side = "left" if right else "right"
    if b.ndim != 1:
        raise ShapeError(f"digitize needs 1-D bins, got {b.type_str()}", op="digitize")
    inc = searchsorted(b, x, side)
    dec = b.shape[0] - searchsorted(b[::-1], x, "left" if side == "right" else "right")
    if b.shape[0] < 2:
        return inc
    return where(b[-1] >= b[0], inc, dec)


@public
def partition(a: Any, kth: int, axis: int = -1) -> Variable:
    """jnp.partition: the `kth+1` smallest values ascending, then the rest descending (as
    jax's top_k-based result)."""
    a = as_var(a)
    ax = checked_axis(axis, a.ndim, "partition")
    k = checked_axis(kth, a.shape[ax], "partition (kth)")
    s = sort(swapaxes(a, ax, -1), -1)
    out = concatenate([s[..., : k + 1], flip(s[..., k + 1 :], -1)], -1)
    return swapaxes(out, -1, ax)


@public
def top_k(
    a: Any, k: int, /, *, axis: int = -1, mode: str = "largest", sorted: bool = True
) -> tuple[Variable, Variable]:
    """jnp.top_k: the `k` largest (`mode` 'largest') or smallest values along `axis`, sorted,
    and their int32 indices (ties: the lower index first), as lax.top_k finds them. The
    values are read at the indices, so the gradient flows to them."""
    del sorted  # always sorted, as jax's
    a = as_var(a)
    if np.issubdtype(a.dtype, np.complexfloating):
        raise ShapeError(f"top_k is not defined for complex input {a.type_str()}", op="top_k")
    if mode not in ("largest", "smallest"):
        raise ShapeError(f"mode must be 'largest' or 'smallest', got {mode!r}", op="top_k")
    ax = checked_axis(axis, a.ndim, "top_k")
    x = swapaxes(a, ax, -1)
    key = (
        x
        if mode == "largest"
        else (
            elementwise.logical_not(x)
            if a.dtype == np.dtype(bool)
            else elementwise.negative(elementwise.add(x, 1))
            if np.issubdtype(a.dtype, np.unsignedinteger)
            else elementwise.negative(x)
        )
    )
    idx = top_k_indices(key, k=k)
    return swapaxes(take_along_axis(x, idx, -1), -1, ax), swapaxes(idx, -1, ax)


@public
def argpartition(a: Any, kth: int, axis: int = -1) -> Variable:
    """jnp.argpartition: the indices of the `kth+1` smallest values (ascending, ties by index),
    then the other indices in increasing order (as jax's result)."""
    a = as_var(a)
    ax = checked_axis(axis, a.ndim, "argpartition")
    k = checked_axis(kth, a.shape[ax], "argpartition (kth)")
    order = argsort(swapaxes(a, ax, -1), -1)
    rest = argsort(argsort(order, -1) <= k, -1)  # not-bottom first, by index
    out = concatenate([order[..., : k + 1], rest[..., : a.shape[ax] - k - 1]], -1)
    return elementwise.astype(swapaxes(out, -1, ax), np.dtype(np.int32))  # top_k's index dtype


@public
def lexsort(keys: Sequence[Any], axis: int = -1) -> Variable:
    """jnp.lexsort: the stable order sorting by the last key, then the one before, ..."""
    keys = [as_var(k) for k in keys]
    if not keys:
        raise ShapeError("lexsort needs at least one key", op="lexsort")
    if len({k.shape for k in keys}) > 1:
        raise ShapeError(
            f"lexsort's keys need one shape, got {', '.join(k.type_str() for k in keys)}",
            op="lexsort",
        )
    if keys[0].ndim == 0:
        return full((), 0, dtypes.default_int())
    ax = checked_axis(axis, keys[0].ndim, "lexsort")
    idx = None
    for k in keys:  # least significant first: stable sorts compose (LSD radix)
        kk = k if idx is None else take_along_axis(k, idx, ax)
        step = argsort(kk, ax)
        idx = step if idx is None else take_along_axis(idx, step, ax)
    return elementwise.astype(idx, dtypes.default_int())
