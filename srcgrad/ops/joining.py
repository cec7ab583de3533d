"""Joining and splitting arrays and adding or removing elements, in jax.numpy's names:
concatenate's forms (concat, hstack, vstack, dstack, column_stack, block, append), the split
family, unstack, delete and insert with static positions. Composites of static slices and
`concatenate`, so their gradients come from those ops.

Layer L3 (the ops): see docs/design.md.
"""

from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from ..base.errors import ShapeError
from ..core.builder import as_var
from ..core.declare import public
from ..ir.program import Variable
from .cumulative import expand_to
from .elementwise import astype
from .manip import atleast_1d, atleast_2d, atleast_3d, moveaxis, static_ints, window
from .rules import norm_axis
from .shape import broadcast_to, concatenate, ravel, reshape


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
        raise ShapeError(
            f"{name} needs static positions (an int, a list of ints or a slice)", op=name
        )
    if isinstance(obj, slice):
        return list(range(n))[obj]
    return [int(i) for i in np.atleast_1d(np.asarray(obj))]


@public
def delete(
    arr: Any, obj: Any, axis: int | None = None, *, assume_unique_indices: bool = False
) -> Variable:
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
    slot = a.shape[:axis] + (len(pos),) + a.shape[axis + 1 :]
    if v.ndim == a.ndim and len(pos) == 1 and v.shape[axis] != 1:
        slot = a.shape[:axis] + (v.shape[axis],) + a.shape[axis + 1 :]
        pos = pos * v.shape[axis]
    v = moveaxis(broadcast_to(v if v.ndim == a.ndim else expand_to(v, a.ndim, axis), slot), axis, 0)
    a0 = moveaxis(a, axis, 0)
    pieces, start = [], 0
    order = sorted(range(len(pos)), key=lambda k: (pos[k], k))
    for k in order:
        if pos[k] > start:
            pieces.append(a0[start : pos[k]])
            start = pos[k]
        pieces.append(v[k : k + 1])
    if start < n:
        pieces.append(a0[start:])
    return moveaxis(concatenate(pieces, 0), 0, axis)


@public
def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Variable:
    """jnp.concat: concatenate (the array API name)."""
    return concatenate(arrays, axis)


@public
def array_split(
    ary: Any, indices_or_sections: int | Sequence[int], axis: int = 0
) -> list[Variable]:
    """jnp.array_split: `n` nearly equal sections (the first ones one longer) or split points."""
    x = as_var(ary)
    axis = norm_axis(axis, x.ndim)
    n = x.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ShapeError(f"number of sections must be larger than 0, got {k}", op="array_split")
        size, extra = divmod(n, k)
        bounds = np.cumsum([0] + [size + 1] * extra + [size] * (k - extra)).tolist()
    else:
        points = static_ints(indices_or_sections, "split indices", "split")
        bounds = [0] + points + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        lo, hi, _ = builtins.slice(lo, hi).indices(n)
        out.append(window(x, axis, lo, builtins.max(lo, hi)))
    return out


@public
def split(ary: Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> list[Variable]:
    """jnp.split: `n` equal sections (an error if the axis does not divide) or split points."""
    x = as_var(ary)
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        size = x.shape[norm_axis(axis, x.ndim)]
        if k <= 0 or size % k:
            raise ShapeError(
                f"array split does not result in an equal division: an axis of "
                f"size {size} into {k} sections",
                op="split",
            )
    return array_split(x, indices_or_sections, axis)


def _split_at(name: str, axis: int, min_ndim: int) -> Any:
    def fn(ary: Any, indices_or_sections: int | Sequence[int]) -> list[Variable]:
        x = as_var(ary)
        if x.ndim < min_ndim:
            raise ShapeError(
                f"{name} needs an array of rank at least {min_ndim}, got {x.type_str()}", op=name
            )
        return split(x, indices_or_sections, axis if x.ndim > 1 or name != "hsplit" else 0)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"jnp.{name}(ary, indices_or_sections): split along axis {axis}."
    return public(fn)


hsplit = _split_at("hsplit", 1, 1)


vsplit = _split_at("vsplit", 0, 2)


dsplit = _split_at("dsplit", 2, 3)


def _as_list(tup: Any, name: str) -> list[Variable]:
    vs = [as_var(t) for t in tup]  # a traced array is a sequence of its rows
    if not vs:
        raise ShapeError(f"{name} needs at least one array", op=name)
    return vs


def _cast_all(vs: list[Variable], dtype: Any) -> list[Variable]:
    return vs if dtype is None else [astype(v, dtype) for v in vs]


@public
def hstack(tup: Sequence[Any], dtype: Any = None) -> Variable:
    """jnp.hstack: concatenate along axis 1 (axis 0 for 1-D arrays)."""
    vs = _cast_all([atleast_1d(v) for v in _as_list(tup, "hstack")], dtype)
    return concatenate(vs, 0 if vs[0].ndim == 1 else 1)


@public
def vstack(tup: Sequence[Any], dtype: Any = None) -> Variable:
    """jnp.vstack: concatenate along axis 0 after atleast_2d."""
    return concatenate(_cast_all([atleast_2d(v) for v in _as_list(tup, "vstack")], dtype), 0)


@public
def row_stack(tup: Sequence[Any], dtype: Any = None) -> Variable:
    """NumPy's row_stack (= vstack)."""
    return vstack(tup, dtype)


@public
def dstack(tup: Sequence[Any], dtype: Any = None) -> Variable:
    """jnp.dstack: concatenate along axis 2 after atleast_3d."""
    return concatenate(_cast_all([atleast_3d(v) for v in _as_list(tup, "dstack")], dtype), 2)


@public
def column_stack(tup: Sequence[Any]) -> Variable:
    """jnp.column_stack: 1-D arrays become columns; concatenate along axis 1."""
    vs = [reshape(v, (v.size, 1)) if v.ndim < 2 else v for v in _as_list(tup, "column_stack")]
    return concatenate(vs, 1)


@public
def append(arr: Any, values: Any, axis: int | None = None) -> Variable:
    """jnp.append: concatenate `values` after `arr` (both flattened when `axis` is None)."""
    x = as_var(arr)
    v = as_var(values, like=x)
    if axis is None:
        return concatenate([ravel(x), ravel(v)], 0)
    return concatenate([x, v], axis)


@public
def unstack(x: Any, /, *, axis: int = 0) -> tuple[Variable, ...]:
    """jnp.unstack: the slices of `x` along `axis`."""
    x = as_var(x)
    x = moveaxis(x, axis, 0)
    return tuple(x[i] for i in range(x.shape[0]))
