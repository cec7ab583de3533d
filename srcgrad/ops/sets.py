"""jax.numpy's data-dependent-size names with JAX's static `size=` convention: nonzero,
flatnonzero, argwhere, unique (and the array API unique_*), bincount, isin and the set
operations (union1d, intersect1d, setdiff1d, setxor1d). A traced program has static shapes,
so `size=` (bincount: `length=`) is required, as under jax.jit; results are padded with
`fill_value` as JAX pads them.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ..base import dtypes
from ..core.builder import as_var
from ..base.errors import ShapeError
from ..ir.program import Variable
from .creation import arange, full
from ..core.declare import public
from .elementwise import astype, clip, equal, logical_and, logical_not, not_equal, where
from .indexing import take
from .shape import ravel
from .logic import any as any_
from .reduce import argmax, sum
from .shape import concatenate, expand_dims, stack
from .sorting import argsort, sort
from .cumulative import cumsum

UniqueAllResult = namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = namedtuple("UniqueInverseResult", "values inverse_indices")


def _size(size: Any, name: str) -> int:
    if size is None:
        raise ShapeError(
            f"{name} needs size= in srcgrad (the result's length must be static, as under jax.jit)",
            op=name,
        )
    return int(size)


def _first_true(mask: Variable, size: int) -> tuple[Variable, Variable]:
    """The positions of the first `size` True entries of a 1-D mask, in order, and which of
    the `size` slots hold one (a stable compaction by sorting)."""
    n = mask.shape[0]
    i = arange(n, dtype=dtypes.default_int())
    order = argsort(where(mask, i, i + n))
    if size > n:
        order = concatenate([order, full((size - n,), 0, order.dtype)], 0)
    pos = order[:size]
    valid = arange(size, dtype=dtypes.default_int()) < sum(mask)
    return pos, valid


@public
def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> tuple[Variable, ...]:
    """jnp.nonzero(a, size=, fill_value=0): the index arrays of the nonzero elements, the
    first `size` of them, padded with `fill_value` (one per axis, or a tuple)."""
    a = as_var(a)
    n = _size(size, "nonzero")
    if a.ndim == 0:
        raise ShapeError("nonzero of a 0-d array: use atleast_1d", op="nonzero")
    pos, valid = _first_true(ravel(a != 0), n)
    fills = fill_value if isinstance(fill_value, (tuple, list)) else [fill_value] * a.ndim
    out, stride = [], 1
    coords = []
    for d in reversed(a.shape):
        coords.append((pos // stride) % d if d else pos)
        stride *= d
    for c, f in zip(reversed(coords), fills):
        out.append(where(valid, c, 0 if f is None else f))
    return tuple(out)


@public
def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Variable:
    """jnp.flatnonzero: nonzero of the flattened array."""
    return nonzero(ravel(as_var(a)), size=size, fill_value=fill_value)[0]


@public
def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Variable:
    """jnp.argwhere: the indices of the nonzero elements as rows, (size, a.ndim)."""
    a = as_var(a)
    if a.ndim == 0:
        a = a.reshape((1,))
        idx = nonzero(a, size=size, fill_value=fill_value)
        return expand_dims(idx[0], -1)[:, :0]
    return stack(nonzero(a, size=size, fill_value=fill_value), -1)


@public
def bincount(
    x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None
) -> Variable:
    """jnp.bincount(x, weights, minlength, length=): counts (or summed weights) per value of
    the non-negative ints `x`; negative values count as 0 and values >= length are dropped,
    as JAX does; differentiable in `weights`."""
    x = as_var(x)
    if x.ndim != 1 or x.dtype.kind not in "iub":
        raise ShapeError(f"bincount needs a 1-D integer array, got {x.type_str()}", op="bincount")
    n = max(_size(length, "bincount (length=)"), int(minlength))
    hits = expand_dims(clip(x, 0), -1) == arange(n, dtype=x.dtype)
    if weights is None:
        return sum(hits, 0)
    w = as_var(weights)
    return sum(where(hits, expand_dims(w, -1), 0), 0)


@public
def isin(
    element: Any,
    test_elements: Any,
    assume_unique: bool = False,
    invert: bool = False,
    *,
    method: str = "auto",
) -> Variable:
    """jnp.isin: whether each element occurs in `test_elements`."""
    e, t = as_var(element), ravel(as_var(test_elements))
    if t.shape[0] == 0:
        return full(e.shape, invert, np.dtype(bool))
    found = any_(expand_dims(e, -1) == t, -1)
    return ~found if invert else found


def _unique(
    ar: Any, size: int | None, fill_value: Any, name: str
) -> tuple[Variable, Variable, Variable, Variable, Variable]:
    """(values, first indices, inverse indices, counts, valid) of the flattened array."""
    x = ravel(as_var(ar))
    n = x.shape[0]
    k = _size(size, name)
    perm = argsort(x, stable=True)
    s = take(x, perm)
    first = concatenate([full((1,), True, np.dtype(bool)), s[1:] != s[:-1]], 0)
    pos, valid = _first_true(first, k)
    pos_c = clip(pos, 0, n - 1)
    values = take(s, pos_c)
    index = take(perm, pos_c)
    nxt = concatenate([pos_c[1:], full((1,), n, pos_c.dtype)], 0)
    nxt = where(arange(k, dtype=pos_c.dtype) + 1 < sum(first), nxt, n)
    counts = where(valid, nxt - pos_c, 0)
    inv_sorted = cumsum(astype(first, dtypes.default_int())) - 1
    inverse = take(inv_sorted, argsort(perm))
    fill = (
        values[0] if fill_value is None else astype(as_var(fill_value, like=values), values.dtype)
    )
    values = where(valid, values, fill)
    index = where(valid, index, index[0])
    return values, index, inverse.reshape(as_var(ar).shape), counts, valid


@public
def unique(
    ar: Any,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: int | None = None,
    *,
    equal_nan: bool = True,
    size: int | None = None,
    fill_value: Any = None,
) -> Any:
    """jnp.unique(ar, ..., size=, fill_value=): the sorted unique values (padded with
    fill_value, default the smallest), with first indices, inverse indices and counts."""
    if axis is not None:
        raise ShapeError("unique's axis= is not supported", op="unique")
    values, index, inverse, counts, _ = _unique(ar, size, fill_value, "unique")
    extra = [
        v
        for v, want in ((index, return_index), (inverse, return_inverse), (counts, return_counts))
        if want
    ]
    return (values, *extra) if extra else values


@public
def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Variable:
    """jnp.unique_values: the sorted unique values."""
    return _unique(x, size, fill_value, "unique_values")[0]


@public
def unique_counts(
    x: Any, /, *, size: int | None = None, fill_value: Any = None
) -> UniqueCountsResult:
    """jnp.unique_counts: (values, counts)."""
    values, _, _, counts, _ = _unique(x, size, fill_value, "unique_counts")
    return UniqueCountsResult(values, counts)


@public
def unique_inverse(
    x: Any, /, *, size: int | None = None, fill_value: Any = None
) -> UniqueInverseResult:
    """jnp.unique_inverse: (values, inverse_indices)."""
    values, _, inverse, _, _ = _unique(x, size, fill_value, "unique_inverse")
    return UniqueInverseResult(values, inverse)


@public
def unique_all(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueAllResult:
    """jnp.unique_all: (values, indices, inverse_indices, counts)."""
    values, index, inverse, counts, _ = _unique(x, size, fill_value, "unique_all")
    return UniqueAllResult(values, index, inverse, counts)


@public
def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Variable:
    """jnp.union1d(ar1, ar2, size=, fill_value=): the sorted unique values of both arrays."""
    return unique(
        concatenate([ravel(as_var(ar1)), ravel(as_var(ar2))]), size=size, fill_value=fill_value
    )


# ---------------------------------------------------------------- set operations (size=)


def _distinct(s: Variable) -> Variable:
    """Of a sorted 1-D array: which entries are the first of their value."""
    return concatenate([full((1,), True, np.dtype(bool)), not_equal(s[1:], s[:-1])])


def _compact(
    s: Variable, keep: Variable, size: int | None, fill_value: Any, name: str, smallest_fill: bool
) -> tuple[Variable, Variable, Variable]:
    """The first `size` entries of sorted `s` where `keep`, padded as jax.numpy pads (with
    `fill_value`; if None, the smallest result when `smallest_fill`, else 0), their positions
    in `s` and which slots hold one."""
    if size is None:
        raise ShapeError(
            f"{name} needs size= in srcgrad (the result's length must be static, as under jax.jit)",
            op=name,
        )
    (pos,) = nonzero(keep, size=size)
    valid = arange(size, dtype=dtypes.default_int()) < sum(keep)
    vals = s[pos]
    if fill_value is None:
        fill = where(valid[0], vals[0], 0) if smallest_fill else 0
    else:
        fill = astype(as_var(fill_value), s.dtype)
    return where(valid, vals, fill), pos, valid


def _flat_pair(ar1: Any, ar2: Any) -> tuple[Variable, Variable]:
    a, b = ravel(as_var(ar1)), ravel(as_var(ar2))
    dt = dtypes.promote(a.dtype, b.dtype)
    return astype(a, dt), astype(b, dt)


def _member(x: Variable, of: Variable) -> Variable:
    if of.shape[0] == 0:
        return full(x.shape, False, np.dtype(bool))
    return any_(equal(expand_dims(x, -1), of), -1)


@public
def intersect1d(
    ar1: Any,
    ar2: Any,
    assume_unique: bool = False,
    return_indices: bool = False,
    *,
    size: int | None = None,
    fill_value: Any = None,
) -> Any:
    """jnp.intersect1d(ar1, ar2, size=, fill_value=): the sorted values in both arrays, padded
    as jax.numpy pads; with `return_indices`, each value's first index in ar1 and in ar2
    (padded with the arrays' sizes)."""
    a, b = _flat_pair(ar1, ar2)
    order = argsort(a)
    s = a[order]
    vals, pos, valid = _compact(
        s, logical_and(_distinct(s), _member(s, b)), size, fill_value, "intersect1d", True
    )
    if not return_indices:
        return vals
    i1 = where(valid, astype(order[pos], dtypes.default_int()), a.shape[0])
    first2 = argmax(equal(expand_dims(vals, -1), b), -1) if b.shape[0] else vals * 0
    i2 = where(valid, astype(first2, dtypes.default_int()), b.shape[0])
    return vals, i1, i2


@public
def setdiff1d(
    ar1: Any,
    ar2: Any,
    assume_unique: bool = False,
    *,
    size: int | None = None,
    fill_value: Any = None,
) -> Variable:
    """jnp.setdiff1d(ar1, ar2, size=, fill_value=0): the sorted values of ar1 not in ar2,
    padded with `fill_value` (0 by default), in ar1's dtype."""
    a = ravel(as_var(ar1))
    s = sort(a)
    keep = logical_and(_distinct(s), logical_not(_member(s, ravel(as_var(ar2)))))
    return _compact(s, keep, size, 0 if fill_value is None else fill_value, "setdiff1d", False)[0]


@public
def setxor1d(
    ar1: Any,
    ar2: Any,
    assume_unique: bool = False,
    *,
    size: int | None = None,
    fill_value: Any = None,
) -> Variable:
    """jnp.setxor1d(ar1, ar2, size=, fill_value=): the sorted values in exactly one of the
    arrays, padded as jax.numpy pads."""
    a, b = _flat_pair(ar1, ar2)
    s = sort(concatenate([a, b]))
    keep = logical_and(_distinct(s), not_equal(_member(s, a), _member(s, b)))
    return _compact(s, keep, size, fill_value, "setxor1d", True)[0]
