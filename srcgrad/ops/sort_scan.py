"""Sort and scans in jax.numpy's names: sort, argsort, take_along_axis, the cumulative ops
and diff.

The rows declared here: `sort` (values and the permutation, one lax.sort) and the cumulative
`cumsum`, `cumprod`, `cummax`, `cummin` (lax's, with `axis` and `reverse`); cumprod's
gradient is JAX's, the transpose of its associative scan's JVP.

Layer L3 (the ops): see docs/design.md.
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import jax.numpy as jnp
import numpy as np

from .. import dtypes
from ..builder import as_var, emit
from ..errors import ShapeError
from ..ir import Op, Variable
from ..registry import OutType, register
from ._rules import broadcast_shapes, jax_dtype, norm_axis
from .creation import arange
from .declare import Emitted, defop, public
from .elementwise import (add, astype, equal, greater, isnan, less, multiply, not_equal, subtract,
                          where)
from .grad_helpers import add_n
from .indexing import take
from .manip import _iota, _scatter_along, _window, moveaxis, ravel
from .shape import broadcast_to, concatenate, lax_pad, reshape, rev
from .shape import slice as lax_slice


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
    return (f"tuple(lax.rev(r, ({axis},)) for r in "
            f"lax.sort_key_val({x}, {iota}, {axis}, is_stable={stable}))")


def _g_sort(op: Op, g: list, need: list) -> list:
    return [_scatter_along(g[0], op.outputs[1], op.attrs["axis"])]


register("sort", _sort_rule, _lower_sort, _g_sort, public="sort")


def _sorted(name: str, a: Any, axis: int | None, kind: None, order: None, stable: bool,
            descending: bool) -> list[Variable]:
    """The sort row's outputs: the values and the permutation (jnp.argsort's)."""
    if kind is not None or order is not None:
        raise ShapeError(f"{name}: kind= and order= are not supported (use stable=)", op=name)
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    return emit("sort", [x], {"axis": norm_axis(axis, x.ndim), "stable": bool(stable),
                              "descending": bool(descending),
                              "index_dtype": dtypes.default_int()})


@public
def sort(a: Any, axis: int | None = -1, *, kind: None = None, order: None = None,
         stable: bool = True, descending: bool = False) -> Variable:
    """jnp.sort(a, axis=-1, *, stable=True, descending=False); NaNs sort last (first when
    descending). Descending is the ascending sort reversed, as jnp's, so that the gradient of
    tied values goes where jax.grad sends it."""
    if not descending:
        return _sorted("sort", a, axis, kind, order, stable, False)[0]
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    ax = norm_axis(axis, x.ndim)
    return rev(_sorted("sort", x, ax, kind, order, stable, False)[0], (ax,))


@public
def argsort(a: Any, axis: int | None = -1, *, kind: None = None, order: None = None,
            stable: bool = True, descending: bool = False, dtype: Any = None) -> Variable:
    """jnp.argsort(a, axis=-1, *, stable=True, descending=False, dtype=None)."""
    idx = _sorted("argsort", a, axis, kind, order, stable, descending)[1]
    return idx if dtype is None else astype(idx, dtype)


@public
def take_along_axis(arr: Any, indices: Any, axis: int | None, mode: None = None,
                    fill_value: None = None) -> Variable:
    """jnp.take_along_axis(arr, indices, axis): negative indices count from the end;
    out-of-range indices clamp (jnp fills them with NaN)."""
    if mode is not None or fill_value is not None:
        raise ShapeError("take_along_axis: mode= and fill_value= are not supported",
                         op="take_along_axis")
    x, idx = as_var(arr), as_var(indices)
    if axis is None:
        x, axis = ravel(x), 0
    if idx.ndim != x.ndim or idx.dtype.kind not in "iu":
        raise ShapeError(f"take_along_axis needs integer indices of the array's rank "
                         f"{x.ndim}, got {idx.type_str()}", op="take_along_axis")
    axis = norm_axis(axis, x.ndim)
    rest = broadcast_shapes(x.shape[:axis] + (1,) + x.shape[axis + 1:],
                            idx.shape[:axis] + (1,) + idx.shape[axis + 1:])
    x = broadcast_to(x, rest[:axis] + (x.shape[axis],) + rest[axis + 1:])
    idx = broadcast_to(idx, rest[:axis] + (idx.shape[axis],) + rest[axis + 1:])
    idx = where(less(idx, 0), idx + x.shape[axis], idx)
    xt, it = moveaxis(x, axis, -1), moveaxis(idx, axis, -1)
    rows = int(np.prod(xt.shape[:-1], dtype=np.int64))
    if rows > 1:  # one take over the flattened rows: row r's indices shifted by r * n
        it = it + reshape(arange(rows, dtype=it.dtype) * xt.shape[-1], xt.shape[:-1] + (1,))
    flat = take(reshape(xt, (-1,)), reshape(it, (-1,)), 0)
    return moveaxis(reshape(flat, it.shape), -1, axis)


# ---------------------------------------------------------------- cumulative ops

def _cum_rule(inputs: Sequence[Variable], attrs: dict[str, Any]) -> list[OutType]:
    x = inputs[0]
    norm_axis(attrs["axis"], x.ndim)
    return [(x.shape, x.dtype)]


def _cum_lower(name: str) -> str:
    return f"lax.{name}({{0}}, axis={{axis}}, reverse={{reverse}})"


def _g_cumsum(op: Op, g: Variable) -> Variable:
    return lax_cumsum(g, op.attrs["axis"], not op.attrs["reverse"])


def _shift(v: Variable, axis: int, by: int, fill: float = 0.0) -> Variable:
    """`v` shifted by one along `axis` (`by` = 1: toward higher indices), `fill` coming in."""
    n = v.shape[axis]
    if n == 0:
        return v
    kept = _window(v, axis, 0, n - 1) if by > 0 else _window(v, axis, 1, n)
    if fill == 0.0:
        cfg = [(0, 0, 0)] * v.ndim
        cfg[axis] = (1, 0, 0) if by > 0 else (0, 1, 0)
        return lax_pad(kept, cfg)
    edge = broadcast_to(astype(as_var(fill, like=v), v.dtype),
                        v.shape[:axis] + (1,) + v.shape[axis + 1:])
    return concatenate([edge, kept] if by > 0 else [kept, edge], axis)


def _strided(v: Variable, axis: int, lo: int, hi: int, step: int = 1) -> Variable:
    """`v[..., lo:hi:step, ...]` along `axis` (lax.slice_in_dim)."""
    start, limit, strides = [0] * v.ndim, list(v.shape), [1] * v.ndim
    start[axis], limit[axis], strides[axis] = lo, hi, step
    return lax_slice(v, start, limit, strides)


def _placed(v: Variable, axis: int, n: int, lo: int, step: int = 1) -> Variable:
    """The transpose of `_strided(x, axis, lo, ..., step)` for an `x` of length `n`: `v`'s
    elements at positions lo, lo + step, ... of zeros of that length."""
    m = v.shape[axis]
    cfg = [(0, 0, 0)] * v.ndim
    cfg[axis] = (lo, n - lo - (m - 1) * step - 1, step - 1) if m else (0, n, 0)
    return lax_pad(v, cfg)


def _g_cumprod(op: Op, g: Variable) -> Variable:
    """jax.grad's gradient of cumprod: the transpose of the JVP of lax.associative_scan(mul)
    (JAX's rule on every backend), written out level by level. Pairs are multiplied (level
    l + 1 scans x[0::2] * x[1::2] of level l), the odd outputs are the scan one level down
    and the even ones that scan times x[2::2]; the cotangent runs the same tree back. The
    same products as JAX's, so zeros are exact and infinities give JAX's inf or NaN."""
    x, axis = op.inputs[0], op.attrs["axis"]
    if op.attrs["reverse"]:
        x, g = rev(x, (axis,)), rev(g, (axis,))
    levels = []  # per level: its elements and the pairs' factors a = x[0::2], b = x[1::2]
    while x.shape[axis] >= 2:
        n = x.shape[axis]
        a, b = _strided(x, axis, 0, n - 1, 2), _strided(x, axis, 1, n, 2)
        levels.append((x, a, b))
        x = multiply(a, b)
    scan, forward = x, []  # scan: the forward scan of the level below
    for xl, _, _ in reversed(levels):
        n = xl.shape[axis]
        lhs = _strided(scan, axis, 0, scan.shape[axis] - 1) if n % 2 == 0 else scan
        c = _strided(xl, axis, 2, n, 2)
        forward.append((lhs, c))
        even = concatenate([_strided(xl, axis, 0, 1), multiply(lhs, c)], axis)
        scan = add(_placed(even, axis, n, 0, 2), _placed(scan, axis, n, 1, 2))
    forward.reverse()
    cts, ct = [], g  # down: the cotangent of each level's scan
    for (xl, _, _), (lhs, c) in zip(levels, forward):
        n = xl.shape[axis]
        ct_even, ct_odd = _strided(ct, axis, 2, n, 2), _strided(ct, axis, 1, n, 2)
        ct_lhs = multiply(ct_even, c)
        if n % 2 == 0:
            ct_lhs = _placed(ct_lhs, axis, ct_odd.shape[axis], 0)
        cts.append((ct, ct_even))
        ct = add(ct_odd, ct_lhs)
    for (xl, a, b), (lhs, c), (ct_top, ct_even) in zip(reversed(levels), reversed(forward),
                                                        reversed(cts)):
        n = xl.shape[axis]  # up: ct is the cotangent of this level's pairs
        ct = add_n([_placed(_strided(ct_top, axis, 0, 1), axis, n, 0),
                    _placed(multiply(ct_even, lhs), axis, n, 2, 2),
                    _placed(multiply(ct, b), axis, n, 0, 2),
                    _placed(multiply(ct, a), axis, n, 1, 2)])
    return rev(ct, (axis,)) if op.attrs["reverse"] else ct


def _g_cumulative_extreme(op: Op, g: Variable) -> Variable:
    """Each output's gradient goes to the position of its running extreme (the first one
    where several are equal; JAX splits it by its scan tree); a NaN output's goes nowhere."""
    x, out = op.inputs[0], op.outputs[0]
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]
    n = x.shape[axis]
    if n == 0:
        return g
    if dtypes.is_inexact(out.dtype):  # a NaN result past the first takes no gradient (JAX's)
        first = equal(_iota(x, axis, dtypes.default_int()), n - 1 if reverse else 0)
        g = where(isnan(out) & ~first, 0.0, g)
    better = greater if op.type == "cummax" else less
    if reverse:  # the position counted from the end
        x, out = rev(x, (axis,)), rev(out, (axis,))
    prev = concatenate([_window(x, axis, 0, 1), _window(out, axis, 0, n - 1)], axis)
    new = better(x, prev)
    pos = _iota(x, axis, dtypes.default_int())
    is_first = equal(pos, 0)
    where_new = where(new | is_first, pos, 0)
    idx = cummax(where_new, axis, False)
    if reverse:
        idx = subtract(n - 1, rev(idx, (axis,)))
    return _scatter_along(g, idx, axis)


def _cumulative_front(name: str) -> Any:
    def front(x: Variable, axis: int = 0, reverse: bool = False) -> Emitted:
        x = as_var(x)
        if x.ndim == 0:
            raise ShapeError(f"{name} needs an array of rank >= 1, got {x.type_str()}", op=name)
        return [x], {"axis": norm_axis(axis, x.ndim), "reverse": bool(reverse)}
    front.__name__ = front.__qualname__ = name
    front.__doc__ = f"lax.{name}(operand, axis=0, reverse=False)."
    return front


lax_cumsum = defop("cumsum", _cum_rule, _cum_lower("cumsum"), (_g_cumsum,),
                   export="cumsum")(_cumulative_front("cumsum"))
lax_cumprod = defop("cumprod", _cum_rule, _cum_lower("cumprod"), (_g_cumprod,),
                    export="cumprod")(_cumulative_front("cumprod"))
cummax = defop("cummax", _cum_rule, _cum_lower("cummax"), (_g_cumulative_extreme,))(
    _cumulative_front("cummax"))
cummin = defop("cummin", _cum_rule, _cum_lower("cummin"), (_g_cumulative_extreme,))(
    _cumulative_front("cummin"))


def _cumulative(name: str, a: Any, axis: int | None, dtype: Any, out: None) -> Variable:
    if out is not None:
        raise ShapeError("out= is not supported (JAX arrays are immutable); use the result", op=name)
    x = as_var(a)
    if axis is None:
        x, axis = ravel(x), 0
    want = dtypes.canonical(dtype) if dtype is not None else jax_dtype(
        getattr(jnp, name), x.dtype)
    x = astype(x, want)
    return (lax_cumsum if name == "cumsum" else lax_cumprod)(x, axis)


@public
def cumsum(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.cumsum(a, axis=None, dtype=None, out=None): None flattens; bools and small ints
    accumulate in the default int, as jnp."""
    return _cumulative("cumsum", a, axis, dtype, out)


@public
def cumprod(a: Any, axis: int | None = None, dtype: Any = None, out: None = None) -> Variable:
    """jnp.cumprod(a, axis=None, dtype=None, out=None); the gradient is exact with zeros."""
    return _cumulative("cumprod", a, axis, dtype, out)


@public
def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Variable:
    """jnp.diff: the `n`-th forward difference along `axis` (bools: not_equal), after
    concatenating `prepend` and `append` (scalars broadcast to one slice)."""
    x = as_var(a)
    if x.ndim == 0:
        raise ShapeError("diff needs an array of rank >= 1", op="diff")
    axis = norm_axis(axis, x.ndim)
    n = int(n)
    if n < 0:
        raise ShapeError(f"diff: order n must be non-negative, got {n}", op="diff")
    if n == 0:
        return x
    def edge(extra: Any) -> Variable:
        e = as_var(extra, like=x)
        return broadcast_to(e, x.shape[:axis] + (1,) + x.shape[axis + 1:]) if e.ndim == 0 else e
    parts = ([edge(prepend)] if prepend is not None else []) + [x] + (
        [edge(append)] if append is not None else [])
    out = concatenate(parts, axis) if len(parts) > 1 else x
    for _ in range(n):
        m = out.shape[axis]
        hi, lo = _window(out, axis, builtins.min(1, m), m), _window(out, axis, 0, builtins.max(m - 1, 0))
        out = not_equal(hi, lo) if out.dtype == np.dtype(bool) else subtract(hi, lo)
    return out
